// Attention kernels at DeepSeek -mla 1 shapes (MQA over the 576-value latent row, V = its first 512),
// per cache type and kernel level, through the engine's own entry point (mla_attention.h:
// mqa_attend: flash-decoding for TG, zig-zag row blocks for PP) on one thread pool.
//   BM_attn_TG/<heads>/<depth>/<type>/<isa>   one query token (M = heads rows) over `depth` rows
//   BM_attn_PP/<heads>/<depth>/<type>/<isa>   512 query tokens (causal) after `depth` cached rows
//   (isa amx appears only on CPUs with AMX: int8 tiles for q8_KV, bf16 tiles for the other types)
// Counters: tok/s (query tokens per second), GB/s (cache bytes read once per call: depth(+512)
// rows), GFLOP/s (2·(576+512) per visible (row, KV row) pair).
//   LATTE_BENCH_THREADS=N (default 2); filter with --benchmark_filter, repeat with
//   --benchmark_repetitions=3 --benchmark_report_aggregates_only=true for medians.
//   avx512 variants to compare (read by the kernel on every call): LATTE_ROWS16=0 turns the 16-row
//   TG paths (q8_0, q8_KV; 16 heads) off, LATTE_PV=bf16 keeps q8 P·V in bf16 instead of int8.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "mla_attention.h"
#include "threadpool.h"

namespace {

constexpr int kDk = 576, kDv = 512, kPP = 512;

unsigned n_threads() {
    const char* e = std::getenv("LATTE_BENCH_THREADS");
    return e && *e ? static_cast<unsigned>(std::atoi(e)) : 2u;
}

latte::ThreadPool& pool() {
    static latte::ThreadPool p(n_threads());
    return p;
}

struct Setup {
    std::vector<uint8_t> cache;
    size_t ldk;
    std::vector<float> q, o;
    std::vector<int> kv_len;
    int64_t M;
    int n_kv;
    double flops = 0.0;
};

Setup make(int heads, int depth, int tokens, latte::GGMLType t) {
    Setup s;
    s.n_kv = depth + tokens;
    s.M = static_cast<int64_t>(heads) * tokens;
    s.ldk = latte::row_bytes(t, kDk);
    s.cache.resize(s.ldk * s.n_kv);
    std::mt19937 rng(1);
    std::normal_distribution<float> nd;
    std::vector<float> row(kDk);
    for (int j = 0; j < s.n_kv; ++j) {
        for (auto& x : row) x = nd(rng);
        latte::quantize_row(t, row.data(), s.cache.data() + s.ldk * j, kDk);
    }
    s.q.resize(static_cast<size_t>(s.M) * kDk);
    for (auto& x : s.q) x = nd(rng);
    s.o.resize(static_cast<size_t>(s.M) * kDv);
    s.kv_len.resize(static_cast<size_t>(s.M));
    for (int tk = 0; tk < tokens; ++tk)
        for (int h = 0; h < heads; ++h) {
            s.kv_len[static_cast<size_t>(tk) * heads + h] = depth + tk + 1;
            s.flops += 2.0 * (kDk + kDv) * (depth + tk + 1);
        }
    return s;
}

void run(benchmark::State& state, int heads, int depth, int tokens, latte::GGMLType t, latte::kernels::Isa isa) {
    if (!latte::kernels::isa_available(isa)) {
        state.SkipWithError("kernel level not available on this CPU");
        return;
    }
    const auto& tab = latte::kernels::table_for(isa);
    Setup s = make(heads, depth, tokens, t);
    const float scale = 1.0f / std::sqrt(192.0f);
    for (auto _ : state) {
        latte::mqa_attend(tab, true, s.cache.data(), s.ldk, t, s.M, s.n_kv, kDk, kDv, s.q.data(), s.kv_len.data(), scale,
                          s.o.data(), pool());
        benchmark::DoNotOptimize(s.o.data());
        benchmark::ClobberMemory();
    }
    const double it = static_cast<double>(state.iterations());
    state.counters["tok/s"] = benchmark::Counter(tokens * it, benchmark::Counter::kIsRate);
    state.counters["GB/s"] = benchmark::Counter(static_cast<double>(s.ldk) * s.n_kv * it * 1e-9, benchmark::Counter::kIsRate);
    state.counters["GFLOP/s"] = benchmark::Counter(s.flops * it * 1e-9, benchmark::Counter::kIsRate);
    state.SetLabel(std::string(latte::type_name(t)) + " " + tab.name + " " + std::to_string(n_threads()) + "t");
}

void register_all() {
    using latte::GGMLType;
    using latte::kernels::Isa;
    const GGMLType types[] = {GGMLType::F16, GGMLType::BF16, GGMLType::Q8_0, GGMLType::Q8_KV};
    // amx only where this CPU has it (else every amx point would be an error line)
    std::vector<Isa> isas = {Isa::Scalar, Isa::Avx2, Isa::Avx512};
    if (latte::kernels::isa_available(Isa::Amx)) isas.push_back(Isa::Amx);
    for (int heads : {16, 128}) {
        for (int depth : {1024, 4096, 8192, 16384, 32768, 65536}) {
            if (heads == 128 && depth > 32768) continue;
            for (GGMLType t : types)
                for (Isa isa : isas) {
                    // scalar only at the shallow depths (the speedup baseline): deeper takes seconds
                    if (isa == Isa::Scalar && depth > 4096) continue;
                    const std::string name = "BM_attn_TG/h" + std::to_string(heads) + "/d" + std::to_string(depth) + "/" +
                                             latte::type_name(t) + "/" + latte::kernels::isa_name(isa);
                    benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { run(st, heads, depth, 1, t, isa); })
                        ->Unit(benchmark::kMillisecond)
                        ->UseRealTime();
                }
        }
        for (int depth : {0, 1024, 4096, 16384}) {
            if (heads == 128 && depth > 0) continue;  // 128 heads × 512 tokens × 4K: minutes per point
            for (GGMLType t : types)
                for (Isa isa : isas) {
                    // depth 16K: the SIMD levels only (avx2 there takes seconds per call on 2 threads)
                    if ((isa == Isa::Scalar && depth > 0) || (isa == Isa::Avx2 && depth > 4096)) continue;
                    const std::string name = "BM_attn_PP/h" + std::to_string(heads) + "/d" + std::to_string(depth) + "/" +
                                             latte::type_name(t) + "/" + latte::kernels::isa_name(isa);
                    benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { run(st, heads, depth, kPP, t, isa); })
                        ->Unit(benchmark::kMillisecond)
                        ->UseRealTime();
                }
        }
    }
}

const int registered = (register_all(), 0);

}  // namespace

// The weight matmul entries of the kernel table (kernels/dispatch.h, GemmFn) per weight type and ISA
// level, threaded as src/forward.cpp's matmul() does (activation prepared once, blocks of 16 rows
// over the pool).
//   BM_gemm_TG/<type>/<isa>/<n_in>x<n_out>/threads:N — one token (GEMV): counter bytes/s = weight
//     bytes read per second (compare with the memory bandwidth: 14.6 GB/s 1 thread, 28.7 GB/s 2 on
//     the dev box); shapes 2048→10944 (dense up/gate), 10944→2048 (down; not for K-quants: 10944 is
//     not a multiple of 256), 2048→102400 (V2 head), 2048→1408 (one expert's up/gate; fits in L3).
//   BM_gemm_PP/<type>/<isa>/2048x2048/tokens:512/threads:N, .../2048x1408/tokens:64|32|16|8/...
//     (one expert's share of a ubatch), .../10944x2048/tokens:512 and (q8_0_r16 only)
//     .../16384x7168/tokens:512 (long rows: the AMX path's k-blocks) — counter FLOP/s (2·n_in·n_out·tokens). isa amx: q8_0_r16/q4_0_r16
//     through bf16 tiles (kernels/amx/gemm.cpp), other types as avx512.
// LATTE_BENCH_THREADS=1,2 (default 1,2). The head in f32 (839 MB) is left out. q4_K/q5_K/q6_K: weights
// quantised by latte's reference quantiser (ggml's block layout). q8_0_r16/q4_0_r16:
// the q8_0/q4_0 weights repacked as the loader does (latte::repack_r16), same bytes.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "latte/types.h"
#include "threadpool.h"

namespace {

using latte::GGMLType;
namespace kernels = latte::kernels;

std::vector<int> env_threads() {
    std::vector<int> v;
    const char* e = std::getenv("LATTE_BENCH_THREADS");
    std::string s = e && *e ? e : "1,2";
    size_t i = 0;
    while (i < s.size()) {
        const size_t j = s.find(',', i);
        v.push_back(std::atoi(s.substr(i, j - i).c_str()));
        if (j == std::string::npos) break;
        i = j + 1;
    }
    return v;
}

// n_out rows of n_in: a 64-row random pattern, quantised properly, tiled over the whole matrix.
struct FreeDeleter {
    void operator()(uint8_t* p) const { std::free(p); }
};
struct Weights {
    std::unique_ptr<uint8_t[], FreeDeleter> data;  // from aligned_alloc: free, not delete[]
    size_t ldw = 0, bytes = 0;
};
Weights make_weights(GGMLType t, int64_t n_in, int64_t n_out) {
    if (t == GGMLType::Q8_0_R16 || t == GGMLType::Q4_0_R16) {  // Q8_0/Q4_0 repacked as the loader does
        const GGMLType base = latte::r16_base(t);
        Weights q = make_weights(base, n_in, n_out), w;
        w.ldw = q.ldw;
        w.bytes = q.bytes;
        w.data.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (w.bytes + 63) & ~size_t{63})));
        latte::repack_r16(base, q.data.get(), n_in, n_out, w.data.get());
        return w;
    }
    Weights w;
    w.ldw = latte::row_bytes(t, n_in);
    w.bytes = w.ldw * static_cast<size_t>(n_out);
    w.data.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (w.bytes + 63) & ~size_t{63})));
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 0.02f);
    std::vector<float> row(static_cast<size_t>(n_in));
    const int64_t pat = std::min<int64_t>(64, n_out);
    for (int64_t j = 0; j < pat; ++j) {
        for (auto& v : row) v = nd(rng);
        latte::quantize_row(t, row.data(), w.data.get() + j * w.ldw, n_in);
    }
    for (int64_t j = pat; j < n_out; j += pat)
        std::memcpy(w.data.get() + j * w.ldw, w.data.get(), w.ldw * static_cast<size_t>(std::min(pat, n_out - j)));
    return w;
}

latte::ThreadPool& pool_for(int threads) {
    static std::unique_ptr<latte::ThreadPool> p;
    if (!p || static_cast<int>(p->size()) != threads) {
        p.reset();
        p = std::make_unique<latte::ThreadPool>(static_cast<unsigned>(threads));
    }
    return *p;
}

void run_matmul(const kernels::KernelTable& kt, GGMLType t, const Weights& w, int64_t n_in, int64_t n_out,
                const float* X, int64_t n, float* Y, std::vector<uint8_t>& act, latte::ThreadPool& pool) {
    const size_t a_row = kt.gemm_act_size(t, n_in);
    if (a_row) {
        if (act.size() < a_row * n) act.resize(a_row * n);
        pool.parallel_for(n, [&](int64_t b, int64_t e, unsigned) {
            kt.gemm_act_prep(t, X + b * n_in, n_in, n_in, e - b, act.data() + b * a_row);
        });
    }
    constexpr int64_t kRows = 16;
    pool.parallel_for((n_out + kRows - 1) / kRows, [&](int64_t b, int64_t e, unsigned) {
        const int64_t j0 = b * kRows, j1 = std::min(n_out, e * kRows);
        kt.gemm(t, w.data.get() + j0 * w.ldw, w.ldw, n_in, j1 - j0, X, n_in, a_row ? act.data() : nullptr, n, Y + j0,
                n_out);
    });
}

void bench(benchmark::State& state, GGMLType t, kernels::Isa isa, int64_t n_in, int64_t n_out, int64_t n_tok,
           int threads) {
    if (!kernels::isa_available(isa)) {
        state.SkipWithError("ISA not available");
        return;
    }
    const kernels::KernelTable& kt = kernels::table_for(isa);
    const Weights w = make_weights(t, n_in, n_out);
    std::vector<float> X(static_cast<size_t>(n_in * n_tok)), Y(static_cast<size_t>(n_out * n_tok));
    std::mt19937 rng(2);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (auto& v : X) v = nd(rng);
    std::vector<uint8_t> act;
    latte::ThreadPool& pool = pool_for(threads);
    for (auto _ : state) {
        run_matmul(kt, t, w, n_in, n_out, X.data(), n_tok, Y.data(), act, pool);
        benchmark::DoNotOptimize(Y.data());
    }
    const double it = static_cast<double>(state.iterations());
    state.counters["bytes/s"] = benchmark::Counter(static_cast<double>(w.bytes) * it, benchmark::Counter::kIsRate);
    state.counters["FLOP/s"] =
        benchmark::Counter(2.0 * n_in * n_out * n_tok * it, benchmark::Counter::kIsRate);
}

const bool registered = [] {
    const GGMLType types[] = {GGMLType::F32,      GGMLType::F16,      GGMLType::BF16, GGMLType::Q8_0,
                              GGMLType::Q4_0,     GGMLType::Q8_0_R16, GGMLType::Q4_0_R16, GGMLType::Q4_K,
                              GGMLType::Q5_K,     GGMLType::Q6_K,     GGMLType::Q4_K_R,   GGMLType::Q5_K_R,
                              GGMLType::Q6_K_R};
    const kernels::Isa isas[] = {kernels::Isa::Scalar, kernels::Isa::Avx2, kernels::Isa::Avx512, kernels::Isa::Amx};
    struct Shape { int64_t n_in, n_out; };
    const Shape tg[] = {{2048, 10944}, {10944, 2048}, {2048, 102400}, {2048, 1408}};
    for (int threads : env_threads())
        for (GGMLType t : types)
            for (kernels::Isa isa : isas) {
                for (const Shape& s : tg) {
                    if (t == GGMLType::F32 && s.n_out == 102400) continue;
                    if (s.n_in % latte::type_info(t).block_size != 0) continue;  // K-quants: rows of 256-blocks
                    const std::string name = std::string("BM_gemm_TG/") + latte::type_name(t) + "/" +
                                             kernels::isa_name(isa) + "/" + std::to_string(s.n_in) + "x" +
                                             std::to_string(s.n_out) + "/threads:" + std::to_string(threads);
                    benchmark::RegisterBenchmark(name.c_str(), bench, t, isa, s.n_in, s.n_out, 1, threads)
                        ->Unit(benchmark::kMillisecond)->UseRealTime();
                }
                // PP: a 512-token ubatch through a 2048 × 2048 projection, and one expert's share of it
                // (2048 → 1408, 64 tokens: V2-Lite's 64 experts with 6 used see ~48 tokens each; 16 and
                // 8: V3's 256 experts with 8 used see ~16 per 512-token ubatch); long rows at 512
                // tokens: the dense down projection (10944 → 2048) and V3's attn_output (16384 → 7168).
                struct PP { int64_t n_in, n_out, n_tok; };
                const PP pp[] = {{2048, 2048, 512}, {2048, 1408, 64}, {2048, 1408, 32}, {2048, 1408, 16},
                                 {2048, 1408, 8},   {10944, 2048, 512}, {16384, 7168, 512}};
                for (const PP& s : pp) {
                    if (s.n_in % latte::type_info(t).block_size != 0) continue;  // K-quants: rows of 256-blocks
                    if (s.n_in * s.n_out > (int64_t{64} << 20) && t != GGMLType::Q8_0_R16) continue;  // only r16 at V3 size
                    const int64_t n_tok = s.n_tok;
                    const std::string name = std::string("BM_gemm_PP/") + latte::type_name(t) + "/" +
                                             kernels::isa_name(isa) + "/" + std::to_string(s.n_in) + "x" +
                                             std::to_string(s.n_out) + "/tokens:" + std::to_string(n_tok) +
                                             "/threads:" + std::to_string(threads);
                    benchmark::RegisterBenchmark(name.c_str(), bench, t, isa, s.n_in, s.n_out, n_tok, threads)
                        ->Unit(benchmark::kMillisecond)->UseRealTime();
                }
            }
    return true;
}();

}  // namespace

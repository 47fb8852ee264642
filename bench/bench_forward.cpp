// Whole-model PP and TG throughput of the forward, swept over thread counts (Google Benchmark).
//   LATTE_BENCH_MODEL=FILE   the model (default: the build's tiny model)
//   LATTE_BENCH_MLA=0..3     the -mla mode (default 3), LATTE_BENCH_CTK=f32|f16|bf16|q8_0 (default f16)
//   LATTE_BENCH_THREADS=1,2,4   the thread counts swept (default 1,2)
//   LATTE_BENCH_PP=64,512       prompt lengths (default 64,512); LATTE_BENCH_DEPTHS=0,512 TG depths
// Arguments: BM_PP/<prompt tokens>/<threads>, BM_TG/<depth>/<threads> (16 tokens generated per iteration).
// Counter "tok/s" is the median-able rate; run with --benchmark_repetitions=N to get medians.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>
#include <algorithm>

#include "latte/latte.h"

namespace {

std::shared_ptr<latte::Model> bench_model() {
    static std::shared_ptr<latte::Model> m = [] {
        const char* p = std::getenv("LATTE_BENCH_MODEL");
        return latte::Model::load(p && *p ? p : LATTE_TINY_MODEL);
    }();
    return m;
}

latte::ContextParams bench_params(unsigned threads, uint32_t n_ctx) {
    latte::ContextParams p;
    p.n_threads = threads;
    p.n_ctx = n_ctx;
    const char* mla = std::getenv("LATTE_BENCH_MLA");
    p.mla = latte::parse_mla_mode(mla && *mla ? mla : "3");
    const char* ctk = std::getenv("LATTE_BENCH_CTK");
    p.cache_type = latte::parse_type(ctk && *ctk ? ctk : "f16");
    return p;
}

std::vector<int32_t> tokens(int n, int32_t n_vocab) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = 2 + (i * 7919) % (n_vocab - 2);
    return v;
}

void BM_PP(benchmark::State& state) {
    const int n = static_cast<int>(state.range(0));
    const auto m = bench_model();
    latte::Context ctx(m, bench_params(static_cast<unsigned>(state.range(1)), static_cast<uint32_t>(n)));
    const auto ids = tokens(n, static_cast<int32_t>(m->hparams().n_vocab));
    for (auto _ : state) {
        ctx.clear();
        ctx.decode(ids, false);
        benchmark::DoNotOptimize(ctx.logits());
    }
    state.counters["tok/s"] = benchmark::Counter(static_cast<double>(n) * state.iterations(), benchmark::Counter::kIsRate);
    state.SetLabel(m->hparams().name);
}

void BM_TG(benchmark::State& state) {
    constexpr int kGen = 16;
    const int depth = static_cast<int>(state.range(0));
    const auto m = bench_model();
    latte::Context ctx(m, bench_params(static_cast<unsigned>(state.range(1)), static_cast<uint32_t>(depth + kGen + 1)));
    const auto ids = tokens(depth + 1, static_cast<int32_t>(m->hparams().n_vocab));
    for (auto _ : state) {
        state.PauseTiming();
        ctx.clear();
        ctx.decode(ids, false);  // the prompt at this depth, untimed
        state.ResumeTiming();
        for (int i = 0; i < kGen; ++i) ctx.decode({static_cast<int32_t>(3 + i)}, false);
        benchmark::DoNotOptimize(ctx.logits());
    }
    state.counters["tok/s"] = benchmark::Counter(static_cast<double>(kGen) * state.iterations(), benchmark::Counter::kIsRate);
    state.SetLabel(m->hparams().name);
}

}  // namespace

std::vector<int64_t> env_list(const char* name, const char* def) {
    std::vector<int64_t> t;
    const char* e = std::getenv(name);
    std::string s = e && *e ? e : def;
    for (size_t p = 0; p < s.size();) {
        const size_t q = std::min(s.find(',', p), s.size());
        t.push_back(std::atoll(s.substr(p, q - p).c_str()));
        p = q + 1;
    }
    return t;
}

void pp_args(benchmark::internal::Benchmark* b) {
    b->ArgNames({"tokens", "threads"})->ArgsProduct({env_list("LATTE_BENCH_PP", "64,512"), env_list("LATTE_BENCH_THREADS", "1,2")});
}
void tg_args(benchmark::internal::Benchmark* b) {
    b->ArgNames({"depth", "threads"})->ArgsProduct({env_list("LATTE_BENCH_DEPTHS", "0,512"), env_list("LATTE_BENCH_THREADS", "1,2")});
}

BENCHMARK(BM_PP)->Apply(pp_args)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_TG)->Apply(tg_args)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();

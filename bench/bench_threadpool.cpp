// The thread pool itself (issue 4), swept over the pool's own thread count (not ->ThreadRange:
// the benchmark's main thread drives a pool of N threads), including non-powers of two.
//
//   BM_PoolBarrier/threads:N                  one barrier of all N threads (run() + 1000 barriers)
//   BM_PoolEmptyFor/threads:N/steal:S         an empty parallel_for of N·4 tiles: dispatch + join cost
//   BM_PoolMemory/threads:N/steal:S           triad a = b + s·c over 3 arrays (LATTE_BENCH_POOL_MB MiB
//                                             each, default 256: well past the 2-core box's L3 of
//                                             480 MiB shared... in total), bytes/s
//   BM_PoolCompute/threads:N/steal:S          FMA chains over an MLA-like space (16 heads × 4096 KV,
//                                             power-of-two tiles planned by WorkSpace), FLOP/s
//   BM_PoolComputeNoisy/threads:N/steal:S     the same while thread 0 is slowed (it sleeps 20 us every
//                                             tile it runs): what stealing buys when one core is
//                                             shared with something else
// steal:1 is the pool's default (static-first, then stealing); steal:0 is static with remainder.
//
// Thread counts: LATTE_BENCH_POOL_THREADS="1,2,3,4,6,8,12,16" (default: those of
// 1,2,3,4,6,8,12,16,24,32,48,64 that fit the CPUs; on fewer than 4 CPUs also 3 and 4,
// oversubscribed). Efficiency against linear = rate(N) / (N · rate(1)).
//
// Built into latte-gbench and, alone (hwloc + Google Benchmark only), as latte-bench-pool.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "threadpool.h"

namespace {

using latte::PoolParams;
using latte::Schedule;
using latte::ThreadPool;
using latte::Tile;
using latte::WorkSpace;

std::vector<int64_t> thread_counts() {
    std::vector<int64_t> v;
    if (const char* e = std::getenv("LATTE_BENCH_POOL_THREADS"); e && *e) {
        std::stringstream ss(e);
        std::string tok;
        while (std::getline(ss, tok, ','))
            if (!tok.empty()) v.push_back(std::max(1L, std::strtol(tok.c_str(), nullptr, 10)));
        return v;
    }
    const int64_t cpus = ThreadPool::available_cpus();
    for (int64_t t : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64})
        if (t <= cpus || (cpus < 4 && t <= 4)) v.push_back(t);
    return v;
}

// On a shared machine the best repetition is the best estimate of the pool's own cost: read the
// time and s/barrier from "_min", and bytes/s and FLOP/s from "_max" (statistics apply to every
// counter, so "_min" of a rate is its worst repetition).
double min_of(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end()); }
double max_of(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); }

void threads_only(benchmark::internal::Benchmark* b) {
    b->ComputeStatistics("min", min_of);
    b->ComputeStatistics("max", max_of);
    b->ArgNames({"threads"});
    for (int64_t t : thread_counts()) b->Args({t});
}
void threads_and_schedule(benchmark::internal::Benchmark* b) {
    b->ComputeStatistics("min", min_of);
    b->ComputeStatistics("max", max_of);
    b->ArgNames({"threads", "steal"});
    for (int64_t t : thread_counts())
        for (int64_t s : {1, 0}) b->Args({t, s});
}

// One pool per (threads, schedule), kept for the whole run: creating it is not what is measured.
ThreadPool& pool_for(unsigned n, Schedule s) {
    static std::vector<std::unique_ptr<ThreadPool>> pools;
    for (auto& p : pools)
        if (p->size() == n && p->schedule() == s) return *p;
    PoolParams pp;
    pp.n_threads = n;
    pp.schedule = s;
    pools.push_back(std::make_unique<ThreadPool>(pp));
    return *pools.back();
}

void label(benchmark::State& state, const ThreadPool& pool) {
    state.SetLabel(pool.pinned() ? "pinned" : "unpinned");
}

void BM_PoolBarrier(benchmark::State& state) {
    ThreadPool& pool = pool_for(static_cast<unsigned>(state.range(0)), Schedule::Stealing);
    constexpr int kBarriers = 1000;
    for (auto _ : state) {
        pool.run([&](unsigned) {
            for (int i = 0; i < kBarriers; ++i) pool.barrier();
        });
    }
    // seconds per barrier (printed with an SI prefix: "150n" = 150 ns)
    state.counters["s/barrier"] = benchmark::Counter(static_cast<double>(kBarriers) * state.iterations(),
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    label(state, pool);
}

void BM_PoolEmptyFor(benchmark::State& state) {
    ThreadPool& pool = pool_for(static_cast<unsigned>(state.range(0)), state.range(1) ? Schedule::Stealing : Schedule::Static);
    const int64_t n = 4 * static_cast<int64_t>(pool.size());
    for (auto _ : state) pool.parallel_for(n, [](int64_t b, int64_t e, unsigned) { benchmark::DoNotOptimize(b + e); }, 4);
    label(state, pool);
}

struct Arrays {
    size_t n = 0;
    std::unique_ptr<float[]> a, b, c;
};
Arrays& arrays() {
    static Arrays x = [] {
        Arrays r;
        const char* e = std::getenv("LATTE_BENCH_POOL_MB");
        const size_t mb = e && *e ? std::strtoul(e, nullptr, 10) : 256;
        r.n = mb * (size_t{1} << 20) / sizeof(float);
        r.a.reset(new float[r.n]);
        r.b.reset(new float[r.n]);
        r.c.reset(new float[r.n]);
        for (size_t i = 0; i < r.n; ++i) { r.a[i] = 0.0f; r.b[i] = 1.0f; r.c[i] = 2.0f; }
        return r;
    }();
    return x;
}

void BM_PoolMemory(benchmark::State& state) {
    ThreadPool& pool = pool_for(static_cast<unsigned>(state.range(0)), state.range(1) ? Schedule::Stealing : Schedule::Static);
    Arrays& x = arrays();
    float* a = x.a.get();
    const float* b = x.b.get();
    const float* c = x.c.get();
    // 64 Ki-float tiles at most (256 KiB), at least 4 Ki (16 KiB): power-of-two tiles.
    WorkSpace ws{{static_cast<int64_t>(x.n), 1 << 16, 1 << 12}};
    ws.plan(pool.size());
    for (auto _ : state) {
        pool.parallel_for(ws, [&](const Tile& t, unsigned) {
            for (int64_t i = t.b[0]; i < t.e[0]; ++i) a[i] = b[i] + 0.5f * c[i];
        });
        benchmark::ClobberMemory();
    }
    state.counters["bytes/s"] =
        benchmark::Counter(3.0 * sizeof(float) * static_cast<double>(x.n) * state.iterations(), benchmark::Counter::kIsRate);
    state.counters["tiles"] = static_cast<double>(ws.n_tiles());
    label(state, pool);
}

// 16 heads × 4096 KV positions, tiles of up to 512 KV positions (min 16): every item is kFma
// dependent FMAs on 16 lanes (in registers), so this measures the split, not memory.
constexpr int kFmaPerItem = 64;

void compute_tile(const Tile& t, float* sink) {
    float acc[16];
    for (int l = 0; l < 16; ++l) acc[l] = static_cast<float>(t.b[1] + l) * 1e-3f;
    const int64_t items = t.items();
    for (int64_t i = 0; i < items; ++i)
        for (int k = 0; k < kFmaPerItem; ++k)
            for (int l = 0; l < 16; ++l) acc[l] = acc[l] * 0.9999f + 1e-4f;
    float s = 0;
    for (int l = 0; l < 16; ++l) s += acc[l];
    *sink = s;
}

void run_compute(benchmark::State& state, bool noisy) {
    ThreadPool& pool = pool_for(static_cast<unsigned>(state.range(0)), state.range(1) ? Schedule::Stealing : Schedule::Static);
    WorkSpace ws{{16, 1, 1}, {4096, 512, 16}};
    ws.plan(pool.size());
    std::vector<float> sink(pool.size() * 16);
    for (auto _ : state) {
        pool.parallel_for(ws, [&](const Tile& t, unsigned tid) {
            if (noisy && tid == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
            compute_tile(t, &sink[tid * 16]);
        });
        benchmark::DoNotOptimize(sink.data());
    }
    state.counters["FLOP/s"] = benchmark::Counter(2.0 * 16 * kFmaPerItem * static_cast<double>(ws.items()) * state.iterations(),
                                                  benchmark::Counter::kIsRate);
    state.counters["tiles"] = static_cast<double>(ws.n_tiles());
    label(state, pool);
}

void BM_PoolCompute(benchmark::State& state) { run_compute(state, false); }
void BM_PoolComputeNoisy(benchmark::State& state) { run_compute(state, true); }

}  // namespace

BENCHMARK(BM_PoolBarrier)->Apply(threads_only)->UseRealTime()->Unit(benchmark::kNanosecond);
BENCHMARK(BM_PoolEmptyFor)->Apply(threads_and_schedule)->UseRealTime()->Unit(benchmark::kNanosecond);
BENCHMARK(BM_PoolMemory)->Apply(threads_and_schedule)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PoolCompute)->Apply(threads_and_schedule)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PoolComputeNoisy)->Apply(threads_and_schedule)->UseRealTime()->Unit(benchmark::kMillisecond);

#ifdef LATTE_POOL_BENCH_MAIN
BENCHMARK_MAIN();
#endif

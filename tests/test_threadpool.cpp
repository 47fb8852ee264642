// The thread pool (src/threadpool.h): every tile exactly once for many shapes and thread counts,
// even shares at non-power-of-two thread counts, barriers, nested use refused, exceptions reported,
// an idle pool that sleeps, pinning and the CPU-set options. Built a second time under
// ThreadSanitizer (CMake target latte-threadpool-tsan-tests, ctest threadpool_under_tsan).
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "latte/error.h"
#include "threadpool.h"

using namespace latte;

namespace {

const std::vector<unsigned> kThreads = {1, 2, 3, 4, 5, 6, 7, 8, 12};

double cpu_seconds() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

bool is_pow2(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

}  // namespace

TEST_CASE("pool: 1-D parallel_for covers 0..n-1 exactly once", "[threadpool]") {
    for (unsigned p : kThreads) {
        for (Schedule sched : {Schedule::Stealing, Schedule::Static}) {
            PoolParams pp;
            pp.n_threads = p;
            pp.schedule = sched;
            ThreadPool pool(pp);
            REQUIRE(pool.size() == p);
            for (int64_t n : {0, 1, 2, 3, 5, 7, 16, 17, 100, 1000, 4097}) {
                for (int64_t grain : {0, 1, 3}) {
                    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
                    std::atomic<int> bad_tid{0}, bad_range{0};
                    pool.parallel_for(
                        n,
                        [&](int64_t b, int64_t e, unsigned tid) {
                            if (tid >= p) ++bad_tid;
                            if (!(0 <= b && b < e && e <= n)) ++bad_range;
                            for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
                        },
                        grain);
                    CHECK(bad_tid == 0);
                    CHECK(bad_range == 0);
                    int wrong = 0;
                    for (auto& h : hits) wrong += h.load() != 1;
                    INFO("threads " << p << " n " << n << " grain " << grain);
                    CHECK(wrong == 0);
                }
            }
        }
    }
}

TEST_CASE("pool: multi-dimensional work spaces: every element once, power-of-two tiles", "[threadpool]") {
    struct Shape { std::vector<Dim> dims; };
    const std::vector<std::vector<Dim>> shapes = {
        {{16, 1, 1}, {1, 1, 1}},                       // TG: heads × one row
        {{16, 1, 1}, {33, 16, 1}},                     // heads × KV chunks, ragged
        {{16, 1, 1}, {64, 32, 4}, {7, 8, 1}},          // heads × KV chunks × rows
        {{128, 4, 1}, {512, 64, 16}},                  // V3 heads × rows
        {{3, 1, 1}, {5, 2, 1}, {1, 1, 1}, {9, 4, 2}},  // four dimensions, nothing a power of two
        {{0, 1, 1}, {5, 1, 1}},                        // empty
        {{1000, 256, 1}},
    };
    for (unsigned p : kThreads) {
        ThreadPool pool(p);
        for (const auto& dims : shapes) {
            WorkSpace ws;
            switch (dims.size()) {
                case 1: ws = WorkSpace{dims[0]}; break;
                case 2: ws = WorkSpace{dims[0], dims[1]}; break;
                case 3: ws = WorkSpace{dims[0], dims[1], dims[2]}; break;
                default: ws = WorkSpace{dims[0], dims[1], dims[2], dims[3]}; break;
            }
            const int64_t n = ws.items();
            std::vector<int64_t> stride(dims.size(), 1);
            for (int d = static_cast<int>(dims.size()) - 2; d >= 0; --d) stride[d] = stride[d + 1] * dims[d + 1].n;
            std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
            std::atomic<int> bad{0};
            pool.parallel_for(ws, [&](const Tile& t, unsigned tid) {
                if (tid >= p || t.ndim != static_cast<int>(dims.size())) ++bad;
                int64_t idx[kMaxDims];
                for (int d = 0; d < t.ndim; ++d) idx[d] = t.b[d];
                // walk the tile's elements
                for (;;) {
                    int64_t lin = 0;
                    for (int d = 0; d < t.ndim; ++d) lin += idx[d] * stride[d];
                    hits[static_cast<size_t>(lin)]++;
                    int d = t.ndim - 1;
                    while (d >= 0 && ++idx[d] == t.e[d]) { idx[d] = t.b[d]; --d; }
                    if (d < 0) break;
                }
            });
            CHECK(bad == 0);
            int wrong = 0;
            for (auto& h : hits) wrong += h.load() != 1;
            INFO("threads " << p << " dims " << dims.size() << " items " << n);
            CHECK(wrong == 0);
            ws.plan(p);
            for (int d = 0; d < ws.ndim(); ++d) {
                CHECK(is_pow2(ws.tile_size(d)));
                CHECK(ws.tile_size(d) >= ws.dim(d).min_tile);
                CHECK(ws.tile_size(d) <= ws.dim(d).max_tile);
            }
        }
    }
}

TEST_CASE("pool: work per thread within 10% of even at 3, 6, 12 threads (and every count to 16)", "[threadpool]") {
    // MLA-like spaces: heads × KV chunks (TG at depth), heads × rows (PP), rows of a matmul.
    const std::vector<WorkSpace> spaces = {
        WorkSpace{{16, 1, 1}, {4096, 512, 16}},         // 16 heads, 4096 KV in chunks
        WorkSpace{{128, 1, 1}, {8192, 512, 32}},        // V3: 128 heads
        WorkSpace{{16, 1, 1}, {512, 64, 4}},            // 16 heads × 512 prompt rows
        WorkSpace{{2048, 256, 8}},                      // matmul output rows
        WorkSpace{{10944, 256, 8}},                     // dense FFN rows (not a power of two)
        WorkSpace{{16, 2, 1}, {2048, 256, 16}, {1, 1, 1}},
    };
    for (unsigned p = 1; p <= 16; ++p) {
        for (const WorkSpace& w : spaces) {
            WorkSpace ws = w;
            ws.plan(p);
            const std::vector<int64_t> items = ws.static_items(p);
            int64_t most = 0, total = 0;
            for (int64_t x : items) { most = std::max(most, x); total += x; }
            REQUIRE(total == ws.items());
            const double even = static_cast<double>(total) / p;
            INFO("threads " << p << " tiles " << ws.n_tiles() << " busiest " << most << " even " << even);
            CHECK(static_cast<double>(most) <= 1.10 * even);
        }
    }
}

TEST_CASE("pool: the pool's own counters show every tile run once, stolen or not", "[threadpool]") {
    for (unsigned p : {2u, 3u, 4u}) {
        ThreadPool pool(p);
        pool.set_stats(true);
        WorkSpace ws{{16, 1, 1}, {1000, 16, 1}};
        std::atomic<int64_t> calls{0};
        pool.parallel_for(ws, [&](const Tile&, unsigned tid) {
            ++calls;
            if (tid == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));  // make others steal
        });
        int64_t sum = 0;
        for (int64_t x : pool.last_stats().tiles_per_thread) sum += x;
        ws.plan(p);
        CHECK(sum == ws.n_tiles());
        CHECK(calls == ws.n_tiles());
        CHECK(pool.last_stats().stolen > 0);
    }
}

TEST_CASE("pool: run() and barrier()", "[threadpool]") {
    for (unsigned p : kThreads) {
        ThreadPool pool(p);
        constexpr int kPhases = 200;
        std::vector<std::atomic<int>> phase(p);
        std::atomic<int> errors{0};
        pool.run([&](unsigned tid) {
            for (int k = 0; k < kPhases; ++k) {
                phase[tid].store(k + 1);
                pool.barrier();
                for (unsigned j = 0; j < p; ++j)
                    if (phase[j].load() < k + 1) ++errors;  // someone passed the barrier early
                pool.barrier();
            }
        });
        INFO("threads " << p);
        CHECK(errors == 0);
    }
    ThreadPool pool(2);
    CHECK_THROWS_AS(pool.barrier(), Error);  // outside run()
}

TEST_CASE("pool: nested use is refused with an error", "[threadpool]") {
    for (unsigned p : {1u, 2u, 3u}) {
        ThreadPool pool(p), other(2);
        auto nested_pf = [&] {
            pool.parallel_for(8, [&](int64_t, int64_t, unsigned) { pool.parallel_for(4, [](int64_t, int64_t, unsigned) {}); });
        };
        CHECK_THROWS_WITH(nested_pf(), Catch::Contains("nested"));
        CHECK_THROWS_WITH(pool.run([&](unsigned) { pool.run([](unsigned) {}); }), Catch::Contains("nested"));
        CHECK_THROWS_WITH(pool.parallel_for(WorkSpace{{4, 1, 1}},
                                            [&](const Tile&, unsigned) { other.parallel_for(2, [](int64_t, int64_t, unsigned) {}); }),
                          Catch::Contains("nested"));
        // still usable afterwards
        std::atomic<int64_t> s{0};
        pool.parallel_for(100, [&](int64_t b, int64_t e, unsigned) { s += e - b; });
        CHECK(s == 100);
    }
}

TEST_CASE("pool: a second caller while a job runs is refused", "[threadpool]") {
    ThreadPool pool(2);
    std::string msg;
    pool.parallel_for(1, [&](int64_t, int64_t, unsigned) {
        std::thread t([&] {
            try {
                pool.parallel_for(4, [](int64_t, int64_t, unsigned) {});
            } catch (const Error& e) {
                msg = e.what();
            }
        });
        t.join();
    });
    CHECK_THAT(msg, Catch::Contains("two threads"));
}

TEST_CASE("pool: exceptions in tasks reach the caller", "[threadpool]") {
    for (unsigned p : kThreads) {
        ThreadPool pool(p);
        for (int64_t bad_at : {int64_t{0}, int64_t{57}, int64_t{99}}) {
            INFO("threads " << p << " throwing at " << bad_at);
            CHECK_THROWS_WITH(pool.parallel_for(100,
                                                [&](int64_t b, int64_t e, unsigned) {
                                                    if (b <= bad_at && bad_at < e) throw std::runtime_error("boom " + std::to_string(bad_at));
                                                },
                                                25),
                              "boom " + std::to_string(bad_at));
        }
        // from a thread other than the caller, in run() with threads waiting at a barrier
        CHECK_THROWS_WITH(pool.run([&](unsigned tid) {
            if (tid == pool.size() - 1) throw std::runtime_error("last thread failed");
            pool.barrier();
            pool.barrier();
        }),
                          "last thread failed");
        CHECK_THROWS_AS(pool.parallel_for(WorkSpace{{64, 4, 1}}, [](const Tile& t, unsigned) {
            if (t.b[0] == 32) throw Error("tile 32");
        }),
                        Error);
        std::atomic<int64_t> s{0};
        pool.parallel_for(1000, [&](int64_t b, int64_t e, unsigned) { s += e - b; });
        CHECK(s == 1000);  // the pool survives
    }
}

TEST_CASE("pool: many small jobs in a row (no lost wake-ups)", "[threadpool]") {
    for (unsigned p : {2u, 3u, 4u}) {
        for (int spin : {0, 5, 50}) {
            PoolParams pp;
            pp.n_threads = p;
            pp.spin_us = spin;
            ThreadPool pool(pp);
            int64_t total = 0;
            std::vector<int64_t> out(64);
            for (int it = 0; it < 2000; ++it) {
                pool.parallel_for(64, [&](int64_t b, int64_t e, unsigned) {
                    for (int64_t i = b; i < e; ++i) out[static_cast<size_t>(i)] = i + it;
                });
                total += out[63];
            }
            CHECK(total == 2000 * 63 + 1999 * 2000 / 2);
        }
    }
}

TEST_CASE("pool: an idle pool sleeps instead of spinning", "[threadpool]") {
    PoolParams pp;
    pp.n_threads = 2;
    pp.spin_us = 2000;  // 2 ms
    ThreadPool pool(pp);
    pool.parallel_for(2, [](int64_t, int64_t, unsigned) {});
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // past the spin budget
    const double c0 = cpu_seconds();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const double used = cpu_seconds() - c0;
    CHECK(used < 0.05);  // a spinning worker would burn ~0.2 s
}

TEST_CASE("pool: pinning, CPU sets and NUMA options", "[threadpool]") {
    const unsigned avail = ThreadPool::available_cpus();
    REQUIRE(avail >= 1);
    REQUIRE(ThreadPool::physical_cores() >= 1);
    {
        ThreadPool pool(PoolParams{});
        CHECK(pool.size() >= 1);
        CHECK(pool.size() <= avail);
    }
    if (avail >= 2) {
        ThreadPool pool(2);
        CHECK(pool.pinned());
        REQUIRE(pool.cpus().size() == 2);
        CHECK(pool.cpus()[0] != pool.cpus()[1]);
        CHECK_THAT(pool.describe(), Catch::Contains("pinned"));
    }
    if (avail >= 2) {
        // The calling thread is thread 0: pinned to the pool's first CPU by its first job (from a
        // fresh thread here, so the test leaves the main thread alone), and a pool made afterwards
        // still sees every CPU (Linux reports a process's binding as its main thread's).
        std::thread([&] {
            ThreadPool pool(2);
            std::atomic<int> n{0};
            pool.parallel_for(8, [&](int64_t b, int64_t e, unsigned) { n += static_cast<int>(e - b); });
            CHECK(n == 8);
            cpu_set_t cs;
            CPU_ZERO(&cs);
            REQUIRE(sched_getaffinity(0, sizeof cs, &cs) == 0);
            CHECK(CPU_COUNT(&cs) == 1);
            CHECK(CPU_ISSET(pool.cpus()[0], &cs));
            ThreadPool again(PoolParams{});
            CHECK(again.size() == ThreadPool::physical_cores());
            CHECK(ThreadPool::available_cpus() == avail);
        }).join();
        {
            // A pool gives its caller the affinity it had back when it is destroyed.
            cpu_set_t before, after;
            CPU_ZERO(&before);
            CPU_ZERO(&after);
            REQUIRE(sched_getaffinity(0, sizeof before, &before) == 0);
            {
                ThreadPool pool(2);
                pool.parallel_for(8, [&](int64_t, int64_t, unsigned) {});
            }
            REQUIRE(sched_getaffinity(0, sizeof after, &after) == 0);
            CHECK(CPU_EQUAL(&before, &after));
        }
        setenv("LATTE_PIN_CALLER", "0", 1);
        std::thread([&] {
            cpu_set_t all;  // a thread inherits its creator's affinity: start from every CPU
            CPU_ZERO(&all);
            for (int c = 0; c < CPU_SETSIZE && static_cast<unsigned>(CPU_COUNT(&all)) < avail; ++c) CPU_SET(c, &all);
            sched_setaffinity(0, sizeof all, &all);
            ThreadPool pool(2);
            CHECK_THAT(pool.describe(), Catch::Contains("not the calling thread"));
            pool.parallel_for(8, [&](int64_t, int64_t, unsigned) {});
            cpu_set_t cs;
            CPU_ZERO(&cs);
            REQUIRE(sched_getaffinity(0, sizeof cs, &cs) == 0);
            CHECK(static_cast<unsigned>(CPU_COUNT(&cs)) == avail);
        }).join();
        unsetenv("LATTE_PIN_CALLER");
        setenv("LATTE_SPIN_US", "abc", 1);
        CHECK_THROWS_WITH(ThreadPool(2), Catch::Contains("LATTE_SPIN_US"));
        setenv("LATTE_SPIN_US", "7", 1);
        CHECK_THAT(ThreadPool(2).describe(), Catch::Contains("spin 7 us"));
        unsetenv("LATTE_SPIN_US");
    }
    {
        ThreadPool pool(avail + 2);  // oversubscribed: works, unpinned
        CHECK_FALSE(pool.pinned());
        CHECK_THAT(pool.describe(), Catch::Contains("not pinned"));
        std::atomic<int64_t> s{0};
        pool.parallel_for(1000, [&](int64_t b, int64_t e, unsigned) { s += e - b; });
        CHECK(s == 1000);
    }
    {
        PoolParams pp;
        pp.cpu_range = "0";
        ThreadPool pool(pp);
        CHECK(pool.size() == 1);
        pp.cpu_range = "";
        pp.cpu_mask = "0x1";
        ThreadPool pool2(pp);
        CHECK(pool2.size() == 1);
    }
    PoolParams bad;
    bad.cpu_range = "0-";
    CHECK_THROWS_WITH(ThreadPool(bad), Catch::Contains("--cpu-range"));
    bad.cpu_range = "3-1";
    CHECK_THROWS_WITH(ThreadPool(bad), Catch::Contains("backwards"));
    bad.cpu_range = "4000";
    CHECK_THROWS_WITH(ThreadPool(bad), Catch::Contains("cannot run on"));
    bad.cpu_range = "";
    bad.cpu_mask = "0xg";
    CHECK_THROWS_WITH(ThreadPool(bad), Catch::Contains("hex"));

    CHECK(parse_numa("distribute") == NumaStrategy::Distribute);
    CHECK(parse_numa("isolate") == NumaStrategy::Isolate);
    CHECK(parse_numa("interleave") == NumaStrategy::Interleave);
    CHECK_THROWS_AS(parse_numa("spread"), Error);
    for (NumaStrategy s : {NumaStrategy::Distribute, NumaStrategy::Isolate, NumaStrategy::Interleave}) {
        PoolParams pp;
        pp.numa = s;
        ThreadPool pool(pp);
        CHECK_THAT(pool.describe(), Catch::Contains("numa:"));
        std::atomic<int64_t> sum{0};
        pool.parallel_for(100, [&](int64_t b, int64_t e, unsigned) { sum += e - b; });
        CHECK(sum == 100);
    }
}

TEST_CASE("pool: the process pool is created once", "[threadpool]") {
    ThreadPool& a = ThreadPool::process_pool();
    ThreadPool& b = ThreadPool::process_pool();
    CHECK(&a == &b);
    PoolParams pp;
    pp.n_threads = a.size() + 1;
    CHECK_THROWS_AS(ThreadPool::process_pool(pp), Error);
}

// -t / -tb: a pool sized for the larger count runs jobs on its first k threads only.
TEST_CASE("pool: set_active(k): jobs on threads 0..k-1 only, every item once, splits as a k-thread pool", "[threadpool]") {
    for (unsigned p : {2u, 3u, 4u, 6u}) {
        for (Schedule sched : {Schedule::Stealing, Schedule::Static}) {
            PoolParams pp;
            pp.n_threads = p;
            pp.schedule = sched;
            ThreadPool pool(pp);
            pool.set_stats(true);
            CHECK(pool.active() == p);
            // k cycles through every count (and back up) so late-waking inactive workers meet new jobs
            for (unsigned round = 0; round < 3; ++round) {
                for (unsigned k = 1; k <= p + 1; ++k) {  // p + 1: clamped to p
                    pool.set_active(k);
                    const unsigned ka = std::min(k, p);
                    REQUIRE(pool.active() == ka);
                    for (int64_t n : {1, 7, 100, 4097}) {
                        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
                        std::atomic<int> bad_tid{0};
                        std::vector<std::pair<int64_t, int64_t>> chunks;
                        std::mutex mu;
                        pool.parallel_for(n, [&](int64_t b, int64_t e, unsigned tid) {
                            if (tid >= ka) ++bad_tid;
                            for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
                            std::lock_guard<std::mutex> lk(mu);
                            chunks.emplace_back(b, e);
                        });
                        int wrong = 0;
                        for (auto& h : hits) wrong += h.load() != 1;
                        INFO("pool " << p << " active " << ka << " n " << n);
                        CHECK(bad_tid == 0);
                        CHECK(wrong == 0);
                        // the even split of a ka-thread pool
                        const int64_t want_chunks = ka == 1 ? 1 : std::min<int64_t>(n, 4 * static_cast<int64_t>(ka));
                        CHECK(static_cast<int64_t>(chunks.size()) == want_chunks);
                        const auto& st = pool.last_stats().tiles_per_thread;
                        REQUIRE(st.size() == p);
                        for (unsigned t = ka; t < p; ++t) CHECK(st[t] == 0);
                    }
                    // WorkSpace: planned for the active count
                    WorkSpace ws{{8, 1, 1}, {1000, 16, 1}};
                    std::atomic<int64_t> items{0};
                    std::atomic<int> bad_tid{0};
                    pool.parallel_for(ws, [&](const Tile& t, unsigned tid) {
                        if (tid >= ka) ++bad_tid;
                        items += t.items();
                    });
                    WorkSpace w2 = ws;
                    w2.plan(ka);
                    CHECK(items == 8 * 1000);
                    CHECK(bad_tid == 0);
                    int64_t sum = 0;
                    for (int64_t x : pool.last_stats().tiles_per_thread) sum += x;
                    CHECK(sum == w2.n_tiles());
                    // run() and barrier() on the active threads
                    std::atomic<int> ran{0}, after{0};
                    pool.run([&](unsigned tid) {
                        if (tid >= ka) ++bad_tid;
                        ++ran;
                        pool.barrier();
                        if (ran.load() != static_cast<int>(ka)) ++after;
                    });
                    CHECK(ran == static_cast<int>(ka));
                    CHECK(after == 0);
                    CHECK(bad_tid == 0);
                }
            }
        }
    }
    ThreadPool pool(2);
    pool.set_active(0);  // clamped to 1
    CHECK(pool.active() == 1);
    std::atomic<int> refused{0};
    pool.set_active(2);
    pool.parallel_for(4, [&](int64_t, int64_t, unsigned) {
        try {
            pool.set_active(1);
        } catch (const Error&) {
            ++refused;
        }
    });
    CHECK(refused == 4);  // inside a task: refused
}

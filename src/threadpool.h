// The thread pool every op runs on (DESIGN.md §4, issue 4).
//
// - Created once (per process with ThreadPool::process_pool(), or per context); its threads live
//   as long as it does. A parallel_for allocates nothing and creates no thread.
// - Threads are pinned with hwloc, one per physical core of the NUMA nodes in use by default (SMT
//   siblings left out unless PoolParams::smt), or to --cpu-mask / --cpu-range. When there are more
//   threads than CPUs to pin to, threads are left unpinned and the pool says so once per process.
// - Waiting (for work, at a barrier, for the end of a parallel_for) spins for a bounded time
//   (PoolParams::spin_us) and then sleeps on a futex, so an idle pool burns no core.
// - Work is split into tiles (power-of-two sizes, chosen per call so that any thread count gets an
//   even share: WorkSpace) and handed out static-first with stealing: each thread owns a
//   contiguous run of tiles (locality), and a thread that finishes its run takes tiles from the
//   front of the other runs. Every tile is done exactly once. Schedule::Static turns stealing off
//   (kept for the benchmark that justifies the default).
// - Results never depend on which thread runs a tile: the split depends only on the work space and
//   the thread count, never on timing, and callers must compute a tile's output from the tile alone.
// - A parallel_for (or run) inside a task is refused with latte::Error (reported to the caller);
//   an exception thrown by a task stops the hand-out of further tiles and is rethrown to the caller
//   after every thread has left the job.
// - set_active(k) makes jobs run on threads 0..k-1 only (llama.cpp's -t / -tb: one pool sized for
//   the larger count, prompt ubatches on one count, generation on the other). The other threads take
//   no tiles, are not waited for and go back to sleep; every split (parallel_for's even split,
//   WorkSpace plans, static hand-out, barrier()) uses k, so results depend on k as they would on
//   the size of a pool of k threads, and never on which pool runs them.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace latte {

// llama.cpp's --numa meanings. On a machine with one NUMA node every mode is a no-op (the pool
// says so in describe()).
enum class NumaStrategy {
    None,        // leave placement to the OS
    Distribute,  // spread threads evenly over all nodes (thread i on node i mod nodes)
    Isolate,     // only the cores of the node the process started on
    Interleave,  // threads on all nodes, memory interleaved across them
};
NumaStrategy parse_numa(const std::string& s);  // "none|distribute|isolate|interleave"; throws latte::Error
const char* numa_name(NumaStrategy s);

enum class Schedule { Stealing, Static };

struct PoolParams {
    unsigned n_threads = 0;    // 0: one per CPU of the chosen set (physical cores by default)
    std::string cpu_mask;      // hex mask of OS CPU numbers, "0xff" / "ff" (llama.cpp's --cpu-mask)
    std::string cpu_range;     // "0-7,16-23"; with cpu_mask: the intersection
    bool smt = false;          // default set: every PU of each core instead of one
    NumaStrategy numa = NumaStrategy::None;
    bool pin = true;           // pin threads when n_threads <= the CPUs of the chosen set
    // When pinned: the thread that calls parallel_for/run is thread 0 and is pinned to the first
    // CPU on its first job (again if another thread calls later). Left unpinned, with as many
    // threads as CPUs, the OS puts it on a CPU where a worker spins and every job pays for the
    // time-sharing (TG fell 4x at 16 threads on a 16-core machine). The destructor gives that
    // thread its previous affinity back when it runs on it. LATTE_PIN_CALLER=0 overrides.
    bool pin_caller = true;
    int spin_us = -1;          // spin before sleeping; -1: LATTE_SPIN_US if set, else 50 us, 0 when oversubscribed
    Schedule schedule = Schedule::Stealing;
};

// One dimension of a work space: n items, split into power-of-two tiles between min_tile and
// max_tile (both rounded down to powers of two; min_tile <= max_tile).
struct Dim {
    int64_t n = 0;
    int64_t max_tile = 1;
    int64_t min_tile = 1;
};

constexpr int kMaxDims = 4;

// One tile of a work space: [b[d], e[d]) in each of the ndim dimensions.
struct Tile {
    int ndim = 0;
    int64_t b[kMaxDims] = {0, 0, 0, 0};
    int64_t e[kMaxDims] = {0, 0, 0, 0};
    int64_t size(int d) const { return e[d] - b[d]; }
    int64_t items() const {
        int64_t s = 1;
        for (int d = 0; d < ndim; ++d) s *= e[d] - b[d];
        return s;
    }
};

// A multi-dimensional work space (e.g. heads × KV chunks × rows), dimension 0 outermost, and its
// tiling for a thread count. plan() starts every dimension at max_tile and halves the dimension
// with the most room left (tile / min_tile, ties to the inner one) until the tile count T gives
// every thread an even share within `tolerance` (ceil(T/p) ≤ (1 + tolerance)·T/p, which static
// hand-out already meets and stealing only improves), or no dimension can be halved. No step
// needs p to divide anything: 3, 6, 12 threads are as good as 4, 8, 16.
class WorkSpace {
public:
    WorkSpace() = default;
    WorkSpace(std::initializer_list<Dim> dims);
    void plan(unsigned n_threads, double tolerance = 0.10);
    unsigned planned_for() const { return planned_; }  // 0: not planned yet

    int ndim() const { return ndim_; }
    const Dim& dim(int d) const { return dims_[d]; }
    int64_t tile_size(int d) const { return tile_[d]; }
    int64_t tiles(int d) const { return ntiles_[d]; }
    int64_t n_tiles() const { return total_; }
    int64_t items() const;
    Tile tile(int64_t index) const;  // row-major over the tile grid, dimension 0 outermost
    // Items (elements of the space) each of n_threads threads gets under the static hand-out.
    std::vector<int64_t> static_items(unsigned n_threads) const;

private:
    void recount();
    int ndim_ = 0;
    Dim dims_[kMaxDims];
    int64_t tile_[kMaxDims] = {1, 1, 1, 1};
    int64_t ntiles_[kMaxDims] = {1, 1, 1, 1};
    int64_t total_ = 0;
    unsigned planned_ = 0;
};

// Statistics of the last parallel_for (for tests and benchmarks): tiles each thread ran.
struct JobStats {
    std::vector<int64_t> tiles_per_thread;
    int64_t stolen = 0;
};

class ThreadPool {
public:
    explicit ThreadPool(unsigned n_threads);  // PoolParams{.n_threads = n_threads}
    explicit ThreadPool(const PoolParams& p);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    // The process-wide pool, created by the first call (later calls must ask for the same
    // parameters or pass nullptr-equivalent defaults: PoolParams{} returns the existing pool).
    static ThreadPool& process_pool(const PoolParams& p = {});

    unsigned size() const { return n_threads_; }
    // Threads that run the next jobs: the first k (clamped to [1, size()]; size() at start). Call
    // between jobs, from the thread that calls parallel_for/run (refused with latte::Error inside a
    // task or while a job runs).
    void set_active(unsigned k);
    unsigned active() const { return n_active_; }
    // What the pool did at start: CPUs, pinning, NUMA (one line each).
    const std::string& describe() const { return describe_; }
    bool pinned() const { return pinned_; }
    Schedule schedule() const { return schedule_; }
    const std::vector<int>& cpus() const { return cpus_; }  // OS CPU of thread i (when pinned)

    // fn(begin, end, thread_index) over [0, n): contiguous chunks of an even split (sizes differ by
    // at most one), at most grain·active() of them (grain 0: 4), handed out with the pool's schedule.
    // Blocks until done; rethrows the first exception a task threw.
    template <class F>
    void parallel_for(int64_t n, F&& fn, int64_t grain = 0) {
        if (n <= 0) return;
        const int64_t per_thread = grain > 0 ? grain : 4;
        const int64_t chunks = n_active_ == 1 ? 1 : std::min<int64_t>(n, static_cast<int64_t>(n_active_) * per_thread);
        using Fn = std::remove_reference_t<F>;
        struct Ctx { Fn* fn; int64_t n, chunks; } ctx{&fn, n, chunks};
        run_job(chunks, &ctx, [](void* c, int64_t tile, unsigned tid) {
            const Ctx& x = *static_cast<const Ctx*>(c);
            const int64_t per = x.n / x.chunks, rem = x.n % x.chunks;
            const int64_t b = tile * per + std::min(tile, rem);
            (*x.fn)(b, b + per + (tile < rem ? 1 : 0), tid);
        });
    }

    // fn(const Tile&, thread_index) for every tile of `ws`, planned for the active thread count
    // (ws.plan(active()) is called here unless ws was planned for active() already: plan once outside
    // a hot loop to save its few hundred ns). Blocks until done; rethrows the first exception a task threw.
    template <class F>
    void parallel_for(WorkSpace ws, F&& fn) {
        if (ws.planned_for() != n_active_) ws.plan(n_active_);
        if (ws.n_tiles() == 0) return;
        using Fn = std::remove_reference_t<F>;
        struct Ctx { Fn* fn; const WorkSpace* ws; } ctx{&fn, &ws};
        run_job(ws.n_tiles(), &ctx, [](void* c, int64_t tile, unsigned tid) {
            const Ctx& x = *static_cast<const Ctx*>(c);
            (*x.fn)(x.ws->tile(tile), tid);
        });
    }

    // fn(thread_index) once on every active thread at the same time; fn may call barrier().
    template <class F>
    void run(F&& fn) {
        using Fn = std::remove_reference_t<F>;
        run_job(-1, &fn, [](void* c, int64_t, unsigned tid) { (*static_cast<Fn*>(c))(tid); });
    }
    // All active() threads of a run() wait here for each other (spin, then futex). Only inside run().
    void barrier();

    // Tiles per thread of the last job (filled only when stats are on; off by default).
    void set_stats(bool on) { stats_on_ = on; }
    const JobStats& last_stats() const { return stats_; }

    // Physical cores of this machine (hwloc), at least 1.
    static unsigned physical_cores();
    // CPUs (PUs) this process may run on.
    static unsigned available_cpus();

private:
    using Call = void (*)(void* ctx, int64_t tile, unsigned tid);
    void run_job(int64_t n_tiles, void* ctx, Call call);  // n_tiles < 0: run() on every thread
    void worker(unsigned idx);
    void work(unsigned idx, unsigned active);
    // spin: spin for spin_us first (false: straight to the futex, for a thread left out of the last job)
    void wait_value(std::atomic<uint32_t>& word, uint32_t old, std::atomic<uint32_t>& sleepers, bool spin = true) const;
    void setup(const PoolParams& p);
    void pin_caller();

    struct alignas(64) Slot {
        std::atomic<int64_t> next{0};
        int64_t end = 0;
        int64_t done = 0;  // tiles this thread ran (stats)
        int64_t stolen = 0;
    };

    unsigned n_threads_ = 1;
    unsigned n_active_ = 1;  // threads of the next job (set_active)
    unsigned n_job_active_ = 1;  // threads of the running job (written before its job word)
    int64_t spin_ns_ = 50000;
    Schedule schedule_ = Schedule::Stealing;
    bool pinned_ = false;
    bool pin_caller_ = false;
    std::thread::id caller_;  // the caller thread pinned last (pin_caller_)
    std::vector<int> caller_cpus_;  // its affinity before, given back by the destructor
    std::vector<int> cpus_;
    std::string describe_;
    std::vector<std::thread> threads_;
    std::unique_ptr<Slot[]> slots_;

    // the current job (written by the caller before job_gen_ is bumped)
    void* ctx_ = nullptr;
    Call call_ = nullptr;
    int64_t n_tiles_ = 0;

    alignas(64) std::atomic<uint32_t> job_gen_{0};
    // Active threads of job g at [g % kRing], written (release) just before job_gen_ becomes g. A
    // worker that wakes late, when newer jobs have started, finds each job's own count there: it
    // re-reads job_gen_ after the slot and trusts the slot only if the caller cannot have reused it.
    static constexpr uint32_t kRing = 4;
    std::atomic<uint32_t> job_active_[kRing] = {};
    std::atomic<uint32_t> job_sleepers_{0};
    std::atomic<bool> stop_{false};
    alignas(64) std::atomic<uint32_t> pending_{0};
    std::atomic<uint32_t> pending_sleepers_{0};
    alignas(64) std::atomic<uint32_t> bar_count_{0};
    alignas(64) std::atomic<uint32_t> bar_gen_{0};
    std::atomic<uint32_t> bar_sleepers_{0};
    alignas(64) std::atomic<bool> failed_{false};
    std::atomic<bool> busy_{false};
    std::mutex error_mu_;
    std::exception_ptr error_;
    bool stats_on_ = false;
    JobStats stats_;
};

}  // namespace latte

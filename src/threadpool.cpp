#include "threadpool.h"

#include <hwloc.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <latch>
#include <cstdio>
#include <mutex>
#include <set>

#include "latte/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace latte {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

inline int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex word");

void futex_wait(std::atomic<uint32_t>& w, uint32_t old) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&w), FUTEX_WAIT_PRIVATE, old, nullptr, nullptr, 0);
}
void futex_wake_all(std::atomic<uint32_t>& w) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&w), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

// The pool whose task this thread is running (nullptr outside tasks): nested use is refused.
thread_local const ThreadPool* tl_task_pool = nullptr;

struct TaskScope {
    explicit TaskScope(const ThreadPool* p) { tl_task_pool = p; }
    ~TaskScope() { tl_task_pool = nullptr; }
};

// ---- hwloc topology, loaded once per process ----
struct Topology {
    hwloc_topology_t t = nullptr;
    bool ok = false;
    Topology() {
        if (hwloc_topology_init(&t) != 0) { t = nullptr; return; }
        ok = hwloc_topology_load(t) == 0;
    }
    ~Topology() {
        if (t) hwloc_topology_destroy(t);
    }
};
Topology& topology() {
    static Topology topo;
    return topo;
}

struct Bitmap {
    hwloc_bitmap_t b = hwloc_bitmap_alloc();
    Bitmap() = default;
    explicit Bitmap(hwloc_const_bitmap_t src) : b(hwloc_bitmap_dup(src)) {}
    ~Bitmap() { hwloc_bitmap_free(b); }
    Bitmap(const Bitmap&) = delete;
    Bitmap& operator=(const Bitmap&) = delete;
};

std::vector<int> bitmap_list(hwloc_const_bitmap_t b) {
    std::vector<int> v;
    for (int i = hwloc_bitmap_first(b); i >= 0; i = hwloc_bitmap_next(b, i)) v.push_back(i);
    return v;
}

std::string cpu_list_str(const std::vector<int>& v) {
    std::string s;
    for (size_t i = 0; i < v.size();) {
        size_t j = i;
        while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
        if (!s.empty()) s += ",";
        s += std::to_string(v[i]);
        if (j > i) s += "-" + std::to_string(v[j]);
        i = j + 1;
    }
    return s.empty() ? "none" : s;
}

// The CPUs this process may run on (OS numbers).
void available_set(Bitmap& out) {
    // Taken once, at the first pool: pools pin their calling thread (PoolParams::pin_caller), and
    // Linux reports a process's binding as its main thread's, so asking again later would see
    // only the CPU a previous pool pinned the caller to.
    static const std::vector<int> cpus = [] {
        Bitmap b;
        Topology& topo = topology();
        if (!topo.ok) {
            cpu_set_t cs;
            CPU_ZERO(&cs);
            if (sched_getaffinity(0, sizeof cs, &cs) == 0)
                for (int i = 0; i < CPU_SETSIZE; ++i)
                    if (CPU_ISSET(i, &cs)) hwloc_bitmap_set(b.b, static_cast<unsigned>(i));
        } else {
            hwloc_bitmap_copy(b.b, hwloc_topology_get_allowed_cpuset(topo.t));
            Bitmap bound;
            if (hwloc_get_cpubind(topo.t, bound.b, HWLOC_CPUBIND_PROCESS) == 0 && !hwloc_bitmap_iszero(bound.b))
                hwloc_bitmap_and(b.b, b.b, bound.b);
        }
        return bitmap_list(b.b);
    }();
    hwloc_bitmap_zero(out.b);
    for (int c : cpus) hwloc_bitmap_set(out.b, static_cast<unsigned>(c));
}

// "0-7,16,18-19"
void parse_range(const std::string& s, Bitmap& out) {
    size_t i = 0;
    auto bad = [&](const std::string& why) {
        throw Error("--cpu-range '" + s + "': " + why + " (expected a list like 0-7,16-23)");
    };
    if (s.empty()) bad("empty");
    while (i < s.size()) {
        auto num = [&]() -> long {
            size_t j = i;
            while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
            if (j == i || j - i > 6) bad("bad number at position " + std::to_string(i));
            const long v = std::stol(s.substr(i, j - i));
            i = j;
            return v;
        };
        const long a = num();
        long b = a;
        if (i < s.size() && s[i] == '-') {
            ++i;
            b = num();
        }
        if (b < a) bad("range " + std::to_string(a) + "-" + std::to_string(b) + " is backwards");
        hwloc_bitmap_set_range(out.b, static_cast<unsigned>(a), static_cast<int>(b));
        if (i < s.size()) {
            if (s[i] != ',') bad(std::string("unexpected '") + s[i] + "'");
            ++i;
            if (i == s.size()) bad("trailing ','");
        }
    }
}

// "0xff" / "ff": bit i = CPU i
void parse_mask(const std::string& s0, Bitmap& out) {
    std::string s = s0;
    if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s = s.substr(2);
    if (s.empty()) throw Error("--cpu-mask '" + s0 + "': empty (expected hex like 0xff)");
    for (size_t k = 0; k < s.size(); ++k) {
        const char c = s[s.size() - 1 - k];
        int v;
        if (c >= '0' && c <= '9') v = c - '0';
        else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v = c - 'A' + 10;
        else throw Error("--cpu-mask '" + s0 + "': '" + std::string(1, c) + "' is not a hex digit (expected hex like 0xff)");
        for (int bit = 0; bit < 4; ++bit)
            if (v & (1 << bit)) hwloc_bitmap_set(out.b, static_cast<unsigned>(4 * k + bit));
    }
}

int64_t floor_pow2(int64_t x) {
    if (x <= 1) return 1;
    int64_t p = 1;
    while (p <= x / 2) p *= 2;
    return p;
}
int64_t ceil_pow2(int64_t x) {
    int64_t p = 1;
    while (p < x) p *= 2;
    return p;
}

}  // namespace

// ---- NUMA names ----
NumaStrategy parse_numa(const std::string& s) {
    if (s == "none" || s.empty()) return NumaStrategy::None;
    if (s == "distribute") return NumaStrategy::Distribute;
    if (s == "isolate") return NumaStrategy::Isolate;
    if (s == "interleave" || s == "numactl") return NumaStrategy::Interleave;
    throw Error("--numa '" + s + "': expected distribute, isolate, interleave or none");
}
const char* numa_name(NumaStrategy s) {
    switch (s) {
        case NumaStrategy::None: return "none";
        case NumaStrategy::Distribute: return "distribute";
        case NumaStrategy::Isolate: return "isolate";
        case NumaStrategy::Interleave: return "interleave";
    }
    return "?";
}

// ---- WorkSpace ----
WorkSpace::WorkSpace(std::initializer_list<Dim> dims) {
    if (dims.size() == 0 || dims.size() > static_cast<size_t>(kMaxDims))
        throw Error("WorkSpace: 1 to " + std::to_string(kMaxDims) + " dimensions");
    for (const Dim& d : dims) {
        if (d.n < 0) throw Error("WorkSpace: negative dimension");
        Dim x = d;
        x.max_tile = floor_pow2(std::max<int64_t>(1, d.max_tile));
        x.min_tile = std::min(x.max_tile, floor_pow2(std::max<int64_t>(1, d.min_tile)));
        dims_[ndim_] = x;
        tile_[ndim_] = x.max_tile;
        ++ndim_;
    }
    recount();
}

void WorkSpace::recount() {
    total_ = ndim_ > 0 ? 1 : 0;
    for (int d = 0; d < ndim_; ++d) {
        ntiles_[d] = (dims_[d].n + tile_[d] - 1) / tile_[d];
        total_ *= ntiles_[d];
    }
}

int64_t WorkSpace::items() const {
    int64_t s = ndim_ > 0 ? 1 : 0;
    for (int d = 0; d < ndim_; ++d) s *= dims_[d].n;
    return s;
}

void WorkSpace::plan(unsigned n_threads, double tolerance) {
    const int64_t p = std::max(1u, n_threads);
    // Start from the largest tiles; a tile bigger than its dimension is shrunk to the smallest
    // power of two that still covers it (same single tile, and halving then makes progress).
    for (int d = 0; d < ndim_; ++d)
        tile_[d] = std::max(dims_[d].min_tile, std::min(dims_[d].max_tile, ceil_pow2(std::max<int64_t>(1, dims_[d].n))));
    recount();
    while (p > 1 && total_ > 0) {
        const int64_t T = total_;
        const int64_t most = (T + p - 1) / p;  // tiles of the busiest thread
        if (static_cast<double>(most * p) <= (1.0 + tolerance) * static_cast<double>(T)) break;
        int best = -1;
        int64_t room = 1;
        for (int d = 0; d < ndim_; ++d) {
            const int64_t r = tile_[d] / dims_[d].min_tile;
            if (r > 1 && r >= room) { best = d; room = r; }
        }
        if (best < 0) break;
        tile_[best] /= 2;
        recount();
    }
    planned_ = static_cast<unsigned>(p);
}

Tile WorkSpace::tile(int64_t index) const {
    Tile t;
    t.ndim = ndim_;
    for (int d = ndim_ - 1; d >= 0; --d) {
        const int64_t i = index % ntiles_[d];
        index /= ntiles_[d];
        t.b[d] = i * tile_[d];
        t.e[d] = std::min(dims_[d].n, t.b[d] + tile_[d]);
    }
    return t;
}

std::vector<int64_t> WorkSpace::static_items(unsigned n_threads) const {
    const int64_t p = std::max(1u, n_threads);
    std::vector<int64_t> out(static_cast<size_t>(p), 0);
    const int64_t per = total_ / p, rem = total_ % p;
    for (int64_t i = 0; i < p; ++i) {
        const int64_t b = i * per + std::min(i, rem), e = b + per + (i < rem ? 1 : 0);
        for (int64_t k = b; k < e; ++k) out[static_cast<size_t>(i)] += tile(k).items();
    }
    return out;
}

// ---- ThreadPool ----
unsigned ThreadPool::physical_cores() {
    Topology& topo = topology();
    if (topo.ok) {
        const int cores = hwloc_get_nbobjs_by_type(topo.t, HWLOC_OBJ_CORE);
        if (cores > 0) return static_cast<unsigned>(cores);
    }
    return std::max(1u, std::thread::hardware_concurrency());
}

unsigned ThreadPool::available_cpus() {
    Bitmap avail;
    available_set(avail);
    const int w = hwloc_bitmap_weight(avail.b);
    return w > 0 ? static_cast<unsigned>(w) : std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(unsigned n_threads) {
    PoolParams p;
    p.n_threads = n_threads;
    setup(p);
}

ThreadPool::ThreadPool(const PoolParams& p) { setup(p); }

void ThreadPool::setup(const PoolParams& p) {
    Topology& topo = topology();
    schedule_ = p.schedule;
    Bitmap avail;
    available_set(avail);
    const bool explicit_set = !p.cpu_mask.empty() || !p.cpu_range.empty();
    const int n_nodes = topo.ok ? std::max(1, hwloc_get_nbobjs_by_type(topo.t, HWLOC_OBJ_NUMANODE)) : 1;

    // The CPUs to use, in the order threads take them.
    std::vector<int> list;
    std::vector<int> node_of;  // NUMA node (logical index) of list[i]
    std::string why;
    if (explicit_set) {
        Bitmap want;
        if (!p.cpu_mask.empty()) parse_mask(p.cpu_mask, want);
        if (!p.cpu_range.empty()) {
            Bitmap r;
            parse_range(p.cpu_range, r);
            if (p.cpu_mask.empty()) hwloc_bitmap_copy(want.b, r.b);
            else hwloc_bitmap_and(want.b, want.b, r.b);
        }
        Bitmap missing;
        hwloc_bitmap_andnot(missing.b, want.b, avail.b);
        if (!hwloc_bitmap_iszero(missing.b))
            throw Error("--cpu-mask/--cpu-range name CPU " + cpu_list_str(bitmap_list(missing.b)) +
                        ", which this process cannot run on (available: " + cpu_list_str(bitmap_list(avail.b)) + ")");
        if (hwloc_bitmap_iszero(want.b)) throw Error("--cpu-mask/--cpu-range select no CPU");
        list = bitmap_list(want.b);
        why = "the CPUs asked for";
    } else if (topo.ok) {
        // One PU per physical core (or every PU with smt) of the nodes in use.
        Bitmap nodes_cpus;
        if (p.numa == NumaStrategy::Isolate && n_nodes > 1) {
            Bitmap here;
            hwloc_get_last_cpu_location(topo.t, here.b, HWLOC_CPUBIND_THREAD);
            for (int i = 0; i < n_nodes; ++i) {
                hwloc_obj_t node = hwloc_get_obj_by_type(topo.t, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
                if (node && hwloc_bitmap_intersects(node->cpuset, here.b)) hwloc_bitmap_or(nodes_cpus.b, nodes_cpus.b, node->cpuset);
            }
            why = "the node this process started on (--numa isolate)";
        } else {
            hwloc_bitmap_copy(nodes_cpus.b, avail.b);
        }
        hwloc_bitmap_and(nodes_cpus.b, nodes_cpus.b, avail.b);
        const int n_cores = hwloc_get_nbobjs_by_type(topo.t, HWLOC_OBJ_CORE);
        Bitmap chosen;
        for (int c = 0; c < n_cores; ++c) {
            hwloc_obj_t core = hwloc_get_obj_by_type(topo.t, HWLOC_OBJ_CORE, static_cast<unsigned>(c));
            Bitmap in(core->cpuset);
            hwloc_bitmap_and(in.b, in.b, nodes_cpus.b);
            if (hwloc_bitmap_iszero(in.b)) continue;
            if (p.smt) hwloc_bitmap_or(chosen.b, chosen.b, in.b);
            else hwloc_bitmap_set(chosen.b, static_cast<unsigned>(hwloc_bitmap_first(in.b)));
        }
        list = bitmap_list(chosen.b);
        if (why.empty()) why = p.smt ? "every PU of every core" : "one PU per physical core";
    }
    if (list.empty()) {  // no topology: whatever the OS says
        list = bitmap_list(avail.b);
        why = "the OS's CPU list";
    }
    for (int cpu : list) {
        int node = 0;
        if (topo.ok && n_nodes > 1) {
            hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(topo.t, static_cast<unsigned>(cpu));
            hwloc_obj_t nd = pu ? hwloc_get_ancestor_obj_by_type(topo.t, HWLOC_OBJ_NUMANODE, pu) : nullptr;
            if (!nd && pu) {  // hwloc 2: NUMA nodes are memory children; find by cpuset
                for (int i = 0; i < n_nodes; ++i) {
                    hwloc_obj_t x = hwloc_get_obj_by_type(topo.t, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
                    if (x && hwloc_bitmap_isset(x->cpuset, static_cast<unsigned>(cpu))) { node = i; break; }
                }
            } else if (nd) {
                node = static_cast<int>(nd->logical_index);
            }
        }
        node_of.push_back(node);
    }
    if (p.numa == NumaStrategy::Distribute && n_nodes > 1) {  // round-robin over nodes
        std::vector<std::vector<int>> per(static_cast<size_t>(n_nodes));
        for (size_t i = 0; i < list.size(); ++i) per[static_cast<size_t>(node_of[i])].push_back(list[i]);
        std::vector<int> l2, n2;
        for (size_t k = 0; l2.size() < list.size(); ++k)
            for (int nd = 0; nd < n_nodes; ++nd)
                if (k < per[static_cast<size_t>(nd)].size()) { l2.push_back(per[static_cast<size_t>(nd)][k]); n2.push_back(nd); }
        list = l2;
        node_of = n2;
    }

    n_threads_ = p.n_threads > 0 ? p.n_threads : static_cast<unsigned>(std::max<size_t>(1, list.size()));
    n_active_ = n_threads_;
    const unsigned n_avail = std::max(1u, static_cast<unsigned>(hwloc_bitmap_weight(avail.b) > 0 ? hwloc_bitmap_weight(avail.b) : 1));
    const bool oversubscribed = n_threads_ > n_avail;
    int spin_us = p.spin_us;
    if (spin_us < 0)
        if (const char* e = std::getenv("LATTE_SPIN_US"); e && *e) {
            char* end = nullptr;
            const long v = std::strtol(e, &end, 10);
            if (*end != '\0' || v < 0 || v > 10000000) throw Error(std::string("LATTE_SPIN_US=") + e + ": not a number of microseconds in [0, 10000000]");
            spin_us = static_cast<int>(v);
        }
    spin_ns_ = spin_us >= 0 ? static_cast<int64_t>(spin_us) * 1000 : (oversubscribed ? 0 : 50000);
    pinned_ = p.pin && topo.ok && n_threads_ > 1 && n_threads_ <= list.size();
    if (pinned_) cpus_.assign(list.begin(), list.begin() + n_threads_);

    describe_ = "threads: " + std::to_string(n_threads_) + " of " + std::to_string(list.size()) + " CPUs (" + why + ": " +
                cpu_list_str(list) + "), ";
    pin_caller_ = pinned_ && p.pin_caller;
    if (const char* e = std::getenv("LATTE_PIN_CALLER"); e && std::string(e) == "0") pin_caller_ = false;
    if (pinned_) describe_ += pin_caller_ ? "pinned (the calling thread too)" : "pinned (not the calling thread)";
    else if (n_threads_ == 1) describe_ += "one thread, not pinned";
    else if (!p.pin) describe_ += "not pinned (asked)";
    else describe_ += "not pinned: more threads than CPUs";
    describe_ += ", spin " + std::to_string(spin_ns_ / 1000) + " us then sleep";
    describe_ += std::string(", ") + (schedule_ == Schedule::Stealing ? "work stealing" : "static");
    if (p.numa != NumaStrategy::None) {
        if (n_nodes <= 1) describe_ += std::string("\nnuma: one NUMA node: --numa ") + numa_name(p.numa) + " has no effect";
        else describe_ += std::string("\nnuma: ") + numa_name(p.numa) + " over " + std::to_string(n_nodes) + " nodes";
    }
    if (n_threads_ > list.size() && p.pin) {
        static std::once_flag once;
        std::call_once(once, [&] {
            std::fprintf(stderr, "latte: %u threads on %zu CPUs: threads left unpinned (oversubscribed)\n", n_threads_,
                         list.size());
        });
    }
    if (topo.ok && p.numa == NumaStrategy::Interleave && n_nodes > 1) {
        Bitmap all;
        hwloc_bitmap_copy(all.b, hwloc_topology_get_topology_nodeset(topo.t));
        hwloc_set_membind(topo.t, all.b, HWLOC_MEMBIND_INTERLEAVE, HWLOC_MEMBIND_PROCESS | HWLOC_MEMBIND_BYNODESET);
    }

    slots_ = std::make_unique<Slot[]>(n_threads_);
    stats_.tiles_per_thread.assign(n_threads_, 0);
    const bool bind_mem = p.numa == NumaStrategy::Distribute || p.numa == NumaStrategy::Isolate;
    auto pin_self = [this, bind_mem, n_nodes](unsigned i) {
        Topology& tp = topology();
        Bitmap set;
        hwloc_bitmap_set(set.b, static_cast<unsigned>(cpus_[i]));
        hwloc_set_cpubind(tp.t, set.b, HWLOC_CPUBIND_THREAD);
        if (bind_mem && n_nodes > 1) hwloc_set_membind(tp.t, set.b, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_THREAD);
    };
    if (pin_caller_) pin_caller();
    // The constructor returns only once every worker has pinned itself: pinning uses the static
    // hwloc topology, and a pool made just before exit() would otherwise pin while static
    // destruction tears the topology down (a crash at exit seen in short test runs).
    std::latch started(static_cast<std::ptrdiff_t>(n_threads_ - 1));
    threads_.reserve(n_threads_ - 1);
    for (unsigned i = 1; i < n_threads_; ++i)
        threads_.emplace_back([this, i, pin_self, &started] {
            if (pinned_) pin_self(i);
            started.count_down();
            worker(i);
        });
    started.wait();
}

void ThreadPool::pin_caller() {
    Topology& tp = topology();
    Bitmap old;
    caller_cpus_.clear();
    if (hwloc_get_cpubind(tp.t, old.b, HWLOC_CPUBIND_THREAD) == 0) caller_cpus_ = bitmap_list(old.b);
    Bitmap set;
    hwloc_bitmap_set(set.b, static_cast<unsigned>(cpus_[0]));
    hwloc_set_cpubind(tp.t, set.b, HWLOC_CPUBIND_THREAD);
    caller_ = std::this_thread::get_id();
}

ThreadPool::~ThreadPool() {
    if (pin_caller_ && std::this_thread::get_id() == caller_ && !caller_cpus_.empty()) {
        Bitmap set;
        for (int c : caller_cpus_) hwloc_bitmap_set(set.b, static_cast<unsigned>(c));
        hwloc_set_cpubind(topology().t, set.b, HWLOC_CPUBIND_THREAD);
    }
    stop_.store(true, std::memory_order_seq_cst);
    job_gen_.fetch_add(1, std::memory_order_seq_cst);
    futex_wake_all(job_gen_);
    for (auto& t : threads_) t.join();
}

ThreadPool& ThreadPool::process_pool(const PoolParams& p) {
    // Never destroyed: a static pool would be joined during static destruction, after statics its
    // threads and constructor use (the hwloc topology) may already be gone — that crashed at exit
    // in ~80% of runs. The OS reclaims its sleeping threads when the process ends.
    static std::mutex mu;
    static ThreadPool* pool = nullptr;
    std::lock_guard<std::mutex> lk(mu);
    if (!pool) pool = new ThreadPool(p);
    else if (p.n_threads != 0 && p.n_threads != pool->size())
        throw Error("the process thread pool has " + std::to_string(pool->size()) + " threads, " +
                    std::to_string(p.n_threads) + " were asked for (make a per-context pool instead)");
    return *pool;
}

void ThreadPool::wait_value(std::atomic<uint32_t>& word, uint32_t old, std::atomic<uint32_t>& sleepers,
                            bool spin) const {
    if (word.load(std::memory_order_acquire) != old) return;
    if (spin && spin_ns_ > 0) {
        const int64_t t0 = now_ns();
        for (unsigned i = 1;; ++i) {
            cpu_relax();
            if (word.load(std::memory_order_acquire) != old) return;
            if ((i & 31) == 0 && now_ns() - t0 > spin_ns_) break;
        }
    }
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    while (word.load(std::memory_order_seq_cst) == old) futex_wait(word, old);
    sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

void ThreadPool::set_active(unsigned k) {
    if (tl_task_pool != nullptr) throw Error("thread pool: set_active inside a task");
    if (busy_.load(std::memory_order_acquire)) throw Error("thread pool: set_active while a job runs");
    n_active_ = std::clamp(k, 1u, n_threads_);
}

void ThreadPool::worker(unsigned idx) {
    uint32_t seen = 0;
    bool left_out = false;  // not in the last job: likely not in the next either (generation after a
                            // prompt on more threads), so sleep at once instead of spinning
    for (;;) {
        wait_value(job_gen_, seen, job_sleepers_, !left_out);
        uint32_t g = job_gen_.load(std::memory_order_acquire);
        if (stop_.load(std::memory_order_acquire)) return;
        unsigned active;
        for (;;) {  // job g's thread count; if its slot may have been reused meanwhile, take a newer job
            active = job_active_[g % kRing].load(std::memory_order_acquire);
            const uint32_t g2 = job_gen_.load(std::memory_order_acquire);
            if (g2 - g < kRing - 1) break;
            g = g2;
        }
        if (stop_.load(std::memory_order_acquire)) return;  // g may be the destructor's bump (no slot)
        seen = g;  // a job we are in is the current one: the caller waits for us before the next
        left_out = idx >= active;
        if (left_out) continue;  // not in this job: the caller does not wait for us
        work(idx, active);
        if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 && pending_sleepers_.load(std::memory_order_seq_cst))
            futex_wake_all(pending_);
    }
}

void ThreadPool::work(unsigned idx, unsigned active) {
    TaskScope scope(this);
    auto fail = [&] {
        {
            std::lock_guard<std::mutex> lk(error_mu_);
            if (!error_) error_ = std::current_exception();
        }
        failed_.store(true, std::memory_order_seq_cst);
        // release anyone waiting at a barrier of a run(): they see failed_ and leave
        bar_gen_.fetch_add(1, std::memory_order_seq_cst);
        futex_wake_all(bar_gen_);
    };
    if (n_tiles_ < 0) {
        try {
            call_(ctx_, 0, idx);
        } catch (...) {
            fail();
        }
        return;
    }
    Slot& s = slots_[idx];
    int64_t done = 0, stolen = 0;
    try {
        for (;;) {
            if (failed_.load(std::memory_order_relaxed)) break;
            const int64_t t = s.next.fetch_add(1, std::memory_order_relaxed);
            if (t >= s.end) break;
            call_(ctx_, t, idx);
            ++done;
        }
        if (schedule_ == Schedule::Stealing) {
            for (unsigned k = 1; k < active; ++k) {
                Slot& o = slots_[(idx + k) % active];
                for (;;) {
                    if (failed_.load(std::memory_order_relaxed)) break;
                    if (o.next.load(std::memory_order_relaxed) >= o.end) break;
                    const int64_t t = o.next.fetch_add(1, std::memory_order_relaxed);
                    if (t >= o.end) break;
                    call_(ctx_, t, idx);
                    ++done;
                    ++stolen;
                }
            }
        }
    } catch (...) {
        fail();
    }
    s.done = done;
    s.stolen = stolen;
}

void ThreadPool::run_job(int64_t n_tiles, void* ctx, Call call) {
    if (tl_task_pool != nullptr)
        throw Error(std::string("thread pool: nested ") + (n_tiles < 0 ? "run" : "parallel_for") +
                    " inside a task is not supported (every thread of the pool is already busy: split the work "
                    "space instead)");
    if (n_tiles == 0) return;
    if (busy_.exchange(true, std::memory_order_acquire))
        throw Error("thread pool: parallel_for called from two threads at once (one pool serves one caller at a time)");
    struct Unbusy {
        std::atomic<bool>& b;
        ~Unbusy() { b.store(false, std::memory_order_release); }
    } unbusy{busy_};

    if (pin_caller_ && std::this_thread::get_id() != caller_) pin_caller();
    const unsigned active = n_active_;
    if (active == 1) {
        n_job_active_ = 1;
        TaskScope scope(this);
        if (n_tiles < 0) call(ctx, 0, 0);
        else
            for (int64_t t = 0; t < n_tiles; ++t) call(ctx, t, 0);
        if (stats_on_) {
            std::fill(stats_.tiles_per_thread.begin(), stats_.tiles_per_thread.end(), 0);
            stats_.tiles_per_thread[0] = std::max<int64_t>(0, n_tiles);
            stats_.stolen = 0;
        }
        return;
    }

    ctx_ = ctx;
    call_ = call;
    n_tiles_ = n_tiles;
    failed_.store(false, std::memory_order_relaxed);
    error_ = nullptr;
    bar_count_.store(0, std::memory_order_relaxed);
    if (n_tiles > 0) {
        const int64_t p = active, per = n_tiles / p, rem = n_tiles % p;
        for (int64_t i = 0; i < p; ++i) {
            const int64_t b = i * per + std::min(i, rem);
            slots_[i].next.store(b, std::memory_order_relaxed);
            slots_[i].end = b + per + (i < rem ? 1 : 0);
        }
    }
    pending_.store(active - 1, std::memory_order_relaxed);
    n_job_active_ = active;
    const uint32_t gen = job_gen_.load(std::memory_order_relaxed) + 1;
    job_active_[gen % kRing].store(active, std::memory_order_release);
    job_gen_.store(gen, std::memory_order_seq_cst);
    if (job_sleepers_.load(std::memory_order_seq_cst)) futex_wake_all(job_gen_);

    work(0, active);

    for (;;) {
        const uint32_t v = pending_.load(std::memory_order_acquire);
        if (v == 0) break;
        wait_value(pending_, v, pending_sleepers_);
    }
    if (stats_on_ && n_tiles > 0) {
        stats_.stolen = 0;
        for (unsigned i = 0; i < n_threads_; ++i) {
            stats_.tiles_per_thread[i] = i < active ? slots_[i].done : 0;
            if (i < active) stats_.stolen += slots_[i].stolen;
        }
    }
    if (failed_.load(std::memory_order_relaxed)) {
        std::exception_ptr e = error_;
        error_ = nullptr;
        std::rethrow_exception(e);
    }
}

void ThreadPool::barrier() {
    if (tl_task_pool != this) throw Error("thread pool: barrier() outside run()");
    const unsigned active = n_job_active_;
    if (active == 1) return;
    // Read the generation before looking at failed_: a failing thread sets failed_ and then bumps the
    // generation, so either we see failed_ here or the bump wakes us below.
    const uint32_t g = bar_gen_.load(std::memory_order_seq_cst);
    if (failed_.load(std::memory_order_seq_cst)) throw Error("thread pool: barrier left because another thread failed");
    if (bar_count_.fetch_add(1, std::memory_order_acq_rel) == active - 1) {
        bar_count_.store(0, std::memory_order_relaxed);
        bar_gen_.fetch_add(1, std::memory_order_seq_cst);
        if (bar_sleepers_.load(std::memory_order_seq_cst)) futex_wake_all(bar_gen_);
    } else {
        wait_value(bar_gen_, g, bar_sleepers_);
    }
    if (failed_.load(std::memory_order_relaxed)) throw Error("thread pool: barrier left because another thread failed");
}

}  // namespace latte

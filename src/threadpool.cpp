#include "threadpool.h"

#include <hwloc.h>

#include <algorithm>

namespace latte {

ThreadPool::ThreadPool(unsigned n_threads) : n_threads_(std::max(1u, n_threads)) {
    for (unsigned i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    cv_start_.notify_all();
    for (auto& t : threads_) t.join();
}

unsigned ThreadPool::physical_cores() {
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0) return std::max(1u, std::thread::hardware_concurrency());
    unsigned n = 0;
    if (hwloc_topology_load(topo) == 0) {
        const int cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
        if (cores > 0) n = static_cast<unsigned>(cores);
    }
    hwloc_topology_destroy(topo);
    return n > 0 ? n : std::max(1u, std::thread::hardware_concurrency());
}

void ThreadPool::run_chunk(unsigned idx) {
    const int64_t per = n_ / n_threads_, rem = n_ % n_threads_;
    const int64_t b = idx * per + std::min<int64_t>(idx, rem);
    const int64_t e = b + per + (static_cast<int64_t>(idx) < rem ? 1 : 0);
    if (b >= e) return;
    try {
        (*fn_)(b, e, idx);
    } catch (...) {
        std::lock_guard<std::mutex> lk(mu_);
        if (!error_) error_ = std::current_exception();
    }
}

void ThreadPool::worker(unsigned idx) {
    uint64_t seen = 0;
    for (;;) {
        {
            std::unique_lock<std::mutex> lk(mu_);
            cv_start_.wait(lk, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
        }
        run_chunk(idx);
        {
            std::lock_guard<std::mutex> lk(mu_);
            if (--pending_ == 0) cv_done_.notify_one();
        }
    }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, unsigned)>& fn) {
    if (n <= 0) return;
    if (n_threads_ == 1 || n == 1) {
        fn(0, n, 0);
        return;
    }
    {
        std::lock_guard<std::mutex> lk(mu_);
        n_ = n;
        fn_ = &fn;
        error_ = nullptr;
        pending_ = n_threads_ - 1;
        ++generation_;
    }
    cv_start_.notify_all();
    run_chunk(0);
    std::exception_ptr err;
    {
        std::unique_lock<std::mutex> lk(mu_);
        cv_done_.wait(lk, [&] { return pending_ == 0; });
        err = error_;
        fn_ = nullptr;
    }
    if (err) std::rethrow_exception(err);
}

}  // namespace latte

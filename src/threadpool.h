// A small persistent thread pool: parallel_for over [0, n) with static contiguous chunks.
// The per-call work assignment depends only on (n, n_threads), and every result element is
// produced by exactly one thread, so results never depend on scheduling.
// (Issue 4 replaces this with the hwloc-pinned pool with power-of-two splits.)
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace latte {

class ThreadPool {
public:
    explicit ThreadPool(unsigned n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    unsigned size() const { return n_threads_; }
    // fn(begin, end, thread_index) over a contiguous split of [0, n). Blocks until done;
    // rethrows the first exception a task threw.
    void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, unsigned)>& fn);

    // Physical cores of this machine (hwloc), at least 1.
    static unsigned physical_cores();

private:
    void worker(unsigned idx);
    void run_chunk(unsigned idx);

    unsigned n_threads_;
    std::vector<std::thread> threads_;
    std::mutex mu_;
    std::condition_variable cv_start_, cv_done_;
    uint64_t generation_ = 0;
    unsigned pending_ = 0;
    bool stop_ = false;
    int64_t n_ = 0;
    const std::function<void(int64_t, int64_t, unsigned)>* fn_ = nullptr;
    std::exception_ptr error_;
};

}  // namespace latte

// Grow-only buffers for the forward's per-ubatch work: grown(v, n) is v's first n elements, v
// growing only when n exceeds its size. A buffer kept between calls (a Context member, or a static
// thread_local of the thread that runs the call) means a warm context allocates, zero-fills and
// page-faults nothing per ubatch (DESIGN.md §4) — V3's 128-head query for a 512-token ubatch alone
// is 50 MB per layer. Callers write every element they read. The price: each buffer stays at the
// largest size it was grown to (its thread's largest ubatch and context so far) — e.g. -mla 2's
// per-thread K/V of one head are n_kv × 1.25 KiB per pool thread at its longest window.
#pragma once
#include <cstddef>
#include <vector>

namespace latte {

template <class T>
T* grown(std::vector<T>& v, size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
}

}  // namespace latte

// The kernels' scratch buffer: grow-only, 64-byte aligned, one per thread and purpose (no
// allocation once warm). In an anonymous namespace on purpose: every ISA file that includes this
// gets its own copy compiled with its own flags, so the linker can never hand an AVX2 caller a copy
// an AVX-512 file compiled (the same reason kernels/avx512/common.h is in one).
#pragma once
#include <cstddef>
#include <cstdlib>

namespace latte::kernels {
namespace {

struct Buf {
    void* p = nullptr;
    size_t cap = 0;
    ~Buf() { std::free(p); }
    template <class T>
    T* get(size_t n) {
        const size_t bytes = (n * sizeof(T) + 63) & ~size_t{63};
        if (bytes > cap) {
            std::free(p);
            p = std::aligned_alloc(64, bytes);
            cap = bytes;
        }
        return static_cast<T*>(p);
    }
};

}  // namespace
}  // namespace latte::kernels

// The K-quant activation row of every SIMD level's weight matmul (kernels/{avx2,avx512,neon}/
// gemm.cpp; each level's comment says how its kernels read it): per token, n_in = 256·nb int8 q
// (the level's element order), then f32 d_x[nb] (per 256-block: amax/127), then int16 sums
// [nb][16] (of the 16 q of each 16-element group), padded to 64 bytes. One definition of its size
// and of which weight types take it, instead of a copy per level.
// In an anonymous namespace and free of intrinsics on purpose (as kernels/scratch.h): every ISA
// file that includes this gets its own copy compiled with its own flags.
#pragma once
#include <cstddef>
#include <cstdint>

#include "latte/types.h"

namespace latte::kernels {
namespace {

inline size_t k_act_bytes(int64_t n_in) {
    const size_t nb = static_cast<size_t>(n_in / 256);
    return (static_cast<size_t>(n_in) + 36 * nb + 63) & ~size_t{63};
}

// Q4_K, Q5_K, Q6_K and their row-repacked forms (is_kr).
inline bool is_k(GGMLType t) {
    return t == GGMLType::Q4_K || t == GGMLType::Q5_K || t == GGMLType::Q6_K || is_kr(t);
}

}  // namespace
}  // namespace latte::kernels

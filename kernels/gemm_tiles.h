// The weight matmuls' loop nest (kernels/{avx2,avx512,neon}/gemm.cpp), written once: rows in groups
// of ~256 KiB of weights (kept in L2), tokens in chunks of kGemmTokChunk, and inside a chunk each
// tile of TT tokens (its activations in L1) passing over the group's rows RT at a time; the last
// tile of a chunk / group gets what is left (T < TT, R < RT). The order and sizes were measured
// (see the callers' comments); every output element gets its own microkernel call with the same
// operations whatever the tile shape. A "row" is whatever unit the caller tiles: a weight row, or
// a 16-row group of the r16 types (row_bytes then the group's bytes).
// In an anonymous namespace and free of intrinsics on purpose (as kernels/scratch.h): every ISA
// file that includes this gets its own copy compiled with its own flags.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace latte::kernels {
namespace {

constexpr int64_t kGemmTokChunk = 64;
constexpr size_t kGemmGroupBytes = size_t{256} << 10;
// TG over float weights (the avx2 and avx512 kf): while a tile reads its rows, the next tile's rows
// are prefetched at the same column this many bytes further on (see kernels/avx512/gemm.cpp).
constexpr size_t kGemmNextTilePrefetch = 960;

// Rows per group: a multiple of RT holding ~kGemmGroupBytes of weights, at least RT.
inline int64_t gemm_row_group(size_t row_bytes, int64_t RT) {
    return std::max<int64_t>(RT, static_cast<int64_t>(kGemmGroupBytes / row_bytes) / RT * RT);
}

// Calls f(r0, R, t1, T) for the tile of rows [r0, r0 + R) × tokens [t1, t1 + T), 1 <= R <= RT,
// 1 <= T <= TT: per row group, per token chunk, per token tile, the group's row tiles in order.
template <class F>
inline void for_each_gemm_tile(int64_t n_rows, int64_t n_tok, int RT, int TT, size_t row_bytes, F&& f) {
    const int64_t group = gemm_row_group(row_bytes, RT);
    for (int64_t g0 = 0; g0 < n_rows; g0 += group) {
        const int64_t ge = std::min(n_rows, g0 + group);
        for (int64_t t0 = 0; t0 < n_tok; t0 += kGemmTokChunk) {
            const int64_t te = std::min(n_tok, t0 + kGemmTokChunk);
            for (int64_t t1 = t0; t1 < te; t1 += TT) {
                const int T = static_cast<int>(std::min<int64_t>(TT, te - t1));
                for (int64_t r0 = g0; r0 < ge; r0 += RT) {
                    const int R = static_cast<int>(std::min<int64_t>(RT, ge - r0));
                    f(r0, R, t1, T);
                }
            }
        }
    }
}

}  // namespace
}  // namespace latte::kernels

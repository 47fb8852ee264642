// Scalar attention kernels: the reference every SIMD path is tested against.
//
// Contract (both kernels): for each query row i in [0, M)
//     O[i] = sum_{j < kv_len[i]} softmax_j(scale * Q[i] . K[j]) * V[j]
// Q: M rows of Dk floats, row stride ldq floats.
// K: rows of Dk elements of type kt, row stride ldk bytes; V likewise (Dv, vt, ldv). K and V may
//    alias (MQA over the latent cache: V is the first Dv elements of the K row).
// kv_len[i] in [1, N]: how many leading KV rows row i may see (the causal mask as lengths).
// O: M rows of Dv floats, stride ldo. Rows are independent: callers may split M across threads.
// Row types: f32, f16, bf16, q8_0 (a row's byte offset of element k must be block aligned), q8_KV
// (per-row header; V may be a prefix view of a q8_KV K row: dequantisation uses only its scale).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "latte/types.h"

namespace latte::kernels::scalar {

// The whole score row, then an exact softmax (two passes): "-fa off".
void attn_plain(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale,
                float* O, int64_t ldo);

// FlashAttention-style: KV in tiles of kTile rows, online softmax (running max m, sum l,
// O rescaled per tile), never the full score row. "-fa on".
constexpr int kFlashTile = 64;
void attn_flash(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale,
                float* O, int64_t ldo);

// The flash kernel's partial form for flash-decoding (contract in kernels/dispatch.h, AttnPartFn):
// O unnormalised, per-row running max m_out and sum l_out; kv_len[i] <= 0 gives m=-inf, l=0, O=0.
void attn_flash_part(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                     GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale,
                     float* O, int64_t ldo, float* m_out, float* l_out);

// dispatch.h's AttnCombineFn (the TG split's merge of one row): the reference, multiply then add.
void attn_combine(int chunks, int Dv, const float* w, const float* part, size_t stride, float* o);

// The SIMD levels' merge for the columns [d0, d1) past their last whole vector, one column at a
// time with fma, as their vectors sum (the same contract as attn_combine).
inline void attn_combine_tail(int chunks, int d0, int d1, const float* w, const float* part, size_t stride, float* o) {
    for (int d = d0; d < d1; ++d) {
        float acc = 0.0f;
        for (int c = 0; c < chunks; ++c)
            if (w[c] != 0.0f) acc = std::fma(w[c], part[static_cast<size_t>(c) * stride + d], acc);
        o[d] = acc;
    }
}

}  // namespace latte::kernels::scalar

// avx2 attention kernels: the same contracts as kernels/scalar/flash_attn.h and the
// AttnFn/AttnPartFn/QuantizeRowFn entries of kernels/dispatch.h. Declarations only (no intrinsics):
// dispatch.cpp includes this; kernels/avx2/flash_attn.cpp is compiled with only avx2 flags.
#pragma once
#include <cstddef>
#include <cstdint>

#include "latte/types.h"

namespace latte::kernels::avx2 {

void attn_plain(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale,
                float* O, int64_t ldo);
void attn_flash(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale,
                float* O, int64_t ldo);
void attn_flash_part(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                     GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale,
                     float* O, int64_t ldo, float* m_out, float* l_out);
void quantize_row(GGMLType t, const float* src, void* dst, int64_t n);
void dequantize_row(GGMLType t, const void* src, float* dst, int64_t n);

}  // namespace latte::kernels::avx2

// The same attention kernels built with AVX-VNNI (kernels/avx2/flash_attn_vnni.cpp): the avx2
// level's functions where the CPU has AVX-VNNI; same results to the bit.
namespace latte::kernels::avx2vnni {

void attn_plain(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale,
                float* O, int64_t ldo);
void attn_flash(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale,
                float* O, int64_t ldo);
void attn_flash_part(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                     GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale,
                     float* O, int64_t ldo, float* m_out, float* l_out);
void quantize_row(GGMLType t, const float* src, void* dst, int64_t n);
void dequantize_row(GGMLType t, const void* src, float* dst, int64_t n);

}  // namespace latte::kernels::avx2vnni

// avx2 attention kernels: the same contracts as kernels/scalar/flash_attn.h and the
// AttnFn/AttnPartFn/QuantizeRowFn entries of kernels/dispatch.h. Declarations only (no intrinsics):
// dispatch.cpp includes this; kernels/avx2/flash_attn.cpp is compiled with only avx2 flags.
#pragma once
#include <cstddef>
#include <cstdint>

#include "latte/types.h"

namespace latte::kernels::avx2 {

#include "kernels/attn_decls.inc"
// dispatch.h's AttnCombineFn (also the avx2-vnni table's)
void attn_combine(int chunks, int Dv, const float* w, const float* part, size_t stride, float* o);
void quantize_row(GGMLType t, const float* src, void* dst, int64_t n);
void dequantize_row(GGMLType t, const void* src, float* dst, int64_t n);

}  // namespace latte::kernels::avx2

// The same attention kernels built with AVX-VNNI (kernels/avx2/flash_attn_vnni.cpp): the avx2
// level's functions where the CPU has AVX-VNNI; same results to the bit.
namespace latte::kernels::avx2vnni {

#include "kernels/attn_decls.inc"
void quantize_row(GGMLType t, const float* src, void* dst, int64_t n);
void dequantize_row(GGMLType t, const void* src, float* dst, int64_t n);

}  // namespace latte::kernels::avx2vnni

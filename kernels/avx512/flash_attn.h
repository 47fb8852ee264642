// avx512 attention kernels: the same contracts as kernels/scalar/flash_attn.h and the
// AttnFn/AttnPartFn/QuantizeRowFn entries of kernels/dispatch.h. Declarations only (no intrinsics):
// dispatch.cpp includes this; kernels/avx512/flash_attn.cpp is compiled with only avx512 flags.
#pragma once
#include <cstddef>
#include <cstdint>

#include "latte/types.h"

namespace latte::kernels::avx512 {

#include "kernels/attn_decls.inc"
void quantize_row(GGMLType t, const float* src, void* dst, int64_t n);
void dequantize_row(GGMLType t, const void* src, float* dst, int64_t n);

}  // namespace latte::kernels::avx512

// NEON attention kernels (aarch64, ARMv8.2-A + dotprod): the same contracts as
// kernels/scalar/flash_attn.h and the AttnFn/AttnPartFn/QuantizeRowFn entries of kernels/dispatch.h.
// Declarations only (no intrinsics): dispatch.cpp includes this; kernels/neon/flash_attn.cpp is
// compiled only for aarch64 targets, with -march=armv8.2-a+dotprod.
#pragma once
#include <cstddef>
#include <cstdint>

#include "latte/types.h"

namespace latte::kernels::neon {

#include "kernels/attn_decls.inc"
// dispatch.h's AttnCombineFn
void attn_combine(int chunks, int Dv, const float* w, const float* part, size_t stride, float* o);
void quantize_row(GGMLType t, const float* src, void* dst, int64_t n);
void dequantize_row(GGMLType t, const void* src, float* dst, int64_t n);

}  // namespace latte::kernels::neon

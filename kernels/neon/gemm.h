// NEON weight matmul (aarch64, ARMv8.2-A + dotprod): the contract of GemmFn / GemmActSizeFn /
// GemmActPrepFn in kernels/dispatch.h. Declarations only (no intrinsics): dispatch.cpp includes
// this; kernels/neon/gemm.cpp is compiled only for aarch64 targets, with -march=armv8.2-a+dotprod.
#pragma once
#include <cstddef>
#include <cstdint>

#include "latte/types.h"

namespace latte::kernels::neon {

size_t gemm_act_size(GGMLType wt, int64_t n_in);
void gemm_act_prep(GGMLType wt, const float* X, int64_t ldx, int64_t n_in, int64_t n_tok, void* act);
void gemm(GGMLType wt, const void* W, size_t ldw, int64_t n_in, int64_t n_out, const float* X, int64_t ldx,
          const void* act, int64_t n_tok, float* Y, int64_t ldy);

}  // namespace latte::kernels::neon

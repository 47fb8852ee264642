// AMX weight matmul: the contract of GemmFn / GemmActSizeFn / GemmActPrepFn in kernels/dispatch.h,
// with bf16 tiles (TDPBF16PS) for Q8_0_R16 / Q4_0_R16 weights at n_tok >= 64; everything
// else is the avx512 level's. Declarations only: dispatch.cpp includes this; kernels/amx/gemm.cpp
// is compiled with the avx512 flags plus AMX-TILE/INT8/BF16.
#pragma once
#include <cstddef>
#include <cstdint>

#include "latte/types.h"

namespace latte::kernels::amx {

size_t gemm_act_size(GGMLType wt, int64_t n_in);
void gemm_act_prep(GGMLType wt, const float* X, int64_t ldx, int64_t n_in, int64_t n_tok, void* act);
void gemm(GGMLType wt, const void* W, size_t ldw, int64_t n_in, int64_t n_out, const float* X, int64_t ldx,
          const void* act, int64_t n_tok, float* Y, int64_t ldy);

}  // namespace latte::kernels::amx

// The bf16 tile path alone, for tests (tests/test_amx_emulated.cpp builds kernels/amx/gemm.cpp a
// second time with LATTE_AMX_EMULATE, into namespace amx_emu, and runs it on any x86 CPU).
//   gemm_uses_bf16: whether the amx table's gemm runs a call on the tiles (wt Q8_0_R16 or
//     Q4_0_R16, n_tok >= 64, LATTE_AMX_GEMM not 0).
//   gemm_bf16 (wt Q8_0_R16 or Q4_0_R16): Y[t·ldy + j] = Σ_i bf16(w_ji) · xb[t][i] for t < n_tok,
//     j < n_out, with w_ji the dequantised weight (q·d, exact in f32) rounded to bf16 (nearest
//     even) and xb the activation rows already in bf16 (row t at xb + t·lda bytes); products
//     exact, f32 sums in k order per 32-block pair as TDPBF16PS does them (k-blocks of 4096 inputs
//     summed in order).
//   to_bf16: n floats to bf16, nearest even.
#define LATTE_AMX_GEMM_TEST_API(ns)                                                                      \
    namespace latte::kernels::ns {                                                                       \
    bool gemm_uses_bf16(GGMLType wt, int64_t n_in, int64_t n_tok);                                       \
    void gemm_bf16(GGMLType wt, const void* W, size_t ldw, int64_t n_in, int64_t n_out, const void* xb, \
                   size_t lda, int64_t n_tok, float* Y, int64_t ldy);                                    \
    void to_bf16(const float* x, int64_t n, uint16_t* y);                                                \
    }
LATTE_AMX_GEMM_TEST_API(amx)
LATTE_AMX_GEMM_TEST_API(amx_emu)

// avx512 attention kernels: the same contracts as kernels/scalar/flash_attn.h and the
// AttnFn/AttnPartFn/QuantizeRowFn entries of kernels/dispatch.h. Declarations only (no intrinsics):
// dispatch.cpp includes this; kernels/avx512/flash_attn.cpp is compiled with only avx512 flags.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/quant_query.h"
#include "latte/types.h"

namespace latte::kernels::avx512 {

#include "kernels/attn_decls.inc"
// dispatch.h's AttnQuantQFn / AttnPartQFn (the query quantised once per TG split)
bool attn_quant_q(GGMLType kt, GGMLType vt, int Dk, int Dv, int M, const float* Q, int64_t ldq, float scale, int8_t* q,
                  float* d, int32_t* s);
void attn_flash_part_q(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                       GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale, float* O,
                       int64_t ldo, float* m_out, float* l_out, const QuantQuery& qq);
// dispatch.h's AttnCombineFn (also the amx level's)
void attn_combine(int chunks, int Dv, const float* w, const float* part, size_t stride, float* o);
void quantize_row(GGMLType t, const float* src, void* dst, int64_t n);
void dequantize_row(GGMLType t, const void* src, float* dst, int64_t n);

}  // namespace latte::kernels::avx512

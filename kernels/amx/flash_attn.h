// AMX attention kernels: the contracts of kernels/scalar/flash_attn.h and the AttnFn/AttnPartFn
// entries of kernels/dispatch.h. Declarations only (no intrinsics): dispatch.cpp includes this;
// kernels/amx/flash_attn.cpp is compiled with the avx512 flags plus AMX-TILE/INT8/BF16.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/quant_query.h"
#include "latte/types.h"

namespace latte::kernels::amx {

#include "kernels/attn_decls.inc"
// dispatch.h's AttnQuantQFn / AttnPartQFn (the query quantised once per TG split)
bool attn_quant_q(GGMLType kt, GGMLType vt, int Dk, int Dv, int M, const float* Q, int64_t ldq, float scale, int8_t* q,
                  float* d, int32_t* s);
// dispatch.h's AttnPackQFn (the int8 kernel's Qᵀ B tiles, packed once per TG split)
bool attn_pack_q(GGMLType kt, GGMLType vt, int Dk, int Dv, int M, const int8_t* q, uint8_t* qp);
void attn_flash_part_q(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                       GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale, float* O,
                       int64_t ldo, float* m_out, float* l_out, const QuantQuery& qq);

}  // namespace latte::kernels::amx

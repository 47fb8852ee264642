// AMX attention kernels: the contracts of kernels/scalar/flash_attn.h and the AttnFn/AttnPartFn
// entries of kernels/dispatch.h. Declarations only (no intrinsics): dispatch.cpp includes this;
// kernels/amx/flash_attn.cpp is compiled with the avx512 flags plus AMX-TILE/INT8/BF16.
#pragma once
#include <cstddef>
#include <cstdint>

#include "latte/types.h"

namespace latte::kernels::amx {

void attn_plain(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale,
                float* O, int64_t ldo);
void attn_flash(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale,
                float* O, int64_t ldo);
void attn_flash_part(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                     GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale,
                     float* O, int64_t ldo, float* m_out, float* l_out);

}  // namespace latte::kernels::amx

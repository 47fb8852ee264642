// The query rows of an attention call quantised to int8 ahead of it, for the kernels that quantise
// the query for a q8 cache (kernels/dispatch.h: attn_quant_q / attn_flash_part_q). TG splits the
// KV length into up to 32 chunks (src/mla_attention.cpp's attend_split); each chunk's call would
// otherwise quantise the same rows again (TG 128 heads @ 8K, amx: 12% of the kernel's samples).
#pragma once
#include <cstddef>
#include <cstdint>

namespace latte::kernels {

// Row r: q[r·Dk .. r·Dk + Dk), and `blocks` scales d and int8 sums s at r·blocks (blocks = 1 for a
// q8_KV cache, Dk / 32 for q8_0); d includes the softmax scale. Pointers at the call's first row.
// qp: the level's own packed form of those rows (dispatch.h's attn_pack_q; amx: the Qᵀ B tiles,
// 16·Dk bytes per 16 rows from the call's first row), or null: the kernel packs them itself.
//
// next_k / next_v (next_k_bytes / next_v_bytes; null: none): the rows the caller's thread reads in its next call
// (the split's next KV chunk; next_v only where V is not inside the K rows). A kernel may prefetch
// them into L2 while it works, so that the next call's first touch of its rows does not wait on
// memory; they are never read.
struct QuantQuery {
    const int8_t* q;
    const float* d;
    const int32_t* s;
    const uint8_t* qp = nullptr;
    const uint8_t* next_k = nullptr;
    const uint8_t* next_v = nullptr;
    size_t next_k_bytes = 0, next_v_bytes = 0;
};

}  // namespace latte::kernels

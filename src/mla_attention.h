// One layer's Multi-head Latent Attention in each -mla mode (DESIGN.md §1), over the KV cache.
#pragma once
#include "kernels/dispatch.h"
#include "kv_cache.h"
#include "threadpool.h"

namespace latte {

// How a ubatch's attention is computed (mode 3 is resolved to 1 or 2 by the caller).
enum class MlaPath { Full = 0, Absorbed = 1, Decompressed = 2 };

// Per-layer absorbed weights in f32: wkb[h][i][j] (d_nope rows of kv_lora) is W_kb_h,
// wvb[h][i][j] (d_v rows of kv_lora) is W_vb_h.
struct MlaWeights {
    const float* wkb = nullptr;
    const float* wvb = nullptr;
    // W_kb_h transposed ([H][kv_lora][d_nope]), when the model has it: -mla 1's query absorption
    // q_lat = W_kb_hᵀ q_nope then runs as a weight matmul of the kernel table (null: a plain loop).
    const float* wkbT = nullptr;
    // f16 copies of W_kbᵀ and W_vb for the absorbed path (null: the f32 ones above).
    const uint16_t* wkbT16 = nullptr;
    const uint16_t* wvb16 = nullptr;
    // attn_kv_b's rows in the file's (or repacked) type, for -mla 2's decompression through the
    // weight matmul (null: the f32 W_kb/W_vb): head h's W_kb rows start at row h·(N+V), its W_vb
    // rows at h·(N+V)+N; rows of kv_lora elements, kvb_ld bytes apart.
    const uint8_t* kvb = nullptr;
    size_t kvb_ld = 0;
    GGMLType kvb_type = GGMLType::F32;
};

// Writes the cache rows of n new tokens at positions [pos0, pos0+n) of layer il.
// c: n rows of kv_lora (already normed); kpe: n rows of n_rot (already roped).
// Latent cache: row = [c, kpe]. Full cache: K_h = [W_kb_h c, kpe], V_h = W_vb_h c.
void mla_store(KVCache& cache, int il, int pos0, int n, const float* c, const float* kpe, const MlaWeights& w,
               ThreadPool& pool);

// Attention of n query tokens at positions [pos0, pos0+n) over cache positions [0, pos0+n)
// with the causal mask. q: n rows of n_head·(d_nope+n_rot) (rope applied); out: n rows of
// n_head·d_v. Path Full needs a full cache, the others a latent one (throws otherwise).
void mla_attend(MlaPath path, bool flash, const KVCache& cache, int il, int pos0, int n, const float* q,
                const MlaWeights& w, float scale, float* out, ThreadPool& pool);

// The -mla 1 attention core (MQA, one KV head): M query rows (heads × tokens fused) of Dk values
// attend over cache rows [0, n_kv) (K: rows of Dk elements of `type`, stride ldk bytes; V: the
// first Dv elements of each row); kv_len[r] rows visible to row r; O: M rows of Dv floats.
// With `flash` and few rows (TG) the KV length is split across the pool (flash-decoding, exact
// merge); otherwise the rows are split. The split depends only on (M, n_kv), not on the threads.
void mqa_attend(const kernels::KernelTable& kt, bool flash, const uint8_t* K, size_t ldk, GGMLType type, int64_t M,
                int n_kv, int Dk, int Dv, const float* Q, const int* kv_len, float scale, float* O, ThreadPool& pool);

}  // namespace latte

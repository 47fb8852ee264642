// The kernel dispatch table: one table of plain function pointers per ISA level, chosen once
// from the CPU's features (or forced with LATTE_ISA). The engine calls kernels only through it
// and never includes an ISA header (DESIGN.md §4, §5).
//
// Levels: scalar (the reference, always present), avx2 (AVX2+FMA+F16C), avx512
// (F/BW/VL/DQ/VNNI/BF16), amx (the avx512 table with the AMX attention kernel for q8_KV caches and
// the bf16-tile weight matmul for q8_0_r16/q4_0_r16 at 8+ tokens, kernels/amx/; needs a CPU with
// AMX-TILE/INT8/BF16 and an OS that grants the tile state), neon
// (kernels/neon/, aarch64 builds only; needs Advanced SIMD and the dot-product extension,
// HWCAP_ASIMDDP).
//
// Adding a level: write kernels/<isa>/*.cpp with only that ISA's compile flags, give them the
// signatures below, and fill a KernelTable in dispatch.cpp. Every entry must satisfy the same
// contract as the scalar kernel it replaces (tests/test_kernels.cpp checks each level against it).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "latte/types.h"
#include "kernels/quant_query.h"

namespace latte::kernels {

enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2, Amx = 3, Neon = 4 };

// Attention, "-fa off" (plain) or "-fa on" (flash), normalised output. The contract is the one of
// kernels/scalar/flash_attn.h: for each query row i in [0, M)
//     O[i] = sum_{j < kv_len[i]} softmax_j(scale * Q[i] . K[j]) * V[j]
//   Q: M rows of Dk floats, row stride ldq floats;
//   K: rows of Dk elements of type kt, stride ldk bytes; V: rows of Dv elements of type vt,
//      stride ldv bytes. K and V may alias (V = the first Dv elements of each K row);
//   kv_len[i] in [1, N]; O: M rows of Dv floats, stride ldo floats, every element written.
//   Types: f32, f16, bf16, q8_0, q8_KV (a q8_KV V may be a prefix view of a q8_KV K row). A q8_KV
//   row's header must hold the true sum of its int8 values (latte::quantize_row and the table's
//   quantize_row write it): avx512's 16-row TG path uses it for the u8/s8 correction of Q·Kᵀ.
//   SIMD levels compute q8_0/q8_KV Q·Kᵀ with the query quantised on the fly (q8_0: per 32-block,
//   q8_KV: per row), and avx512/amx bf16 Q·Kᵀ with the query rounded to bf16 (the cache's own
//   precision; vdpbf16ps / bf16 tiles): results agree with scalar within that rounding, not
//   bitwise (tests/attn_data.h's tol()).
using AttnFn = void (*)(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                        GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale,
                        float* O, int64_t ldo);

// Partial flash attention for flash-decoding: as AttnFn but O is left unnormalised
// (O[i] = sum_j exp(s_ij - m_i) V[j]) and the row's running max m_out[i] and sum
// l_out[i] = sum_j exp(s_ij - m_i) are returned; kv_len[i] may be <= 0 (no visible row:
// m = -inf, l = 0, O = 0). Partials over disjoint KV ranges merge exactly:
//     m = max_c m_c,  l = sum_c l_c e^{m_c - m},  O = (sum_c O_c e^{m_c - m}) / l.
using AttnPartFn = void (*)(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                            GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale,
                            float* O, int64_t ldo, float* m_out, float* l_out);

// The query quantised once for many calls (the TG split's KV chunks): attn_quant_q says whether
// the level's kernels take an int8 query for (kt, vt, Dk, Dv) and, if so, quantises M rows of Q
// into q (M·Dk), d and s (M·blocks each, kernels/quant_query.h) exactly as its attn_flash_part
// would; attn_flash_part_q is attn_flash_part with those rows given (qq at the call's first row;
// Q, ldq and scale as attn_flash_part's, for what does not take them): the same bits. Null at the
// levels without an int8 query (scalar, avx2, neon).
using AttnQuantQFn = bool (*)(GGMLType kt, GGMLType vt, int Dk, int Dv, int M, const float* Q, int64_t ldq,
                              float scale, int8_t* q, float* d, int32_t* s);
using AttnPartQFn = void (*)(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                             GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale,
                             float* O, int64_t ldo, float* m_out, float* l_out, const QuantQuery& qq);
// And packed once too: attn_pack_q says whether the level's kernel for (kt, vt, Dk, Dv) packs its
// int8 query rows per 16-row block and, if so, packs M rows of q (attn_quant_q's) into qp, 16·Dk
// bytes per 16 rows (the last block padded with zero rows), as its call would; a call given
// QuantQuery::qp (at a row that is a multiple of 16 from the packed rows' first) uses them: the
// same bits. Null where no kernel packs (every level but amx).
using AttnPackQFn = bool (*)(GGMLType kt, GGMLType vt, int Dk, int Dv, int M, const int8_t* q, uint8_t* qp);

// The TG split's merge (flash-decoding), one query row: for d < Dv
//     o[d] = sum_{c < chunks, w[c] != 0} w[c] · part[c·stride + d]
// in ascending c (a chunk with w[c] == 0 is not read: an empty chunk's partial is never written);
// o all zeros when every w[c] is 0. The caller folds the merge's e^{m_c - m} / l into w.
// SIMD levels sum with FMA: within f32 rounding of scalar's multiply-then-add.
using AttnCombineFn = void (*)(int chunks, int Dv, const float* w, const float* part, size_t stride, float* o);

// Row conversion (the cache writer): as latte::quantize_row / dequantize_row for the cache types.
// SIMD quantisers may round exact .5 ties differently from the scalar one (to even, not away).
using QuantizeRowFn = void (*)(GGMLType t, const float* src, void* dst, int64_t n);
using DequantizeRowFn = void (*)(GGMLType t, const void* src, float* dst, int64_t n);

// Weight matmul (issue 7): for t < n_tok, j < n_out
//     Y[t·ldy + j] = dot(dequantize(W row j), X[t·ldx .. + n_in))
//   W: n_out rows of n_in elements of type wt, row stride ldw bytes (a GGUF tensor's rows, or a
//      slice of them: an expert, a block of rows); n_in a multiple of wt's block size.
//   X: n_tok rows of n_in floats, stride ldx; Y: every element Y[t·ldy + j] (j < n_out) written.
//   act: the activation as gemm_act_prep made it for (wt, n_in) from the same X, n_tok rows of
//      gemm_act_size(wt, n_in) bytes each (token t at t·gemm_act_size); may be null when
//      gemm_act_size is 0. The caller prepares it once and then calls gemm on any split of the
//      rows (threads take blocks of rows): prep is per token, independent of the row split.
//   Each Y element is computed by the same operations whatever rows/tokens share the call (amx:
//   see below, its n_tok threshold), so a result does not depend on how the caller splits the rows
//   (thread-count independence).
//   Types: F32, F16, BF16, Q8_0, Q4_0, Q8_0_R16, Q4_0_R16, Q4_K, Q5_K, Q6_K, Q4_K_R, Q5_K_R, Q6_K_R
//      on every level (neon: the file K-quant types scalar, their repacked _R forms SDOT); others go
//      to scalar.
//   scalar: dequantise each row to f32, dot in f32 (8 partial sums): the definition; act size 0.
//   SIMD, F32/F16/BF16: weights converted exactly to f32, f32 FMA: same as scalar up to the
//      summation order (relative error ~1e-6·Σ|w·x|).
//   SIMD, Q8_0/Q4_0: X quantised to int8 per 32-block (d = amax/127, round to nearest) by
//      gemm_act_prep; int8 dots exact; so |Y - Y_scalar| <= Σ_blocks Σ_i |w_i|·d_x/2 (+ f32
//      rounding) — the activation's quantisation, as ggml's q8_0 dot has.
//   SIMD, Q4_K/Q5_K/Q6_K: X quantised to int8 per 256-block (d = amax/127 of the 256, round to
//      nearest; with the int16 sums of each 16 values) by gemm_act_prep, as ggml's q8_K; per block
//      the sub-block dots q·x, their 6/8-bit scales and the mins (Q4_K/Q5_K, via the sums) or the -32
//      offset (Q6_K) are exact int32; one f32 scale d_w·d_x (and -dmin·d_x) per 256-block. So
//      |Y - Y_scalar| <= Σ_256-blocks Σ_i |w_i|·d_x/2 (+ f32 rounding, ~1e-6·Σ|w·x|). Q4_K_R /
//      Q5_K_R / Q6_K_R (K-quant blocks rearranged at load, row by row, latte/types.h; any rows):
//      the file type's result (scalar: bit for bit; SIMD: the same activation quantisation, int32
//      block sums and bound, another f32 lane split).
//   Q8_0_R16 / Q4_0_R16 (Q8_0 / Q4_0 repacked in 16-row groups at load, latte/types.h): n_out a
//      multiple of 16 and ldw = row_bytes(n_in) (a group is 16·ldw contiguous bytes; W points at a
//      group); the result is Q8_0's / Q4_0's (scalar: bit for bit; SIMD: the same activation
//      quantisation and error bound, f32 summation in block order per row).
//   neon: kernels/neon/gemm.cpp (SDOT int8 dots, 4-lane f32 FMA), the same contract and bounds.
//   amx: Q8_0_R16 / Q4_0_R16 / Q4_K_R / Q5_K_R calls with n_tok >= 64 run on bf16 tiles
//      (kernels/amx/gemm.cpp): the weights (dequantised in f32 as dequantize_row does) and X
//      rounded to bf16 (nearest even), exact products, f32 sums, so |Y - Y_exact| <= 2^-8·Σ|w·x| +
//      f32 rounding — inside the Q8_0/Q4_0 and K-quant bounds above (|x_i| <= amax of its block).
//      K-quant rows go to the tiles in whole 16-row groups counted from the call's first row, the
//      call's last n_out % 16 rows to avx512: callers split rows at multiples of 16. Below 64
//      tokens, and for every other type, the avx512 kernels. At this level a result therefore
//      depends on the call's n_tok through that threshold: callers split rows between threads,
//      never tokens (src/forward.cpp, src/mla_attention.cpp), so thread-count independence holds;
//      a token's result may differ between a 1-token and a 64-token call.
using GemmActSizeFn = size_t (*)(GGMLType wt, int64_t n_in);
using GemmActPrepFn = void (*)(GGMLType wt, const float* X, int64_t ldx, int64_t n_in, int64_t n_tok, void* act);
using GemmFn = void (*)(GGMLType wt, const void* W, size_t ldw, int64_t n_in, int64_t n_out, const float* X,
                        int64_t ldx, const void* act, int64_t n_tok, float* Y, int64_t ldy);

struct KernelTable {
    Isa isa;                  // the level this table implements
    const char* name;         // "scalar", "avx2", "avx512", "amx", "neon"
    AttnFn attn_plain;        // -fa off
    AttnFn attn_flash;        // -fa on
    AttnPartFn attn_flash_part;
    QuantizeRowFn quantize_row;
    DequantizeRowFn dequantize_row;
    GemmActSizeFn gemm_act_size;
    GemmActPrepFn gemm_act_prep;
    GemmFn gemm;
    AttnQuantQFn attn_quant_q = nullptr;  // null: no int8 query at this level
    AttnPartQFn attn_flash_part_q = nullptr;
    AttnCombineFn attn_combine = nullptr;  // every level sets it
    AttnPackQFn attn_pack_q = nullptr;     // amx only
};

const char* isa_name(Isa isa);
// Parses "scalar", "avx2", "avx512", "amx", "neon" (case-insensitive); throws latte::Error naming
// the value and the accepted ones otherwise.
Isa parse_isa(std::string_view s);
// Whether this CPU and this build can run the level.
bool isa_available(Isa isa);
// The best level this CPU and build can run.
Isa best_isa();
// Every level this CPU and build can run, scalar first.
std::vector<Isa> available_isas();
// The table of one level; throws latte::Error naming the level when this CPU or build lacks it.
const KernelTable& table_for(Isa isa);
// Resolution of a LATTE_ISA value: empty or "auto" gives best_isa()'s table, a level name that
// level's table (throws as table_for / parse_isa do). Pure: tests call it with any string.
const KernelTable& resolve_table(std::string_view request);
// The process-wide table: resolve_table(getenv("LATTE_ISA")), computed once (thread-safe).
const KernelTable& active();

}  // namespace latte::kernels

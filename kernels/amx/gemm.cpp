// AMX weight matmul (issue 7, PP's weight half): Q8_0_R16 / Q4_0_R16 weights (every repacked
// DeepSeek projection and expert) times 64 or more activation rows (PP) through bf16 tiles.
//
// Why bf16 and not int8 tiles: a Q8_0 weight carries one scale per 32 values along k, so an int8
// TDPBUSD would have to stop every 32 k (half its 64-deep step), store the 16×16 int32 tile and
// scale it into f32 — ~50 vector ops per 8192 MACs next to the tile op. With the weights turned
// into bf16 values (q·d, exact in f32, then rounded to bf16) the 16×16×32 TDPBF16PS accumulates
// in f32 over the whole of k with no per-block work at all; the conversion is paid once per weight
// and call (the weights of a 16-row group are unpacked into a panel once and used for every token
// tile), which at the token counts PP runs (experts see tens to hundreds of tokens) is a small
// part of the tile work.
//
// Layout per call:
//   - act (gemm_act_prep): per token the avx512 level's activation (int8 q8 for the VNNI path,
//     used below 64 tokens), padded to 64 bytes, then the row in bf16 (nearest even),
//     padded to 64 bytes.
//   - k in blocks of up to 4096 inputs, rows in chunks of up to 1 MiB of bf16 per k-block (256 rows
//     of 2048 inputs), as panels of 32 rows (two 16-row groups) whose weights are unpacked to bf16
//     B tiles once per call: panel[kb][g] = 16 rows × 64 bytes, B row p = (w[r][32kb + 2p],
//     w[r][32kb + 2p + 1]) for r = 0..15 (the TDPBF16PS B layout: pairs along k per 32-bit lane,
//     one lane per output row);
//   - tokens in pairs of 16-token tiles, loaded in place from the activation's bf16 rows (stride
//     the act row); the pair is the outer loop and the chunk's panels the inner one, so its rows
//     come from L3 once and from L2 for the other panels (the tail tile, < 16 tokens, is copied
//     to 16 zero-padded rows first);
//   - 2 × 2 register blocking: C tiles tmm0-3 (32 tokens × 32 rows, f32), A tmm4-5, B tmm6-7; each
//     k-step of 32 loads 2 A and 2 B tiles and runs 4 independent TDPBF16PS; after the last
//     k-block C is stored straight into Y (a row of a C tile is 16 consecutive outputs of one
//     token), before it into a contiguous scratch it is reloaded from.
// The loop order was chosen on the 16-core Xeon (2026-12-03, docs/PERFORMANCE.md "AMX weight
// matmuls"): panels outer with a per-thread tile-major copy of every token block (the first
// version) ran 1.2× slower at 16 threads; software prefetch of the next k-step's tiles and
// k-blocking with C kept in a scratch between k-blocks were both slower than this.
// Results: w and x are rounded to bf16 (each within 2^-9 relative), products exact, f32 sums:
// |Y - Y_exact| <= 2^-8·Σ|w·x| + f32 rounding, inside the Q8_0/Q4_0 bound of dispatch.h (the
// activation's int8 rounding is up to amax_b/254 per element, at least 2^-8·|x|). Every output is
// the same sequence of operations whatever rows or threads share the call: independent of the
// row split. Whether a call takes this path depends on its n_tok (kBf16MinTok), as the contract
// in kernels/dispatch.h says.
#include "kernels/amx/gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#if !defined(LATTE_AMX_EMULATE)
#include <immintrin.h>

#include "kernels/avx512/common.h"
#include "kernels/avx512/gemm.h"
#endif
#include "kernels/amx/tile.h"
#include "kernels/scratch.h"

namespace latte::kernels::LATTE_AMX_NS {
namespace {

// When a call takes the bf16 tiles (measured on the 16-core Xeon, 2026-12-03, docs/PERFORMANCE.md
// "AMX weight matmuls"): below 64 tokens unpacking the weights to bf16 costs more than the VNNI dots
// it replaces. Any n_in: rows longer than 4096 are summed in k-blocks (run_bf16). LATTE_AMX_GEMM=0
// turns the path off (=1 on).
constexpr int64_t kBf16MinTok = 64;
constexpr bool kBf16Default = true;

bool bf16_enabled() {
    static const bool on = [] {
        const char* e = std::getenv("LATTE_AMX_GEMM");
        return e && *e ? *e != '0' : kBf16Default;
    }();
    return on;
}

inline size_t pad64(size_t n) { return (n + 63) & ~size_t{63}; }

bool bf16_type(GGMLType t) {
    return t == GGMLType::Q8_0_R16 || t == GGMLType::Q4_0_R16 || t == GGMLType::Q4_K_R || t == GGMLType::Q5_K_R;
}
constexpr bool tile_kr(GGMLType t) { return t == GGMLType::Q4_K_R || t == GGMLType::Q5_K_R; }

struct Scratch {
    Buf panel, ablk, cb, cacc;
};
Scratch& scratch() {
    static thread_local Scratch s;
    return s;
}

// Group block `blk` (16 rows × 32 values of wt's r16 layout) to one bf16 B tile (16 × 64 bytes).
#if defined(LATTE_AMX_EMULATE)
inline float h2f(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return fp16_to_fp32(h);
}
template <GGMLType WT>
void pack_block(const uint8_t* blk, uint16_t* bt) {
    for (int r = 0; r < 16; ++r) {
        const float d = h2f(blk + 2 * r);
        for (int e = 0; e < 32; ++e) {
            int q;
            if constexpr (WT == GGMLType::Q8_0_R16) {
                q = static_cast<int>(blk[32 + 64 * (e / 4) + 4 * r + e % 4]) - 128;
            } else {
                const int c = e % 16;  // quant byte c of the row: low nibble e < 16, high e >= 16
                const uint8_t b = blk[32 + 64 * (c / 4) + 4 * r + c % 4];
                q = (e < 16 ? (b & 15) : (b >> 4)) - 8;
            }
            bt[(e / 2) * 32 + 2 * r + e % 2] = fp32_to_bf16(static_cast<float>(q) * d);
        }
    }
}
#else
// lane r of the result = bf16(lo[r]) | bf16(hi[r]) << 16 (one B row).
inline __m512i pair_bf16(__m512 lo, __m512 hi) {
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                         21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return _mm512_permutexvar_epi16(idx, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
}
// Byte i (0..3) of every 32-bit lane, sign-extended, to f32.
template <int I>
inline __m512 byte_ps(__m512i v) {
    if constexpr (I == 3) return _mm512_cvtepi32_ps(_mm512_srai_epi32(v, 24));
    else return _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * I), 24));
}
template <GGMLType WT>
void pack_block(const uint8_t* blk, uint16_t* bt) {
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    __m512i* out = reinterpret_cast<__m512i*>(bt);
    if constexpr (WT == GGMLType::Q8_0_R16) {
        const __m512i flip = _mm512_set1_epi32(static_cast<int>(0x80808080u));
        for (int k = 0; k < 8; ++k) {
            const __m512i v = _mm512_xor_si512(_mm512_loadu_si512(blk + 32 + 64 * k), flip);  // int8 q
            _mm512_store_si512(out + 2 * k,
                               pair_bf16(_mm512_mul_ps(byte_ps<0>(v), d), _mm512_mul_ps(byte_ps<1>(v), d)));
            _mm512_store_si512(out + 2 * k + 1,
                               pair_bf16(_mm512_mul_ps(byte_ps<2>(v), d), _mm512_mul_ps(byte_ps<3>(v), d)));
        }
    } else {
        const __m512i m4 = _mm512_set1_epi8(15), e8 = _mm512_set1_epi8(8);
        for (int k = 0; k < 4; ++k) {
            const __m512i v = _mm512_loadu_si512(blk + 32 + 64 * k);
            const __m512i lo = _mm512_sub_epi8(_mm512_and_si512(v, m4), e8);  // elements 4k..4k+3, int8
            const __m512i hi = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), e8);  // 16+4k..
            _mm512_store_si512(out + 2 * k,
                               pair_bf16(_mm512_mul_ps(byte_ps<0>(lo), d), _mm512_mul_ps(byte_ps<1>(lo), d)));
            _mm512_store_si512(out + 2 * k + 1,
                               pair_bf16(_mm512_mul_ps(byte_ps<2>(lo), d), _mm512_mul_ps(byte_ps<3>(lo), d)));
            _mm512_store_si512(out + 8 + 2 * k,
                               pair_bf16(_mm512_mul_ps(byte_ps<0>(hi), d), _mm512_mul_ps(byte_ps<1>(hi), d)));
            _mm512_store_si512(out + 8 + 2 * k + 1,
                               pair_bf16(_mm512_mul_ps(byte_ps<2>(hi), d), _mm512_mul_ps(byte_ps<3>(hi), d)));
        }
    }
}
#endif

// q4_K_r / q5_K_r (latte/types.h): 16 rows × nblk 256-blocks from block blk0 on (rows ldw bytes
// apart) to B tiles: tile (b·8 + s) of the group holds, in B row p, lane r, the bf16 pair
// (w[r][256b + 32s + 2p], w[r][256b + 32s + 2p + 1]). w = d·sc_l·q - dmin·m_l, in f32 as
// latte::dequantize_row computes it (product, product, difference), then rounded to bf16.
#if defined(LATTE_AMX_EMULATE)
template <GGMLType WT>
void pack_rows_kr(const uint8_t* w0, size_t ldw, int64_t blk0, int64_t nblk, int g, int ng, uint8_t* panel) {
    const size_t bb = type_info(WT).type_size;
    float v[256];
    for (int r = 0; r < 16; ++r)
        for (int64_t b = 0; b < nblk; ++b) {
            dequantize_row(WT, w0 + static_cast<size_t>(r) * ldw + static_cast<size_t>(blk0 + b) * bb, v, 256);
            for (int s = 0; s < 8; ++s) {
                auto* bt = reinterpret_cast<uint16_t*>(panel + (static_cast<size_t>(b * 8 + s) * ng + g) * 1024);
                for (int e = 0; e < 32; ++e) bt[(e / 2) * 32 + 2 * r + e % 2] = fp32_to_bf16(v[32 * s + e]);
            }
        }
}
#else
template <GGMLType WT>
void pack_rows_kr(const uint8_t* w0, size_t ldw, int64_t blk0, int64_t nblk, int g, int ng, uint8_t* panel) {
    // dwords l, 8+l, 16+l, 24+l of the 128 nibble bytes (vectors 0-3, byte 4l..4l+3): sub-block l's
    // 16 bytes in element order (low nibbles: elements 0-15, high: 16-31)
    const __m512i idx_lo = _mm512_set_epi32(27, 19, 11, 3, 26, 18, 10, 2, 25, 17, 9, 1, 24, 16, 8, 0);
    const __m512i idx_hi = _mm512_add_epi32(idx_lo, _mm512_set1_epi32(4));
    const __m128i m4 = _mm_set1_epi8(15), b4 = _mm_set1_epi8(16);
    const __m128i bit_lo = _mm_set_epi8(8, 8, 8, 8, 4, 4, 4, 4, 2, 2, 2, 2, 1, 1, 1, 1);
    const __m128i bit_hi = _mm_set_epi8(-128, -128, -128, -128, 64, 64, 64, 64, 32, 32, 32, 32, 16, 16, 16, 16);
    const size_t bb = type_info(WT).type_size;
    alignas(64) __m512i rows[16][8];  // [row][sub-block]: 32 bf16 in element order
    for (int64_t b = 0; b < nblk; ++b) {
        for (int r = 0; r < 16; ++r) {
            const uint8_t* blk = w0 + static_cast<size_t>(r) * ldw + static_cast<size_t>(blk0 + b) * bb;
            const float d = fp16_to_fp32(static_cast<uint16_t>(blk[0] | blk[1] << 8));
            const float dmin = fp16_to_fp32(static_cast<uint16_t>(blk[2] | blk[3] << 8));
            const uint8_t* qs = blk + (WT == GGMLType::Q5_K_R ? 48 : 16);
            const __m512i z0 = _mm512_loadu_si512(qs), z1 = _mm512_loadu_si512(qs + 64);
            const __m512i sub[2] = {_mm512_permutex2var_epi32(z0, idx_lo, z1), _mm512_permutex2var_epi32(z0, idx_hi, z1)};
            for (int l = 0; l < 8; ++l) {
                int sc, mn;
                kr_scale_min(blk + 4, l, sc, mn);
                const __m512 d1 = _mm512_set1_ps(d * static_cast<float>(sc)), m1 = _mm512_set1_ps(dmin * static_cast<float>(mn));
                __m128i q = l < 4 ? _mm512_castsi512_si128(sub[0]) : _mm512_castsi512_si128(sub[1]);
                switch (l & 3) {  // the lane holding sub-block l (extract needs an immediate)
                    case 1: q = _mm512_extracti32x4_epi32(sub[l >> 2], 1); break;
                    case 2: q = _mm512_extracti32x4_epi32(sub[l >> 2], 2); break;
                    case 3: q = _mm512_extracti32x4_epi32(sub[l >> 2], 3); break;
                    default: break;
                }
                __m128i lo = _mm_and_si128(q, m4), hi = _mm_and_si128(_mm_srli_epi16(q, 4), m4);
                if constexpr (WT == GGMLType::Q5_K_R) {  // bit 4 of element 4e+i: bit e of qh byte 4l+i
                    int32_t h;
                    std::memcpy(&h, blk + 16 + 4 * l, 4);
                    const __m128i hb = _mm_set1_epi32(h);
                    lo = _mm_or_si128(lo, _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(hb, bit_lo), bit_lo), b4));
                    hi = _mm_or_si128(hi, _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(hb, bit_hi), bit_hi), b4));
                }
                // as dequantize_row: (d·sc)·q - dmin·m, product then difference. The _round_ forms are
                // builtins GCC does not contract into a fused multiply-add (_mm512_mul_ps is a plain
                // vector product it may fuse with the difference, rounding once instead of twice).
                constexpr int kRn = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
                const __m512 qlo = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(lo)), qhi = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(hi));
                const __m512 flo = _mm512_sub_round_ps(_mm512_mul_round_ps(d1, qlo, kRn), m1, kRn);
                const __m512 fhi = _mm512_sub_round_ps(_mm512_mul_round_ps(d1, qhi, kRn), m1, kRn);
                rows[r][l] = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(fhi, flo));
            }
        }
        for (int s = 0; s < 8; ++s) {
            __m512 t[16];
            for (int r = 0; r < 16; ++r) t[r] = _mm512_castsi512_ps(rows[r][s]);
            simd512::transpose16(t);  // t[p] lane r = row r's pair p
            uint8_t* bt = panel + (static_cast<size_t>(b * 8 + s) * ng + g) * 1024;
            for (int p = 0; p < 16; ++p) _mm512_store_ps(reinterpret_cast<float*>(bt + 64 * p), t[p]);
        }
    }
}
#endif

// bytes of one 32-block of a 16-row group (16 of the type's 32-element blocks)
size_t group_block_bytes(GGMLType t) { return 16 * type_info(t).type_size; }

// Group g of ng (1 or 2) of a row chunk: its nb blocks to panel[kb][g] (stride ng KiB per kb).
template <GGMLType WT>
void pack_group(const uint8_t* grp, int64_t nb, int g, int ng, uint8_t* panel) {
    const size_t gb = group_block_bytes(WT);
    for (int64_t kb = 0; kb < nb; ++kb)
        pack_block<WT>(grp + static_cast<size_t>(kb) * gb,
                       reinterpret_cast<uint16_t*>(panel + (static_cast<size_t>(kb) * ng + g) * 1024));
}

// C (NA × NB tiles of 16 × 16 f32) += A (NA token tiles, rows lda[i] bytes apart) · B (NB row
// groups) over nb k-steps. C starts at zero (cin null) or from the 4 contiguous tiles at cin (tile
// (i, j) at cin + 256·(2i + j) floats); it ends at c[2i + j] with row stride ldc[i] bytes.
template <int NA, int NB>
void tiles(const uint8_t* a0, const uint8_t* a1, const size_t* lda, const uint8_t* bp, int64_t nb, const float* cin,
           float* const* c, const size_t* ldc) {
    if (cin) {
        LATTE_TILE_LOAD(0, cin, 64);
        if constexpr (NB == 2) LATTE_TILE_LOAD(1, cin + 256, 64);
        if constexpr (NA == 2) LATTE_TILE_LOAD(2, cin + 512, 64);
        if constexpr (NA == 2 && NB == 2) LATTE_TILE_LOAD(3, cin + 768, 64);
    } else {
        LATTE_TILE_ZERO(0);
        if constexpr (NB == 2) LATTE_TILE_ZERO(1);
        if constexpr (NA == 2) LATTE_TILE_ZERO(2);
        if constexpr (NA == 2 && NB == 2) LATTE_TILE_ZERO(3);
    }
    for (int64_t kb = 0; kb < nb; ++kb) {
        const uint8_t* b = bp + static_cast<size_t>(kb) * NB * 1024;
        LATTE_TILE_LOAD(6, b, 64);
        LATTE_TILE_LOAD(4, a0 + 64 * kb, lda[0]);
        LATTE_TDPBF16PS(0, 4, 6);
        if constexpr (NB == 2) {
            LATTE_TILE_LOAD(7, b + 1024, 64);
            LATTE_TDPBF16PS(1, 4, 7);
        }
        if constexpr (NA == 2) {
            LATTE_TILE_LOAD(5, a1 + 64 * kb, lda[1]);
            LATTE_TDPBF16PS(2, 5, 6);
            if constexpr (NB == 2) LATTE_TDPBF16PS(3, 5, 7);
        }
    }
    LATTE_TILE_STORE(0, c[0], ldc[0]);
    if constexpr (NB == 2) LATTE_TILE_STORE(1, c[1], ldc[0]);
    if constexpr (NA == 2) LATTE_TILE_STORE(2, c[2], ldc[1]);
    if constexpr (NA == 2 && NB == 2) LATTE_TILE_STORE(3, c[3], ldc[1]);
}

// k in blocks of up to kKSteps steps of 32 values (4096 inputs: every DeepSeek-V2-Lite matrix in
// one block); rows in chunks whose unpacked panels of one k-block take at most kPanelBytes (128
// rows of a 4096-input block, 256 of a 2048-input one). A longer row (V2's 5120 and V3's 7168
// inputs, the 10944-input dense down projection, V3's 16384-input attn_output) is summed block
// by block through a contiguous C scratch (4 KiB per token pair and panel: loading C from Y
// instead, whose row stride is a multiple of 4 KiB, put a tile's 16 rows in one L1 set), so the
// token rows a chunk streams and the panel stay bounded whatever n_in is.
constexpr int64_t kKSteps = 128;
constexpr size_t kPanelBytes = size_t{1} << 20;

// Where the C tiles of token tiles (t, t + 16) × row groups (j, j + 16) go: Y in place (row stride
// ldy floats), cbuf for the tail tile, or the C scratch between k-blocks.
struct Dest {
    float* c[4];
    size_t ldc[2];
};

template <GGMLType WT>
void run_bf16(const uint8_t* W, size_t ldw, int64_t n_in, int64_t n_out, const uint8_t* xb, size_t lda,
              int64_t n_tok, float* Y, int64_t ldy) {
    const int64_t nb = n_in / 32, kbl = std::min(nb, kKSteps);  // k-steps in all, per k-block
    const int64_t n_kblk = (nb + kbl - 1) / kbl;
    const size_t pair_b16 = static_cast<size_t>(kbl) * 2048;  // one 32-row panel of one k-block
    const int64_t chunk_rows = std::max<int64_t>(32, static_cast<int64_t>(kPanelBytes / pair_b16) * 32);
    const int64_t chunk_cap = std::min(chunk_rows, (n_out + 31) / 32 * 32);
    Scratch& sc = scratch();
    uint8_t* panels = sc.panel.get<uint8_t>(static_cast<size_t>(chunk_cap / 32) * pair_b16);
    const int64_t full = n_tok / 16 * 16, tail = n_tok - full;
    const int64_t n_pairs = (n_tok + 31) / 32;
    // The tail token tile (tokens past the last multiple of 16) is copied to 16 zero-padded rows: a
    // tile load in place would read past the activation.
    const size_t row_b16 = static_cast<size_t>(n_in) * 2;
    uint8_t* atail = nullptr;
    if (tail > 0) {
        atail = sc.ablk.get<uint8_t>(16 * row_b16);
        for (int64_t r = 0; r < 16; ++r)
            if (r < tail) std::memcpy(atail + r * row_b16, xb + static_cast<size_t>(full + r) * lda, row_b16);
            else std::memset(atail + r * row_b16, 0, row_b16);
    }
    float* cbuf = sc.cb.get<float>(2 * 256);  // the tail tile's two C tiles
    float* cacc = n_kblk > 1 ? sc.cacc.get<float>(static_cast<size_t>(n_pairs) * (chunk_cap / 32) * 1024) : nullptr;
    const size_t ldy_b = static_cast<size_t>(ldy) * sizeof(float);

    amx_tile_begin();
    for (int64_t r0 = 0; r0 < n_out; r0 += chunk_rows) {
        const int64_t r1 = std::min(n_out, r0 + chunk_rows);
        for (int64_t kc = 0; kc < n_kblk; ++kc) {
            const int64_t k0 = kc * kbl, nk = std::min(kbl, nb - k0);
            const bool first = kc == 0, last = kc == n_kblk - 1;
            // panel p holds rows r0 + 32p .. + 32 (2 groups; the last may hold 1), k-steps [k0, k0 + nk)
            for (int64_t j = r0; j < r1; j += 32) {
                const int ng = r1 - j >= 32 ? 2 : 1;
                uint8_t* panel = panels + static_cast<size_t>((j - r0) / 32) * pair_b16;
                for (int g = 0; g < ng; ++g) {
                    const uint8_t* w = W + static_cast<size_t>(j + 16 * g) * ldw;  // its 16 rows (r16: a group)
                    if constexpr (tile_kr(WT)) pack_rows_kr<WT>(w, ldw, k0 / 8, nk / 8, g, ng, panel);
                    else pack_group<WT>(w + static_cast<size_t>(k0) * group_block_bytes(WT), nk, g, ng, panel);
                }
            }
            // Token pairs outer, panels inner: the pair's A rows (≤ 256 KiB per k-block) are read
            // from the activation once and stay in L2 while every panel of the chunk passes under them.
            for (int64_t t = 0; t < n_tok; t += 32) {
                const int na = t + 16 < n_tok ? 2 : 1;
                const uint8_t* a[2];
                size_t ld[2];
                for (int k = 0; k < 2; ++k) {
                    const bool is_tail = t + 16 * k >= full;
                    a[k] = (is_tail ? atail : xb + static_cast<size_t>(t + 16 * k) * lda) + 64 * k0;
                    ld[k] = is_tail ? row_b16 : lda;
                }
                for (int64_t j = r0; j < r1; j += 32) {
                    const int ng = r1 - j >= 32 ? 2 : 1;
                    const uint8_t* panel = panels + static_cast<size_t>((j - r0) / 32) * pair_b16;
                    float* cs = cacc ? cacc + (static_cast<size_t>(t / 32) * (chunk_cap / 32) + (j - r0) / 32) * 1024 : nullptr;
                    Dest d;
                    for (int k = 0; k < 2; ++k) {
                        const bool is_tail = t + 16 * k >= full;
                        d.ldc[k] = last ? (is_tail ? 64 : ldy_b) : 64;
                        for (int g = 0; g < 2; ++g)
                            d.c[2 * k + g] = !last    ? cs + 256 * (2 * k + g)
                                             : is_tail ? cbuf + 256 * g
                                                       : Y + (t + 16 * k) * ldy + j + 16 * g;
                    }
                    const float* cin = first ? nullptr : cs;
                    if (na == 2 && ng == 2) tiles<2, 2>(a[0], a[1], ld, panel, nk, cin, d.c, d.ldc);
                    else if (na == 2) tiles<2, 1>(a[0], a[1], ld, panel, nk, cin, d.c, d.ldc);
                    else if (ng == 2) tiles<1, 2>(a[0], a[1], ld, panel, nk, cin, d.c, d.ldc);
                    else tiles<1, 1>(a[0], a[1], ld, panel, nk, cin, d.c, d.ldc);
                    if (last && tail > 0 && t + 16 * na > full)  // the pair held the tail tile: copy its rows out
                        for (int64_t r = 0; r < tail; ++r)
                            for (int g = 0; g < ng; ++g)
                                std::memcpy(Y + (full + r) * ldy + j + 16 * g, cbuf + 256 * g + 16 * r,
                                            16 * sizeof(float));
                }
            }
        }
    }
    amx_tile_end();
}

}  // namespace

bool gemm_uses_bf16(GGMLType wt, int64_t n_in, int64_t n_tok) {
    return bf16_enabled() && bf16_type(wt) && n_tok >= kBf16MinTok;
}

void to_bf16(const float* x, int64_t n, uint16_t* y) {
    int64_t i = 0;
#if !defined(LATTE_AMX_EMULATE)
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                            reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_loadu_ps(x + i))));
#endif
    for (; i < n; ++i) y[i] = fp32_to_bf16(x[i]);
}

void gemm_bf16(GGMLType wt, const void* W, size_t ldw, int64_t n_in, int64_t n_out, const void* xb, size_t lda,
               int64_t n_tok, float* Y, int64_t ldy) {
    const auto* w = static_cast<const uint8_t*>(W);
    const auto* x = static_cast<const uint8_t*>(xb);
    switch (wt) {
        case GGMLType::Q8_0_R16: return run_bf16<GGMLType::Q8_0_R16>(w, ldw, n_in, n_out, x, lda, n_tok, Y, ldy);
        case GGMLType::Q4_0_R16: return run_bf16<GGMLType::Q4_0_R16>(w, ldw, n_in, n_out, x, lda, n_tok, Y, ldy);
        case GGMLType::Q4_K_R: return run_bf16<GGMLType::Q4_K_R>(w, ldw, n_in, n_out, x, lda, n_tok, Y, ldy);
        default: return run_bf16<GGMLType::Q5_K_R>(w, ldw, n_in, n_out, x, lda, n_tok, Y, ldy);
    }
}

#if !defined(LATTE_AMX_EMULATE)
namespace {
// Per token: avx512's activation (padded to 64 bytes), then the bf16 row (padded to 64 bytes).
size_t a5_bytes(GGMLType wt, int64_t n_in) { return pad64(avx512::gemm_act_size(wt, n_in)); }

// Whether calls of this (type, n_in) may take the tiles: their activation then carries the bf16 rows.
bool bf16_layout(GGMLType wt, int64_t n_in) { return gemm_uses_bf16(wt, n_in, kBf16MinTok); }
}  // namespace

size_t gemm_act_size(GGMLType wt, int64_t n_in) {
    if (!bf16_layout(wt, n_in)) return avx512::gemm_act_size(wt, n_in);
    return a5_bytes(wt, n_in) + pad64(2 * static_cast<size_t>(n_in));
}

void gemm_act_prep(GGMLType wt, const float* X, int64_t ldx, int64_t n_in, int64_t n_tok, void* act) {
    if (!bf16_layout(wt, n_in)) return avx512::gemm_act_prep(wt, X, ldx, n_in, n_tok, act);
    const size_t a5 = a5_bytes(wt, n_in), lda = gemm_act_size(wt, n_in);
    for (int64_t t = 0; t < n_tok; ++t) {
        uint8_t* a = static_cast<uint8_t*>(act) + static_cast<size_t>(t) * lda;
        avx512::gemm_act_prep(wt, X + t * ldx, ldx, n_in, 1, a);
        to_bf16(X + t * ldx, n_in, reinterpret_cast<uint16_t*>(a + a5));
    }
}

void gemm(GGMLType wt, const void* W, size_t ldw, int64_t n_in, int64_t n_out, const float* X, int64_t ldx,
          const void* act, int64_t n_tok, float* Y, int64_t ldy) {
    if (!bf16_layout(wt, n_in)) return avx512::gemm(wt, W, ldw, n_in, n_out, X, ldx, act, n_tok, Y, ldy);
    const size_t lda = gemm_act_size(wt, n_in);
    const auto* a = static_cast<const uint8_t*>(act);
    int64_t done = 0;  // rows computed on the tiles
    if (gemm_uses_bf16(wt, n_in, n_tok)) {
        // K-quant rows come one by one: a call's last rows short of a 16-row tile group take avx512
        // below (calls start at multiples of 16 rows, so which rows those are does not depend on
        // the split). r16 calls are whole groups by contract.
        done = n_out / 16 * 16;
        if (done > 0) gemm_bf16(wt, W, ldw, n_in, done, a + a5_bytes(wt, n_in), lda, n_tok, Y, ldy);
        if (done == n_out) return;
    }
    // avx512's activation rows, gathered to its own row stride (< 64 rows: < 200 KiB; or a K-quant
    // call's last < 16 rows)
    const size_t a5_row = avx512::gemm_act_size(wt, n_in);
    uint8_t* a5 = scratch().ablk.get<uint8_t>(a5_row * static_cast<size_t>(n_tok));
    for (int64_t t = 0; t < n_tok; ++t) std::memcpy(a5 + t * a5_row, a + static_cast<size_t>(t) * lda, a5_row);
    avx512::gemm(wt, static_cast<const uint8_t*>(W) + static_cast<size_t>(done) * ldw, ldw, n_in, n_out - done, X, ldx,
                 a5, n_tok, Y + done, ldy);
}
#endif

}  // namespace latte::kernels::LATTE_AMX_NS

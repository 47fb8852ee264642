// AMX weight matmul (issue 7, PP's weight half): Q8_0_R16 / Q4_0_R16 weights (every repacked
// DeepSeek projection and expert with up to 4096 inputs) times 64 or more activation rows (PP)
// through bf16 tiles.
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
//   - rows in chunks of up to 1 MiB of bf16 (256 rows of 2048 inputs), as panels of 32 rows (two
//     16-row groups) whose weights are unpacked to bf16 B tiles once per call: panel[kb][g] = 16
//     rows × 64 bytes, B row p = (w[r][32kb + 2p], w[r][32kb + 2p + 1]) for r = 0..15 (the
//     TDPBF16PS B layout: pairs along k per 32-bit lane, one lane per output row);
//   - tokens in pairs of 16-token tiles, loaded in place from the activation's bf16 rows (stride
//     the act row); the pair is the outer loop and the chunk's panels the inner one, so its rows
//     come from L3 once and from L2 for the other panels (the tail tile, < 16 tokens, is copied
//     to 16 zero-padded rows first);
//   - 2 × 2 register blocking: C tiles tmm0-3 (32 tokens × 32 rows, f32), A tmm4-5, B tmm6-7; each
//     k-step of 32 loads 2 A and 2 B tiles and runs 4 independent TDPBF16PS; C is stored straight
//     into Y (a row of a C tile is 16 consecutive outputs of one token).
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

#include "kernels/avx512/gemm.h"
#endif
#include "kernels/amx/tile.h"
#include "kernels/scratch.h"

#if defined(LATTE_AMX_EMULATE)
#define LATTE_AMX_NS amx_emu
#else
#define LATTE_AMX_NS amx
#endif

namespace latte::kernels::LATTE_AMX_NS {
namespace {

// When a call takes the bf16 tiles (measured on the 16-core Xeon, 2026-12-03, docs/PERFORMANCE.md
// "AMX weight matmuls"): below 64 tokens unpacking the weights to bf16 costs more than the VNNI dots
// it replaces; above 4096 inputs a row is so long that neither a 32-token block of A nor a 32-row
// panel of B stays in L2, and the per-thread A copy is repeated per panel chunk (the dense FFN's
// 10944-input down projection ran slower than VNNI). LATTE_AMX_GEMM=0 turns the path off (=1 on).
constexpr int64_t kBf16MinTok = 64, kBf16MaxIn = 4096;
constexpr bool kBf16Default = true;

bool bf16_enabled() {
    static const bool on = [] {
        const char* e = std::getenv("LATTE_AMX_GEMM");
        return e && *e ? *e != '0' : kBf16Default;
    }();
    return on;
}

inline size_t pad64(size_t n) { return (n + 63) & ~size_t{63}; }

bool bf16_type(GGMLType t) { return t == GGMLType::Q8_0_R16 || t == GGMLType::Q4_0_R16; }

inline uint16_t bf16_rne(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN stays NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

struct Scratch {
    Buf panel, ablk, cb;
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
            bt[(e / 2) * 32 + 2 * r + e % 2] = bf16_rne(static_cast<float>(q) * d);
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

// bytes of one 32-block of a 16-row group
constexpr size_t group_block_bytes(GGMLType t) { return t == GGMLType::Q8_0_R16 ? 544 : 288; }

// Group g of ng (1 or 2) of a row chunk: its nb blocks to panel[kb][g] (stride ng KiB per kb).
template <GGMLType WT>
void pack_group(const uint8_t* grp, int64_t nb, int g, int ng, uint8_t* panel) {
    for (int64_t kb = 0; kb < nb; ++kb) {
        pack_block<WT>(grp + static_cast<size_t>(kb) * group_block_bytes(WT),
                       reinterpret_cast<uint16_t*>(panel + (static_cast<size_t>(kb) * ng + g) * 1024));
    }
}

// C (NA × NB tiles of 16 × 16 f32) = A (NA token tiles, rows lda[i] bytes apart) · B (NB row
// groups) over nb k-steps; C tile (i, j) stored at c[2i + j] with row stride ldc[i] bytes.
template <int NA, int NB>
void tiles(const uint8_t* a0, const uint8_t* a1, const size_t* lda, const uint8_t* bp, int64_t nb, float* const* c,
           const size_t* ldc) {
    LATTE_TILE_ZERO(0);
    if constexpr (NB == 2) LATTE_TILE_ZERO(1);
    if constexpr (NA == 2) LATTE_TILE_ZERO(2);
    if constexpr (NA == 2 && NB == 2) LATTE_TILE_ZERO(3);
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

// Rows in chunks whose unpacked panels take at most kPanelBytes (all of a thread's rows at the
// DeepSeek shapes from 8 threads up; 256 rows of 2048 inputs on one thread).
constexpr size_t kPanelBytes = size_t{1} << 20;

// Where the C tiles of token tiles (t, t + 16) × row groups (j, j + 16) go: Y in place (row stride
// ldy floats), or cbuf for the tail tile.
struct Dest {
    float* c[4];
    size_t ldc[2];
};

template <GGMLType WT>
void run_bf16(const uint8_t* W, size_t ldw, int64_t n_in, int64_t n_out, const uint8_t* xb, size_t lda,
              int64_t n_tok, float* Y, int64_t ldy) {
    const int64_t nb = n_in / 32;
    const size_t row_b16 = static_cast<size_t>(n_in) * 2;  // one row in bf16
    const int64_t chunk_rows = std::max<int64_t>(32, static_cast<int64_t>(kPanelBytes / row_b16) / 32 * 32);
    Scratch& sc = scratch();
    uint8_t* panels = sc.panel.get<uint8_t>(static_cast<size_t>(std::min(chunk_rows, (n_out + 31) / 32 * 32)) * row_b16);
    const int64_t full = n_tok / 16 * 16, tail = n_tok - full;
    // The tail token tile (tokens past the last multiple of 16) is copied to 16 zero-padded rows: a
    // tile load in place would read past the activation.
    uint8_t* atail = nullptr;
    if (tail > 0) {
        atail = sc.ablk.get<uint8_t>(16 * row_b16);
        for (int64_t r = 0; r < 16; ++r)
            if (r < tail) std::memcpy(atail + r * row_b16, xb + static_cast<size_t>(full + r) * lda, row_b16);
            else std::memset(atail + r * row_b16, 0, row_b16);
    }
    float* cbuf = sc.cb.get<float>(2 * 256);  // the tail tile's two C tiles
    const size_t ldy_b = static_cast<size_t>(ldy) * sizeof(float);

    amx_tile_begin();
    for (int64_t r0 = 0; r0 < n_out; r0 += chunk_rows) {
        const int64_t r1 = std::min(n_out, r0 + chunk_rows);
        // panel p holds rows r0 + 32p .. + 32 (2 groups; the last may hold 1): nb·2 KiB apart
        for (int64_t j = r0; j < r1; j += 32) {
            const int ng = r1 - j >= 32 ? 2 : 1;
            uint8_t* panel = panels + static_cast<size_t>(j - r0) * row_b16;
            for (int g = 0; g < ng; ++g)
                pack_group<WT>(W + static_cast<size_t>(j / 16 + g) * 16 * ldw, nb, g, ng, panel);
        }
        // Token pairs outer, panels inner: the pair's A rows (≤ 256 KiB) are read from the
        // activation once and stay in L2 while every panel of the chunk passes under them.
        for (int64_t t = 0; t < n_tok; t += 32) {
            const int na = t + 16 < n_tok ? 2 : 1;
            const uint8_t* a[2];
            size_t ld[2];
            Dest d;
            for (int k = 0; k < 2; ++k) {
                const bool is_tail = t + 16 * k >= full;
                a[k] = is_tail ? atail : xb + static_cast<size_t>(t + 16 * k) * lda;
                ld[k] = is_tail ? row_b16 : lda;
                d.ldc[k] = is_tail ? 64 : ldy_b;
            }
            for (int64_t j = r0; j < r1; j += 32) {
                const int ng = r1 - j >= 32 ? 2 : 1;
                const uint8_t* panel = panels + static_cast<size_t>(j - r0) * row_b16;
                for (int k = 0; k < 2; ++k)
                    for (int g = 0; g < 2; ++g)
                        d.c[2 * k + g] = t + 16 * k >= full ? cbuf + 256 * g : Y + (t + 16 * k) * ldy + j + 16 * g;
                if (na == 2 && ng == 2) tiles<2, 2>(a[0], a[1], ld, panel, nb, d.c, d.ldc);
                else if (na == 2) tiles<2, 1>(a[0], a[1], ld, panel, nb, d.c, d.ldc);
                else if (ng == 2) tiles<1, 2>(a[0], a[1], ld, panel, nb, d.c, d.ldc);
                else tiles<1, 1>(a[0], a[1], ld, panel, nb, d.c, d.ldc);
                if (tail > 0 && t + 16 * na > full)  // the pair held the tail tile: copy its rows out
                    for (int64_t r = 0; r < tail; ++r)
                        for (int g = 0; g < ng; ++g)
                            std::memcpy(Y + (full + r) * ldy + j + 16 * g, cbuf + 256 * g + 16 * r,
                                        16 * sizeof(float));
            }
        }
    }
    amx_tile_end();
}

}  // namespace

bool gemm_uses_bf16(GGMLType wt, int64_t n_in, int64_t n_tok) {
    return bf16_enabled() && bf16_type(wt) && n_in <= kBf16MaxIn && n_tok >= kBf16MinTok;
}

void to_bf16(const float* x, int64_t n, uint16_t* y) {
    int64_t i = 0;
#if !defined(LATTE_AMX_EMULATE)
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                            reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_loadu_ps(x + i))));
#endif
    for (; i < n; ++i) y[i] = bf16_rne(x[i]);
}

void gemm_bf16(GGMLType wt, const void* W, size_t ldw, int64_t n_in, int64_t n_out, const void* xb, size_t lda,
               int64_t n_tok, float* Y, int64_t ldy) {
    const auto* w = static_cast<const uint8_t*>(W);
    const auto* x = static_cast<const uint8_t*>(xb);
    if (wt == GGMLType::Q8_0_R16) run_bf16<GGMLType::Q8_0_R16>(w, ldw, n_in, n_out, x, lda, n_tok, Y, ldy);
    else run_bf16<GGMLType::Q4_0_R16>(w, ldw, n_in, n_out, x, lda, n_tok, Y, ldy);
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
    if (gemm_uses_bf16(wt, n_in, n_tok)) return gemm_bf16(wt, W, ldw, n_in, n_out, a + a5_bytes(wt, n_in), lda, n_tok, Y, ldy);
    // avx512's activation rows, gathered to its own row stride (fewer than 64 rows: < 200 KiB)
    const size_t a5_row = avx512::gemm_act_size(wt, n_in);
    uint8_t* a5 = scratch().ablk.get<uint8_t>(a5_row * static_cast<size_t>(n_tok));
    for (int64_t t = 0; t < n_tok; ++t) std::memcpy(a5 + t * a5_row, a + static_cast<size_t>(t) * lda, a5_row);
    avx512::gemm(wt, W, ldw, n_in, n_out, X, ldx, a5, n_tok, Y, ldy);
}
#endif

}  // namespace latte::kernels::LATTE_AMX_NS

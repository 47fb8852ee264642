// AVX-512 weight matmul (F/BW/VL/VNNI; compiled with only the avx512 flags). Contract: GemmFn in
// kernels/dispatch.h.
//
// - F32/F16/BF16 weights: f32 FMA on f32 activations; F16 rows converted with vcvtph2ps, BF16 by a
//   16-bit shift (both exact). Differs from scalar only by the summation order.
// - Q8_0/Q4_0 weights: the activation rows are quantised once per call (gemm_act_prep) to int8 per
//   32-block (d = amax/127, round to nearest) and each block pair is one vpdpbusd: Q8_0 bytes are
//   flipped to u8 (w+128) and Q4_0 nibbles are already u8 (q in 0..15), so the dot needs the
//   correction -128·Σx (Q8_0) or -8·Σx (Q4_0) per block, which gemm_act_prep stores as the
//   accumulator's start value (lane 0 of each block's 8 lanes). The int32 block dot is exact; it is
//   scaled by d_w·d_x in f32 and summed in 16 f32 lanes.
// - Work: rows in groups of ~256 KiB of weights (L2), tokens in chunks of 64; inside, for each
//   tile of 4 tokens (its activations in L1) the group's rows pass 4 at a time: a 4×4 register
//   tile (16 zmm accumulators) reuses each loaded weight vector for 4 tokens and each activation
//   vector for 4 rows. TG is the 4×1 tile.
// - Q8_0_R16 (Q8_0 repacked at load in 16-row groups, latte/types.h): a zmm's 16 int32 lanes are
//   16 rows, so per group × 32-block × token: 8 vpdpbusd (each a weight vector and 4 activation
//   bytes broadcast) from the start value -128·Σq, one cvt, one mul (16 row scales × d_x), one fma;
//   no shuffles, no horizontal sums. 3 groups × 4 tokens per register tile (PP), 2 × n_tok (TG).
//   Q4_0_R16 the same with 4 vectors of nibbles per block (and / shift+and: 2 vpdpbusd each, -8·Σq).
// - Q4_K/Q5_K/Q6_K: activations quantised once to int8 per 256-block with per-16 sums; per sub-block
//   maddubs(q u8, x s8) then vpdpwssd with its int16 scale, int32 over the 256-block; see kk.
// - Q4_K_R/Q5_K_R/Q6_K_R (K-quant blocks rearranged at load, latte/types.h): the activation in the
//   weights' element-vector order; vpdpbusd + one vpmulld by the scales (q4/q5) or maddubs +
//   vpdpwssd with one scale vector (q6) per block; see kkr.
// - Every output element is computed by the same sequence of operations whatever tile it falls in
//   (own accumulator, same k order, same final reduction), so results do not depend on how the
//   caller splits rows among threads.
#include "kernels/avx512/gemm.h"

// GCC 12's _mm512_reduce_add_ps uses _mm256_undefined_*: -Wuninitialized inside its header, not ours.
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/gemm_tiles.h"
#include "kernels/kquant_act.h"
#include "kernels/scalar/gemm.h"

namespace latte::kernels::avx512 {
namespace {

inline float h2f(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

bool is_q(GGMLType t) { return t == GGMLType::Q8_0 || t == GGMLType::Q4_0; }

// ---- quantised weights ------------------------------------------------------------------------

template <GGMLType WT>
constexpr size_t kBlockBytes = WT == GGMLType::Q8_0 ? 34 : 18;

// Two consecutive weight blocks (b at p, b+1 at p + block bytes) as 64 u8.
template <GGMLType WT>
inline __m512i load_w2(const uint8_t* p) {
    if constexpr (WT == GGMLType::Q8_0) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
        const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 36));
        return _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1), _mm512_set1_epi8(char(0x80)));
    } else {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 20));
        const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);
        const __m256i m = _mm256_set1_epi8(0x0F);
        const __m256i lo = _mm256_and_si256(v, m), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
        const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);  // b0lo b1lo b0hi b1hi
        return _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));                 // b0lo b0hi b1lo b1hi
    }
}
// One block in the low 32 bytes, zero above.
template <GGMLType WT>
inline __m512i load_w1(const uint8_t* p) {
    if constexpr (WT == GGMLType::Q8_0) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
        return _mm512_zextsi256_si512(_mm256_xor_si256(a, _mm256_set1_epi8(char(0x80))));
    } else {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2));
        const __m128i m = _mm_set1_epi8(0x0F);
        const __m128i lo = _mm_and_si128(a, m), hi = _mm_and_si128(_mm_srli_epi16(a, 4), m);
        return _mm512_zextsi256_si512(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
    }
}

// Quantised activation of one token (gemm_act_prep), n_in = 32·nb values:
//   [0, n_in)            int8 q
//   [n_in, n_in+32nb)    f32 d_x, each block's scale repeated 8 times (one per dpbusd lane)
//   [n_in+32nb, 3 n_in)  int32 correction, per block 8 lanes: {-K·Σq, 0, ..., 0} (K = 128 or 8)
size_t q_act_bytes(int64_t n_in) { return (static_cast<size_t>(3 * n_in) + 63) & ~size_t{63}; }

// The two blocks' fp16 scales (at bytes 0 and bs of p) as [d0 ×8, d1 ×8]. Two 16-bit loads: a
// 64-byte load here read up to 28 bytes past the last q4_0 row (ASan; a fault at the end of a
// mapped file).
template <GGMLType WT>
inline __m512 scales2(const uint8_t* p) {
    uint16_t d0, d1;
    std::memcpy(&d0, p, 2);
    std::memcpy(&d1, p + kBlockBytes<WT>, 2);
    const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(static_cast<short>(d0))),
                                              _mm_set1_epi16(static_cast<short>(d1)), 1);
    return _mm512_cvtph_ps(h);
}

template <GGMLType WT, int R, int T>
void kq(const uint8_t* w, size_t ldw, int64_t n_in, const uint8_t* act, size_t lda, float* Y, int64_t ldy) {
    constexpr size_t bs = kBlockBytes<WT>;
    const int64_t nb = n_in / 32;
    __m512 acc[R][T];
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
    const size_t off_d = static_cast<size_t>(n_in), off_c = static_cast<size_t>(n_in + 32 * nb);
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        __m512i wv[R];
        __m512 dw[R];
        for (int r = 0; r < R; ++r) {
            const uint8_t* p = w + r * ldw + b * bs;
            wv[r] = load_w2<WT>(p);
            dw[r] = scales2<WT>(p);
        }
        for (int t = 0; t < T; ++t) {
            const uint8_t* a = act + t * lda;
            const __m512i x = _mm512_loadu_si512(a + b * 32);
            const __m512 dx = _mm512_loadu_ps(a + off_d + b * 32);
            const __m512i c = _mm512_loadu_si512(a + off_c + b * 32);
            for (int r = 0; r < R; ++r) {
                const __m512i i = _mm512_dpbusd_epi32(c, wv[r], x);
                acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), _mm512_mul_ps(dw[r], dx), acc[r][t]);
            }
        }
    }
    if (b < nb) {
        __m512i wv[R];
        __m512 dw[R];
        for (int r = 0; r < R; ++r) {
            const uint8_t* p = w + r * ldw + b * bs;
            wv[r] = load_w1<WT>(p);
            dw[r] = _mm512_zextps256_ps512(_mm256_set1_ps(h2f(p)));
        }
        for (int t = 0; t < T; ++t) {
            const uint8_t* a = act + t * lda;
            const __m512i x = _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + b * 32)));
            const __m512 dx = _mm512_zextps256_ps512(_mm256_loadu_ps(reinterpret_cast<const float*>(a + off_d + b * 32)));
            const __m512i c = _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + off_c + b * 32)));
            for (int r = 0; r < R; ++r) {
                const __m512i i = _mm512_dpbusd_epi32(c, wv[r], x);
                acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), _mm512_mul_ps(dw[r], dx), acc[r][t]);
            }
        }
    }
    for (int t = 0; t < T; ++t)
        for (int r = 0; r < R; ++r) Y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
}

// ---- Q8_0_R16: 16-row groups (latte/types.h) ----------------------------------------------------
// Each zmm lane is one row: per 32-block and token, 8 vpdpbusd (weights u8 = q+128, the token's 4
// int8 broadcast), started from the token's correction -128·Σq; then one cvt, the 16 scales times
// d_x (mul) and one fma into the row's f32 sum. No horizontal reduction: a lane's result depends
// only on its row, the token and the block order, whatever tile it falls in.
//
// Activation of one token for Q8_0_R16, n_in = 32·nb: [0, n_in) int8 q; then f32 d_x[nb]; then
// int32 -128·Σq [nb].
size_t r16_act_bytes(int64_t n_in) { return (static_cast<size_t>(n_in + 8 * (n_in / 32)) + 63) & ~size_t{63}; }

// Q4_0_R16: 4 vectors per block of raw Q4_0 bytes; the low nibbles (u8 0..15) of vector k are
// elements 4k..4k+3 of each row, the high ones 16+4k..16+4k+3: 2 vpdpbusd per vector (and, shift)
// from the start value -8·Σq.
// TG (one token): the R group streams read kR16Prefetch bytes ahead in software. A 16-row group of
// a 2048-wide matrix is 18 KiB (q4_0_r16) or 34 KiB (q8_0_r16), 2 of them at a time: each crosses
// several 4 KiB pages, where the hardware prefetchers stop. Zen 5, 2 threads, the 2048 -> 102400
// head, 3 alternated runs (2026-12-05), GB/s: q4_0_r16 27.6 / 30.6 / 38.0 without, 36.5 / 47.1 /
// 39.2 with 2048 (1024: 34.0 / 41.1 / 40.3; 4096: 39.0 / 43.7 / 39.7); q8_0_r16 32.6 / 41.0 / 43.3
// -> 35.9 / 49.1 / 41.8. Then 8 alternated runs: q4_0_r16 median 26.8 -> 38.3 GB/s (paired ratio
// 1.41), q8_0_r16 38.4 -> 40.7 (paired 0.96: even). (avx2's kr16, one group at a time, got slower
// with the same prefetch: q4_0_r16 paired 0.87; not taken.)
constexpr size_t kR16Prefetch = 2048;

template <GGMLType WT, int R, int T>
void kr16(const uint8_t* w, size_t gs, int64_t nb, const uint8_t* act, size_t lda, float* Y, int64_t ldy) {
    constexpr size_t gbs = WT == GGMLType::Q8_0_R16 ? 544 : 288;  // a group's block
    const size_t n_in = static_cast<size_t>(nb) * 32;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 acc[R][T];
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* wb = w + static_cast<size_t>(b) * gbs;
        if constexpr (T == 1)  // TG: each group's stream kR16Prefetch bytes ahead (see there)
            for (int r = 0; r < R; ++r)
                for (size_t k = 0; k < gbs; k += 64)
                    _mm_prefetch(reinterpret_cast<const char*>(wb + r * gs + kR16Prefetch + k), _MM_HINT_T0);
        __m512i ai[R][T];
        for (int t = 0; t < T; ++t) {
            int32_t c;
            std::memcpy(&c, act + t * lda + n_in + 4 * nb + 4 * b, 4);
            for (int r = 0; r < R; ++r) ai[r][t] = _mm512_set1_epi32(c);
        }
        if constexpr (WT == GGMLType::Q8_0_R16) {
            for (int k = 0; k < 8; ++k) {
                __m512i wv[R];
                for (int r = 0; r < R; ++r) wv[r] = _mm512_loadu_si512(wb + r * gs + 32 + 64 * k);
                for (int t = 0; t < T; ++t) {
                    int32_t xq;
                    std::memcpy(&xq, act + t * lda + 32 * b + 4 * k, 4);
                    const __m512i x = _mm512_set1_epi32(xq);
                    for (int r = 0; r < R; ++r) ai[r][t] = _mm512_dpbusd_epi32(ai[r][t], wv[r], x);
                }
            }
        } else {
            for (int k = 0; k < 4; ++k) {
                __m512i lo[R], hi[R];
                for (int r = 0; r < R; ++r) {
                    const __m512i v = _mm512_loadu_si512(wb + r * gs + 32 + 64 * k);
                    lo[r] = _mm512_and_si512(v, m4);
                    hi[r] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                }
                for (int t = 0; t < T; ++t) {
                    int32_t xl, xh;
                    std::memcpy(&xl, act + t * lda + 32 * b + 4 * k, 4);
                    std::memcpy(&xh, act + t * lda + 32 * b + 16 + 4 * k, 4);
                    const __m512i x0 = _mm512_set1_epi32(xl), x1 = _mm512_set1_epi32(xh);
                    for (int r = 0; r < R; ++r) {
                        ai[r][t] = _mm512_dpbusd_epi32(ai[r][t], lo[r], x0);
                        ai[r][t] = _mm512_dpbusd_epi32(ai[r][t], hi[r], x1);
                    }
                }
            }
        }
        __m512 dw[R];
        for (int r = 0; r < R; ++r) dw[r] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + r * gs)));
        for (int t = 0; t < T; ++t) {
            float dx;
            std::memcpy(&dx, act + t * lda + n_in + 4 * b, 4);
            const __m512 d = _mm512_set1_ps(dx);
            for (int r = 0; r < R; ++r)
                acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai[r][t]), _mm512_mul_ps(dw[r], d), acc[r][t]);
        }
    }
    for (int t = 0; t < T; ++t)
        for (int r = 0; r < R; ++r) _mm512_storeu_ps(Y + t * ldy + 16 * r, acc[r][t]);
}

// ---- float weights ----------------------------------------------------------------------------

template <GGMLType WT>
constexpr size_t kElemBytes = WT == GGMLType::F32 ? 4 : 2;

template <GGMLType WT>
inline __m512 load_wf(const uint8_t* p) {
    if constexpr (WT == GGMLType::F32) return _mm512_loadu_ps(p);
    else if constexpr (WT == GGMLType::F16) return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    else
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
}
template <GGMLType WT>
inline __m512 load_wf_mask(const uint8_t* p, __mmask16 m) {
    if constexpr (WT == GGMLType::F32) return _mm512_maskz_loadu_ps(m, p);
    else if constexpr (WT == GGMLType::F16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
    else return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

// TG over float weights: while a tile reads its R rows, the next tile's R rows (the rows after them:
// for_each_gemm_tile's order) are prefetched at the same column, kGemmNextTilePrefetch bytes further
// on (kernels/gemm_tiles.h; the avx2 kf does the same).
// A float row is its own 4 KiB page or more (2048 f16), and the hardware prefetchers do not cross
// pages: without this every row of the head GEMV restarted its stream cold. Zen 5, 2 threads, the
// 2048 -> 102400 head, three alternated runs (2026-12-05): f16 23-25 -> 33-37 GB/s, bf16 26-28 ->
// 34-42 GB/s (q8_0_r16, whose 16-row groups are one stream, 31-46 in the same runs). (A prefetch
// ahead in each row's own stream, 512-2048 bytes, changed nothing.) A prefetch has no fault, so
// the last tile's reach past the matrix is harmless.

template <GGMLType WT, int R, int T>
void kf(const uint8_t* w, size_t ldw, int64_t n_in, const float* X, int64_t ldx, float* Y, int64_t ldy) {
    constexpr size_t es = kElemBytes<WT>;
    __m512 acc[R][T];
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= n_in; k += 16) {
        if constexpr (T == 1) {  // TG: the next tile's rows
            if (k * es % 64 == 0)
                for (int r = 0; r < R; ++r)
                    _mm_prefetch(reinterpret_cast<const char*>(w + (r + R) * ldw + k * es + kGemmNextTilePrefetch),
                                 _MM_HINT_T0);
        }
        __m512 wv[R];
        for (int r = 0; r < R; ++r) wv[r] = load_wf<WT>(w + r * ldw + k * es);
        for (int t = 0; t < T; ++t) {
            const __m512 x = _mm512_loadu_ps(X + t * ldx + k);
            for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], x, acc[r][t]);
        }
    }
    if (k < n_in) {
        const __mmask16 m = static_cast<__mmask16>((1u << (n_in - k)) - 1);
        __m512 wv[R];
        for (int r = 0; r < R; ++r) wv[r] = load_wf_mask<WT>(w + r * ldw + k * es, m);
        for (int t = 0; t < T; ++t) {
            const __m512 x = _mm512_maskz_loadu_ps(m, X + t * ldx + k);
            for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], x, acc[r][t]);
        }
    }
    for (int t = 0; t < T; ++t)
        for (int r = 0; r < R; ++r) Y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
}

// ---- drivers ----------------------------------------------------------------------------------

// Tiles of kR rows × kT tokens, driven by for_each_gemm_tile (kernels/gemm_tiles.h): a row group's
// weights (~256 KiB) stay in L2 while every 4-token tile of the chunk (in L1) passes over them 4
// rows at a time.
constexpr int kR = 4, kT = 4;

using QKern = void (*)(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, float*, int64_t);
using FKern = void (*)(const uint8_t*, size_t, int64_t, const float*, int64_t, float*, int64_t);

template <GGMLType WT, int R>
constexpr QKern qrow[kT] = {kq<WT, R, 1>, kq<WT, R, 2>, kq<WT, R, 3>, kq<WT, R, 4>};
template <GGMLType WT>
constexpr const QKern* qtab[kR] = {qrow<WT, 1>, qrow<WT, 2>, qrow<WT, 3>, qrow<WT, 4>};
template <GGMLType WT, int R>
constexpr FKern frow[kT] = {kf<WT, R, 1>, kf<WT, R, 2>, kf<WT, R, 3>, kf<WT, R, 4>};
template <GGMLType WT>
constexpr const FKern* ftab[kR] = {frow<WT, 1>, frow<WT, 2>, frow<WT, 3>, frow<WT, 4>};

template <GGMLType WT>
void gemm_q(const uint8_t* W, size_t ldw, int64_t n_in, int64_t n_out, const uint8_t* act, int64_t n_tok, float* Y,
            int64_t ldy) {
    const size_t lda = q_act_bytes(n_in);
    for_each_gemm_tile(n_out, n_tok, kR, kT, ldw, [&](int64_t r0, int R, int64_t t1, int T) {
        qtab<WT>[R - 1][T - 1](W + r0 * ldw, ldw, n_in, act + t1 * lda, lda, Y + t1 * ldy + r0, ldy);
    });
}

// Q8_0_R16 tiles: kR16 groups (16 rows each) × kT16 tokens for prompts (12 int32 + 12 f32
// accumulators, 3 weight vectors, the broadcast), kR16tg × n_tok for n_tok < 4. Measured on Zen 5
// (bench_matmul BM_gemm_PP 2048x2048, 512 tokens, 1 thread): 3×4 and 4×3 ~370 GFLOP/s, 2×4/2×6
// ~290, 1×8 ~270; TG: 2 groups ahead of 1 and 4 (GEMV 10944x2048).
constexpr int kR16 = 3, kT16 = 4, kR16tg = 2;
using R16Kern = void (*)(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, float*, int64_t);
template <GGMLType WT>
constexpr R16Kern kr16tab[4][4] = {{kr16<WT, 1, 1>, kr16<WT, 1, 2>, kr16<WT, 1, 3>, kr16<WT, 1, 4>},
                                   {kr16<WT, 2, 1>, kr16<WT, 2, 2>, kr16<WT, 2, 3>, kr16<WT, 2, 4>},
                                   {kr16<WT, 3, 1>, kr16<WT, 3, 2>, kr16<WT, 3, 3>, kr16<WT, 3, 4>},
                                   {kr16<WT, 4, 1>, kr16<WT, 4, 2>, kr16<WT, 4, 3>, kr16<WT, 4, 4>}};

template <GGMLType WT>
void gemm_r16(const uint8_t* W, size_t ldw, int64_t n_in, int64_t n_out, const uint8_t* act, int64_t n_tok, float* Y,
              int64_t ldy) {
    const int RT = n_tok < 4 ? kR16tg : kR16, TT = n_tok < 4 ? static_cast<int>(n_tok) : kT16;
    const size_t lda = r16_act_bytes(n_in), gs = 16 * ldw;
    const int64_t nb = n_in / 32;
    // the tiled "rows" are the 16-row groups
    for_each_gemm_tile(n_out / 16, n_tok, RT, TT, gs, [&](int64_t r0, int R, int64_t t1, int T) {
        kr16tab<WT>[R - 1][T - 1](W + r0 * gs, gs, nb, act + t1 * lda, lda, Y + t1 * ldy + 16 * r0, ldy);
    });
}

template <GGMLType WT>
void gemm_f(const uint8_t* W, size_t ldw, int64_t n_in, int64_t n_out, const float* X, int64_t ldx, int64_t n_tok,
            float* Y, int64_t ldy) {
    for_each_gemm_tile(n_out, n_tok, kR, kT, ldw, [&](int64_t r0, int R, int64_t t1, int T) {
        ftab<WT>[R - 1][T - 1](W + r0 * ldw, ldw, n_in, X + t1 * ldx, ldx, Y + t1 * ldy + r0, ldy);
    });
}

// ---- K-quants (Q4_K, Q5_K, Q6_K; latte/types.h) -------------------------------------------------
// Activation per token (gemm_act_prep), n_in = 256·nb: n_in int8 q, then f32 d_x[nb] (per 256-block,
// amax/127), then int16 bsum[nb][16] (the sums of the 16 q of each 16-element group, natural order).
// For Q4_K/Q5_K the q bytes of each 128 elements are stored in the order [0,32) [64,96) [32,64)
// [96,128): a 64-byte load of a block's quants gives the low nibbles of two 32-byte chunks
// (elements 0-31 and 64-95 of the 128) and its high nibbles the rest, each matched by one 64-byte
// activation load. Q6_K's are in natural order. Per row and 256-block: maddubs(q u8, x s8) (|pair|
// <= 2·63·127), then vpdpwssd with the 16-element group's scale as int16, int32 over the block;
// Q6_K's -32 is -32·Σ_16 sc·bsum (exact), Q4_K/Q5_K's mins Σ_16 m·bsum scaled by -dmin·d_x; then one
// cvt + fma by d_w·d_x per block in 16 f32 lanes.
// (k_act_bytes and is_k: kernels/kquant_act.h)

template <GGMLType WT>
constexpr size_t kKBlockBytes = WT == GGMLType::Q4_K ? 144 : WT == GGMLType::Q5_K ? 176 : 210;

inline void k4_unpack(const uint8_t* s, uint64_t& sc8, uint64_t& m8) {
    uint32_t a, b, c;
    std::memcpy(&a, s, 4);
    std::memcpy(&b, s + 4, 4);
    std::memcpy(&c, s + 8, 4);
    const uint32_t sc_lo = a & 0x3f3f3f3fu, m_lo = b & 0x3f3f3f3fu;
    const uint32_t sc_hi = (c & 0x0f0f0f0fu) | (((a >> 6) & 0x03030303u) << 4);
    const uint32_t m_hi = ((c >> 4) & 0x0f0f0f0fu) | (((b >> 6) & 0x03030303u) << 4);
    sc8 = static_cast<uint64_t>(sc_hi) << 32 | sc_lo;
    m8 = static_cast<uint64_t>(m_hi) << 32 | m_lo;
}

// vpermw index: int16 lanes 0-15 take element a, 16-31 element b
inline __m512i idx2(int a, int b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(static_cast<short>(a))),
                              _mm256_set1_epi16(static_cast<short>(b)), 1);
}
// int16 lanes 8k..8k+7 take element a+k (k < 4)
inline __m512i idx4(int a) {
    const long long r = 0x0001000100010001LL;
    return _mm512_set_epi64(r * (a + 3), r * (a + 3), r * (a + 2), r * (a + 2), r * (a + 1), r * (a + 1), r * a, r * a);
}

// Software prefetch distance in each row's stream (bytes; 0: none): see the tiles below.
#ifndef LATTE_KQ_PF
#define LATTE_KQ_PF 1024
#endif
constexpr size_t kKPrefetch = LATTE_KQ_PF;

template <GGMLType WT, int R, int T>
void kk(const uint8_t* w, size_t ldw, int64_t nb, const uint8_t* act, size_t lda, float* Y, int64_t ldy) {
    constexpr size_t bs = kKBlockBytes<WT>;
    const size_t n_in = static_cast<size_t>(nb) * 256, off_d = n_in, off_s = n_in + 4 * static_cast<size_t>(nb);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 acc[R][T];
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        if constexpr (kKPrefetch > 0) {  // the weights kKPrefetch bytes ahead in each row's stream
            for (int r = 0; r < R; ++r)
                for (size_t k = 0; k < bs; k += 64)
                    _mm_prefetch(reinterpret_cast<const char*>(w + r * ldw + b * bs + kKPrefetch + k), _MM_HINT_T0);
        }
        float dx[T];
        __m256i bsum[T];
        for (int t = 0; t < T; ++t) {
            std::memcpy(&dx[t], act + t * lda + off_d + 4 * b, 4);
            bsum[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act + t * lda + off_s + 32 * b));
        }
        __m512i ai[R][T];
        float dw[R];
        if constexpr (WT == GGMLType::Q6_K) {
            const __m512i m30 = _mm512_set1_epi8(0x30);
            const __m512i sl_lo = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
            const __m512i sr_hi = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
            for (int r = 0; r < R; ++r) {
                const uint8_t* blk = w + r * ldw + b * bs;  // ql[128] at 0, qh[64] at 128, scales[16] at 192, d at 208
                const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192)));
                const __m512i s512 = _mm512_castsi256_si512(s16);
                for (int t = 0; t < T; ++t)  // -32·Σ sc·bsum
                    ai[r][t] = _mm512_zextsi256_si512(
                        _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(bsum[t], s16), 5)));
                for (int h = 0; h < 2; ++h) {
                    const __m512i v = _mm512_loadu_si512(blk + 64 * h);
                    const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * h)));
                    const __m512i lo = _mm512_or_si512(_mm512_and_si512(v, m4), _mm512_and_si512(_mm512_sllv_epi16(qh, sl_lo), m30));
                    const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4),
                                                       _mm512_and_si512(_mm512_srlv_epi16(qh, sr_hi), m30));
                    const __m512i slo = _mm512_permutexvar_epi16(idx4(8 * h), s512);
                    const __m512i shi = _mm512_permutexvar_epi16(idx4(8 * h + 4), s512);
                    for (int t = 0; t < T; ++t) {
                        const uint8_t* x = act + t * lda + 256 * b + 128 * h;
                        ai[r][t] = _mm512_dpwssd_epi32(ai[r][t], _mm512_maddubs_epi16(lo, _mm512_loadu_si512(x)), slo);
                        ai[r][t] = _mm512_dpwssd_epi32(ai[r][t], _mm512_maddubs_epi16(hi, _mm512_loadu_si512(x + 64)), shi);
                    }
                }
                dw[r] = h2f(blk + 208);
            }
        } else {
            for (int r = 0; r < R; ++r) {
                const uint8_t* p = w + r * ldw + b * bs;
                uint64_t sc8, m8;
                k4_unpack(p + 4, sc8, m8);
                const __m128i mm = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(m8)));
                const __m256i mn16 = _mm256_setr_m128i(_mm_unpacklo_epi16(mm, mm), _mm_unpackhi_epi16(mm, mm));
                const __m512i s512 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc8))));
                dw[r] = h2f(p);
                const float dmw = h2f(p + 2);
                for (int t = 0; t < T; ++t) {  // the mins: -dmin·d_x·Σ m·bsum
                    const __m512 mv = _mm512_zextps256_ps512(_mm256_cvtepi32_ps(_mm256_madd_epi16(bsum[t], mn16)));
                    acc[r][t] = _mm512_fmadd_ps(mv, _mm512_set1_ps(-dmw * dx[t]), acc[r][t]);
                    ai[r][t] = _mm512_setzero_si512();
                }
                const uint8_t* qs = p + (WT == GGMLType::Q5_K ? 48 : 16);
                __m512i qh = _mm512_setzero_si512();
                if constexpr (WT == GGMLType::Q5_K)
                    qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16)));
                for (int h = 0; h < 2; ++h) {
                    const __m512i v = _mm512_loadu_si512(qs + 64 * h);
                    __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                    if constexpr (WT == GGMLType::Q5_K) {
                        // chunk c = 2h (low 32 bytes), 2h+1 (high): bit 2c of qh[l] for the low nibble, 2c+1 the high
                        const __m512i blo = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (4 * h))),
                                                               _mm256_set1_epi8(static_cast<char>(1 << (4 * h + 2))), 1);
                        const __m512i bhi = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(2 << (4 * h))),
                                                               _mm256_set1_epi8(static_cast<char>(2 << (4 * h + 2))), 1);
                        const __m512i sixteen = _mm512_set1_epi8(16);
                        lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(qh, blo), lo, sixteen);
                        hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(qh, bhi), hi, sixteen);
                    }
                    const __m512i slo = _mm512_permutexvar_epi16(idx2(4 * h, 4 * h + 2), s512);
                    const __m512i shi = _mm512_permutexvar_epi16(idx2(4 * h + 1, 4 * h + 3), s512);
                    for (int t = 0; t < T; ++t) {
                        const uint8_t* x = act + t * lda + 256 * b + 128 * h;
                        ai[r][t] = _mm512_dpwssd_epi32(ai[r][t], _mm512_maddubs_epi16(lo, _mm512_loadu_si512(x)), slo);
                        ai[r][t] = _mm512_dpwssd_epi32(ai[r][t], _mm512_maddubs_epi16(hi, _mm512_loadu_si512(x + 64)), shi);
                    }
                }
            }
        }
        for (int r = 0; r < R; ++r)
            for (int t = 0; t < T; ++t)
                acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai[r][t]), _mm512_set1_ps(dw[r] * dx[t]), acc[r][t]);
    }
    for (int t = 0; t < T; ++t)
        for (int r = 0; r < R; ++r) Y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
}

// ---- Repacked K-quants (Q4_K_R, Q5_K_R, Q6_K_R; latte/types.h) --------------------------------
// As kernels/avx2/gemm.cpp's kkr, two of its 32-byte element vectors per zmm. The activation: the
// layout above, each 256-block's int8 in the weights' element-vector order (k_act_perm; natural order
// before, not the Q4_K/Q5_K permutation). q4_K_r/q5_K_r: vpdpbusd(q u8, x s8) sums 4 elements of one
// sub-block per int32 lane (lane l of each 256-bit half is sub-block l), summed over the block's
// vectors (|lane| <= 16·31·127), then multiplied by the sub-block's scale (int32, exact); the mins as
// in kk. q6_K_r: int16 lane k of a maddubs is sub-block k, so vpdpwssd with the 16 scales as one
// constant vector; -32 as in kk. Exact int32 per block; one cvt + fma by d_w·d_x per block.
template <GGMLType WT>
constexpr GGMLType kr_file = WT == GGMLType::Q4_K_R ? GGMLType::Q4_K : WT == GGMLType::Q5_K_R ? GGMLType::Q5_K : GGMLType::Q6_K;

template <GGMLType WT, int R, int T>
void kkr(const uint8_t* w, size_t ldw, int64_t nb, const uint8_t* act, size_t lda, float* Y, int64_t ldy) {
    constexpr size_t bs = kKBlockBytes<kr_file<WT>>;
    const size_t n_in = static_cast<size_t>(nb) * 256, off_d = n_in, off_s = n_in + 4 * static_cast<size_t>(nb);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 acc[R][T];
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        if constexpr (kKPrefetch > 0) {
            for (int r = 0; r < R; ++r)
                for (size_t k = 0; k < bs; k += 64)
                    _mm_prefetch(reinterpret_cast<const char*>(w + r * ldw + b * bs + kKPrefetch + k), _MM_HINT_T0);
        }
        float dx[T];
        __m256i bsum[T];
        for (int t = 0; t < T; ++t) {
            std::memcpy(&dx[t], act + t * lda + off_d + 4 * b, 4);
            bsum[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act + t * lda + off_s + 32 * b));
        }
        // activation element vectors e, e+1 of token t
        auto xv = [&](int t, int e) { return _mm512_loadu_si512(act + t * lda + 256 * b + 32 * e); };
        for (int r = 0; r < R; ++r) {
            const uint8_t* p = w + r * ldw + b * bs;
            __m512i ai[T];
            float dw;
            if constexpr (WT == GGMLType::Q6_K_R) {
                const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192)));
                const __m512i S = _mm512_broadcast_i64x4(s16);
                for (int t = 0; t < T; ++t)  // -32·Σ sc·bsum
                    ai[t] = _mm512_zextsi256_si512(
                        _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(bsum[t], s16), 5)));
                const __m512i m30 = _mm512_set1_epi8(0x30);
                const __m512i h0 = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 128)));
                const __m512i h1 = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 160)));
                // vectors (2z, 2z+1) of h (bits 4z..4z+3): low half bits 4z-4z+1, high half 4z+2..4z+3, to bits 4-5
                const __m512i sl = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
                const __m512i sr = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
                for (int z = 0; z < 2; ++z) {  // ql vectors 2z, 2z+1: low nibbles e = 2z, 2z+1; high e = 2z+4, 2z+5
                    const __m512i l = _mm512_loadu_si512(p + 64 * z);
                    auto hb = [&](__m512i h) { return z == 0 ? _mm512_sllv_epi16(h, sl) : _mm512_srlv_epi16(h, sr); };
                    const __m512i qa = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_and_si512(hb(h0), m30));
                    const __m512i qb =
                        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4), _mm512_and_si512(hb(h1), m30));
                    for (int t = 0; t < T; ++t) {
                        ai[t] = _mm512_dpwssd_epi32(ai[t], _mm512_maddubs_epi16(qa, xv(t, 2 * z)), S);
                        ai[t] = _mm512_dpwssd_epi32(ai[t], _mm512_maddubs_epi16(qb, xv(t, 2 * z + 4)), S);
                    }
                }
                dw = h2f(p + 208);
            } else {
                // scales / mins: byte l = sc_l | (m_l >> 4) << 6, byte 8+k = (m_k & 15) | (m_{k+4} & 15) << 4
                const __m128i a = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 4));
                int32_t mlo;
                std::memcpy(&mlo, p + 12, 4);
                const __m128i c = _mm_cvtsi32_si128(mlo), l4 = _mm_set1_epi8(0x0F);
                const __m128i m = _mm_or_si128(_mm_unpacklo_epi32(_mm_and_si128(c, l4), _mm_and_si128(_mm_srli_epi16(c, 4), l4)),
                                               _mm_and_si128(_mm_srli_epi16(a, 2), _mm_set1_epi8(0x30)));
                const __m128i sc = _mm_and_si128(a, _mm_set1_epi8(0x3F));
                const __m512i S32 = _mm512_broadcast_i64x4(_mm256_cvtepu8_epi32(sc));  // lane l (each half): sc_l
                const __m256i M = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m, m));       // int16 2l, 2l+1: m_l
                dw = h2f(p);
                const float dmw = h2f(p + 2);
                for (int t = 0; t < T; ++t) {  // the mins: -dmin·d_x·Σ m·bsum
                    const __m512 mv = _mm512_zextps256_ps512(_mm256_cvtepi32_ps(_mm256_madd_epi16(bsum[t], M)));
                    acc[r][t] = _mm512_fmadd_ps(mv, _mm512_set1_ps(-dmw * dx[t]), acc[r][t]);
                    ai[t] = _mm512_setzero_si512();
                }
                const uint8_t* qs = p + (WT == GGMLType::Q5_K_R ? 48 : 16);
                __m512i qh = _mm512_setzero_si512();
                if constexpr (WT == GGMLType::Q5_K_R)
                    qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16)));
                for (int z = 0; z < 2; ++z) {  // quant vectors 2z, 2z+1: low nibbles e = 2z, 2z+1; high e = 2z+4, 2z+5
                    const __m512i v = _mm512_loadu_si512(qs + 64 * z);
                    __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                    if constexpr (WT == GGMLType::Q5_K_R) {  // bit e of qh[byte] adds 16
                        auto bits = [](int e) {
                            return _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << e)),
                                                      _mm256_set1_epi8(static_cast<char>(1 << (e + 1))), 1);
                        };
                        const __m512i sixteen = _mm512_set1_epi8(16);
                        lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(qh, bits(2 * z)), lo, sixteen);
                        hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(qh, bits(2 * z + 4)), hi, sixteen);
                    }
                    for (int t = 0; t < T; ++t) {
                        ai[t] = _mm512_dpbusd_epi32(ai[t], lo, xv(t, 2 * z));
                        ai[t] = _mm512_dpbusd_epi32(ai[t], hi, xv(t, 2 * z + 4));
                    }
                }
                for (int t = 0; t < T; ++t) ai[t] = _mm512_mullo_epi32(ai[t], S32);
            }
            for (int t = 0; t < T; ++t)
                acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai[t]), _mm512_set1_ps(dw * dx[t]), acc[r][t]);
        }
    }
    for (int t = 0; t < T; ++t)
        for (int r = 0; r < R; ++r) Y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
}

// Register tiles: kKR rows × kKT tokens for prompts, kKRtg rows × 1 token for TG (n_tok == 1).
// Measured on the device's Xeon (16 cores, shared with other sessions; A/B builds in one run, TG
// over the 2048x102400 head): 1 row at a time with a 1024-byte prefetch q4_K 8.2 / 15.2 GB/s (1 / 2
// threads) against 5.4 / 9.3 for 4 rows without prefetch and 5.1 / 9.8 for 2 rows; q5_K 16.0 vs
// 8.1, q6_K 15.9 vs 13.0 (2 threads). The LATTE_KQ_* macros are for such A/B builds.
#ifndef LATTE_KQ_R
#define LATTE_KQ_R 4
#endif
#ifndef LATTE_KQ_T
#define LATTE_KQ_T 4
#endif
#ifndef LATTE_KQ_RTG
#define LATTE_KQ_RTG 1
#endif
constexpr int kKR = LATTE_KQ_R, kKT = LATTE_KQ_T, kKRtg = LATTE_KQ_RTG;
using KKern = void (*)(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, float*, int64_t);
template <GGMLType WT, int R, int T>
constexpr KKern kfn() {
    if constexpr (WT == GGMLType::Q4_K_R || WT == GGMLType::Q5_K_R || WT == GGMLType::Q6_K_R) return kkr<WT, R, T>;
    else return kk<WT, R, T>;
}
template <GGMLType WT, int R>
constexpr KKern krow[4] = {kfn<WT, R, 1>(), kfn<WT, R, 2>(), kfn<WT, R, 3>(), kfn<WT, R, 4>()};
template <GGMLType WT>
constexpr const KKern* ktab[4] = {krow<WT, 1>, krow<WT, 2>, krow<WT, 3>, krow<WT, 4>};

template <GGMLType WT>
void gemm_k(const uint8_t* W, size_t ldw, int64_t n_in, int64_t n_out, const uint8_t* act, int64_t n_tok, float* Y,
            int64_t ldy) {
    const size_t lda = k_act_bytes(n_in);
    const int64_t nb = n_in / 256;
    const int RT = n_tok == 1 ? kKRtg : kKR, TT = n_tok == 1 ? 1 : kKT;
    for_each_gemm_tile(n_out, n_tok, RT, TT, ldw, [&](int64_t r0, int R, int64_t t1, int T) {
        ktab<WT>[R - 1][T - 1](W + r0 * ldw, ldw, nb, act + t1 * lda, lda, Y + t1 * ldy + r0, ldy);
    });
}

// One token's K-quant activation (layout above); perm: the Q4_K/Q5_K byte order.
void k_act_prep_row(const float* x, int64_t n_in, uint8_t* a, bool perm) {
    const int64_t nb = n_in / 256;
    for (int64_t b = 0; b < nb; ++b) {
        const float* xb = x + 256 * b;
        __m512 m = _mm512_setzero_ps();
        for (int i = 0; i < 16; ++i) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(xb + 16 * i)));
        const float amax = _mm512_reduce_max_ps(m);
        const float d = amax / 127.0f;
        const __m512 s = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
        int16_t bs[16];
        for (int g = 0; g < 16; ++g) {  // 16 values: element 16g.. goes to byte pos(16g)
            const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + 16 * g), s));
            const int e = 16 * g, within = e % 128, c = within / 32;  // 32-chunk of the 128
            const int pos = perm ? (e - within) + (c == 0 ? 0 : c == 1 ? 64 : c == 2 ? 32 : 96) + within % 32 : e;
            _mm_storeu_si128(reinterpret_cast<__m128i*>(a + 256 * b + pos), _mm512_cvtsepi32_epi8(q));
            bs[g] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
        }
        std::memcpy(a + n_in + 4 * b, &d, 4);
        std::memcpy(a + n_in + 4 * nb + 32 * b, bs, 32);
    }
}

// The repacked K-quants' activation order (see kkr): each 256-block's int8, natural order in `a`,
// transposed as a matrix of w-byte words (w = 4: 8 sub-blocks × 8 vectors; w = 2: 16 × 8).
void k_act_perm(uint8_t* a, int64_t n_in, int w) {
    uint8_t tmp[256];
    const int rows = 256 / (8 * w);  // sub-blocks
    for (int64_t b = 0; b < n_in / 256; ++b) {
        uint8_t* blk = a + 256 * b;
        std::memcpy(tmp, blk, 256);
        for (int e = 0; e < 8; ++e)
            for (int k = 0; k < rows; ++k)
                std::memcpy(blk + 32 * e + w * k, tmp + (256 / rows) * k + w * e, static_cast<size_t>(w));
    }
}

// One 32-block of an activation row to int8 (d = amax/127, round to nearest), with its q sum: the
// quantisation both activation layouts share.
inline void quant_block32(const float* x, int8_t* q, float& d, int32_t& sum) {
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    d = amax / 127.0f;
    const __m512 s = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, s)), q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, s));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtsepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), _mm512_cvtsepi32_epi8(q1));
    sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
}

}  // namespace

size_t gemm_act_size(GGMLType wt, int64_t n_in) {
    if (is_r16(wt)) return r16_act_bytes(n_in);
    if (is_k(wt)) return k_act_bytes(n_in);
    return is_q(wt) ? q_act_bytes(n_in) : 0;
}

void gemm_act_prep(GGMLType wt, const float* X, int64_t ldx, int64_t n_in, int64_t n_tok, void* act) {
    if (is_k(wt)) {
        const size_t lda = k_act_bytes(n_in);
        for (int64_t t = 0; t < n_tok; ++t) {
            uint8_t* a = static_cast<uint8_t*>(act) + t * lda;
            k_act_prep_row(X + t * ldx, n_in, a, wt == GGMLType::Q4_K || wt == GGMLType::Q5_K);
            if (wt == GGMLType::Q4_K_R || wt == GGMLType::Q5_K_R) k_act_perm(a, n_in, 4);
            if (wt == GGMLType::Q6_K_R) k_act_perm(a, n_in, 2);
        }
        return;
    }
    const bool r16 = is_r16(wt);
    if (!r16 && !is_q(wt)) return;
    const int32_t K = wt == GGMLType::Q8_0 || wt == GGMLType::Q8_0_R16 ? 128 : 8;
    // Both layouts: n_in int8, then per block `rep` scales, then per block `rep` corrections (the
    // first -K·Σq, the rest 0). q8_0: rep 8, one per vpdpbusd lane of the block; q8_0_r16: rep 1.
    const int64_t nb = n_in / 32, rep = r16 ? 1 : 8;
    const size_t lda = r16 ? r16_act_bytes(n_in) : q_act_bytes(n_in);
    for (int64_t t = 0; t < n_tok; ++t) {
        const float* x = X + t * ldx;
        uint8_t* a = static_cast<uint8_t*>(act) + t * lda;
        int8_t* q = reinterpret_cast<int8_t*>(a);
        float* ds = reinterpret_cast<float*>(a + n_in);
        int32_t* corr = reinterpret_cast<int32_t*>(a + n_in + 4 * rep * nb);
        for (int64_t b = 0; b < nb; ++b) {
            float d;
            int32_t sum;
            quant_block32(x + b * 32, q + b * 32, d, sum);
            for (int64_t i = 0; i < rep; ++i) {
                ds[b * rep + i] = d;
                corr[b * rep + i] = i == 0 ? -K * sum : 0;
            }
        }
    }
}

void gemm(GGMLType wt, const void* W, size_t ldw, int64_t n_in, int64_t n_out, const float* X, int64_t ldx,
          const void* act, int64_t n_tok, float* Y, int64_t ldy) {
    const uint8_t* w = static_cast<const uint8_t*>(W);
    const uint8_t* a = static_cast<const uint8_t*>(act);
    switch (wt) {
        case GGMLType::Q8_0: return gemm_q<GGMLType::Q8_0>(w, ldw, n_in, n_out, a, n_tok, Y, ldy);
        case GGMLType::Q4_0: return gemm_q<GGMLType::Q4_0>(w, ldw, n_in, n_out, a, n_tok, Y, ldy);
        case GGMLType::Q8_0_R16: return gemm_r16<GGMLType::Q8_0_R16>(w, ldw, n_in, n_out, a, n_tok, Y, ldy);
        case GGMLType::Q4_0_R16: return gemm_r16<GGMLType::Q4_0_R16>(w, ldw, n_in, n_out, a, n_tok, Y, ldy);
        case GGMLType::Q4_K: return gemm_k<GGMLType::Q4_K>(w, ldw, n_in, n_out, a, n_tok, Y, ldy);
        case GGMLType::Q5_K: return gemm_k<GGMLType::Q5_K>(w, ldw, n_in, n_out, a, n_tok, Y, ldy);
        case GGMLType::Q6_K: return gemm_k<GGMLType::Q6_K>(w, ldw, n_in, n_out, a, n_tok, Y, ldy);
        case GGMLType::Q4_K_R: return gemm_k<GGMLType::Q4_K_R>(w, ldw, n_in, n_out, a, n_tok, Y, ldy);
        case GGMLType::Q5_K_R: return gemm_k<GGMLType::Q5_K_R>(w, ldw, n_in, n_out, a, n_tok, Y, ldy);
        case GGMLType::Q6_K_R: return gemm_k<GGMLType::Q6_K_R>(w, ldw, n_in, n_out, a, n_tok, Y, ldy);
        case GGMLType::F32: return gemm_f<GGMLType::F32>(w, ldw, n_in, n_out, X, ldx, n_tok, Y, ldy);
        case GGMLType::F16: return gemm_f<GGMLType::F16>(w, ldw, n_in, n_out, X, ldx, n_tok, Y, ldy);
        case GGMLType::BF16: return gemm_f<GGMLType::BF16>(w, ldw, n_in, n_out, X, ldx, n_tok, Y, ldy);
        default: return scalar::gemm(wt, W, ldw, n_in, n_out, X, ldx, act, n_tok, Y, ldy);
    }
}

}  // namespace latte::kernels::avx512

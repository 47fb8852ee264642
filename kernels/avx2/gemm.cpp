// AVX2 weight matmul (AVX2+FMA+F16C; compiled with only the avx2 flags). Contract: GemmFn in
// kernels/dispatch.h. As kernels/avx512/gemm.cpp with 8-lane vectors:
// - F32/F16/BF16 weights: exact conversion to f32, f32 FMA on f32 activations.
// - Q8_0/Q4_0: activations quantised once to int8 per 32-block (gemm_act_prep: 32 int8 then the
//   f32 scales of the row); per block the signed dot is maddubs(|w|, sign(x, w)) + madd (Q4_0
//   nibbles are first made signed, q-8), exact in int32, then scaled by d_w·d_x in f32.
// - Q8_0_R16 (16-row groups, latte/types.h): two ymm of 8 rows per group, each lane one row;
//   per 4-byte column xor back to int8, then madd(maddubs(|w|, sign(x, w)), 1); see kr16.
// - Q4_K/Q5_K/Q6_K: activations quantised once to int8 per 256-block with per-16 sums (k_act_prep_row);
//   per sub-block maddubs(q u8, x s8) then madd with the sub-block's int16 scale, int32 over the
//   256-block; mins (Q4_K/Q5_K) and Q6_K's -32 through the per-16 sums; see kk.
// - Q4_K_R/Q5_K_R/Q6_K_R (K-quant blocks rearranged at load, latte/types.h): the activation in the
//   weights' element-vector order, so each block's scales are one vector (no broadcasts); see kkr.
// - Register tile 4 rows × 2 tokens (8 ymm accumulators); rows in groups of ~256 KiB of weights,
//   tokens in chunks of 64, each token tile passing over the group's rows. Each output
//   element has its own accumulator and the same operation order in every tile shape.
#include "kernels/avx2/gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/gemm_tiles.h"
#include "kernels/kquant_act.h"
#include "kernels/scalar/gemm.h"

namespace latte::kernels::avx2 {
namespace {

inline float h2f(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}
inline float hsum(__m256 v) {
    const __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 b = _mm_add_ps(a, _mm_movehl_ps(a, a));
    return _mm_cvtss_f32(_mm_add_ss(b, _mm_movehdup_ps(b)));
}
bool is_q(GGMLType t) { return t == GGMLType::Q8_0 || t == GGMLType::Q4_0; }

size_t q_act_bytes(int64_t n_in) { return (static_cast<size_t>(n_in + 4 * (n_in / 32)) + 63) & ~size_t{63}; }

template <GGMLType WT>
constexpr size_t kBlockBytes = WT == GGMLType::Q8_0 ? 34 : 18;

// One weight block as 32 signed int8.
template <GGMLType WT>
inline __m256i load_w(const uint8_t* p) {
    if constexpr (WT == GGMLType::Q8_0) {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
    } else {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2));
        const __m128i m = _mm_set1_epi8(0x0F);
        const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(a, m)),
                                                  _mm_and_si128(_mm_srli_epi16(a, 4), m), 1);
        return _mm256_sub_epi8(v, _mm256_set1_epi8(8));
    }
}

template <GGMLType WT, int R, int T>
void kq(const uint8_t* w, size_t ldw, int64_t n_in, const uint8_t* act, size_t lda, float* Y, int64_t ldy) {
    constexpr size_t bs = kBlockBytes<WT>;
    const int64_t nb = n_in / 32;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[R][T];
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        __m256i aw[R], wv[R];
        float dw[R];
        for (int r = 0; r < R; ++r) {
            const uint8_t* p = w + r * ldw + b * bs;
            wv[r] = load_w<WT>(p);
            aw[r] = _mm256_sign_epi8(wv[r], wv[r]);
            dw[r] = h2f(p);
        }
        for (int t = 0; t < T; ++t) {
            const uint8_t* a = act + t * lda;
            const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + b * 32));
            float dx;
            std::memcpy(&dx, a + n_in + 4 * b, 4);
            for (int r = 0; r < R; ++r) {
                const __m256i p16 = _mm256_maddubs_epi16(aw[r], _mm256_sign_epi8(x, wv[r]));
                const __m256i p32 = _mm256_madd_epi16(p16, ones);
                acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p32), _mm256_set1_ps(dw[r] * dx), acc[r][t]);
            }
        }
    }
    for (int t = 0; t < T; ++t)
        for (int r = 0; r < R; ++r) Y[t * ldy + r] = hsum(acc[r][t]);
}

// Q8_0_R16 (16-row groups, latte/types.h): a group is two ymm of 8 rows; per 4-byte column k the
// stored u8 q+128 is flipped back to int8 (xor), and the signed dot of each lane's 4 bytes with the
// token's 4 broadcast int8 is madd(maddubs(|w|, sign(x, w)), 1) (|w| <= 128, |x| <= 127: no int16
// saturation), summed in int32 over the block's 8 columns, then scaled by d_w·d_x in f32 per lane.
// Q4_0_R16: per 4-byte column k the low nibbles (u8 0..15: elements 4k..) and high nibbles
// (16+4k..) go straight into maddubs (|sum| <= 2·2·15·127 < 32767, the two added in int16), the
// block's int32 sum starting at -8·Σq.
// Activation: n_in int8, then f32 d_x[nb], then int32 -K·Σq [nb] (K = 8 for Q4_0_R16; unused by Q8_0_R16).
size_t r16_act_bytes(int64_t n_in) { return (static_cast<size_t>(n_in + 8 * (n_in / 32)) + 63) & ~size_t{63}; }

// noinline: inlined into the driver (gemm_r16 / for_each_gemm_tile) its loop ran ~3% slower (PP 2048x2048,
// 512 tokens, q8_0_r16); out of line it is the same code as when the driver called it directly.
template <GGMLType WT, int T>
[[gnu::noinline]] void kr16(const uint8_t* w, int64_t nb, const uint8_t* act, size_t lda, float* Y, int64_t ldy) {
    constexpr size_t gbs = WT == GGMLType::Q8_0_R16 ? 544 : 288;
    const size_t n_in = static_cast<size_t>(nb) * 32;
    const __m256i ones = _mm256_set1_epi16(1), flip = _mm256_set1_epi8(char(0x80)), m4 = _mm256_set1_epi8(0x0F);
    __m256 acc[2][T];
    for (int h = 0; h < 2; ++h)
        for (int t = 0; t < T; ++t) acc[h][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* wb = w + static_cast<size_t>(b) * gbs;
        __m256i ai[2][T];
        if constexpr (WT == GGMLType::Q8_0_R16) {
            for (int h = 0; h < 2; ++h)
                for (int t = 0; t < T; ++t) ai[h][t] = _mm256_setzero_si256();
            for (int k = 0; k < 8; ++k) {
                __m256i ws[2], aw[2];
                for (int h = 0; h < 2; ++h) {
                    ws[h] = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + 32 + 64 * k + 32 * h)), flip);
                    aw[h] = _mm256_sign_epi8(ws[h], ws[h]);
                }
                for (int t = 0; t < T; ++t) {
                    int32_t xq;
                    std::memcpy(&xq, act + t * lda + 32 * b + 4 * k, 4);
                    const __m256i x = _mm256_set1_epi32(xq);
                    for (int h = 0; h < 2; ++h)
                        ai[h][t] = _mm256_add_epi32(
                            ai[h][t], _mm256_madd_epi16(_mm256_maddubs_epi16(aw[h], _mm256_sign_epi8(x, ws[h])), ones));
                }
            }
        } else {
            for (int t = 0; t < T; ++t) {
                int32_t c;
                std::memcpy(&c, act + t * lda + n_in + 4 * nb + 4 * b, 4);
                for (int h = 0; h < 2; ++h) ai[h][t] = _mm256_set1_epi32(c);
            }
            for (int k = 0; k < 4; ++k) {
                __m256i lo[2], hi[2];
                for (int h = 0; h < 2; ++h) {
                    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + 32 + 64 * k + 32 * h));
                    lo[h] = _mm256_and_si256(v, m4);
                    hi[h] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                }
                for (int t = 0; t < T; ++t) {
                    int32_t xl, xh;
                    std::memcpy(&xl, act + t * lda + 32 * b + 4 * k, 4);
                    std::memcpy(&xh, act + t * lda + 32 * b + 16 + 4 * k, 4);
                    const __m256i x0 = _mm256_set1_epi32(xl), x1 = _mm256_set1_epi32(xh);
                    for (int h = 0; h < 2; ++h) {
                        const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo[h], x0), _mm256_maddubs_epi16(hi[h], x1));
                        ai[h][t] = _mm256_add_epi32(ai[h][t], _mm256_madd_epi16(p, ones));
                    }
                }
            }
        }
        __m256 dw[2];
        for (int h = 0; h < 2; ++h) dw[h] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + 16 * h)));
        for (int t = 0; t < T; ++t) {
            float dx;
            std::memcpy(&dx, act + t * lda + n_in + 4 * b, 4);
            const __m256 d = _mm256_set1_ps(dx);
            for (int h = 0; h < 2; ++h)
                acc[h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ai[h][t]), _mm256_mul_ps(dw[h], d), acc[h][t]);
        }
    }
    for (int t = 0; t < T; ++t)
        for (int h = 0; h < 2; ++h) _mm256_storeu_ps(Y + t * ldy + 8 * h, acc[h][t]);
}

template <GGMLType WT>
constexpr size_t kElemBytes = WT == GGMLType::F32 ? 4 : 2;

template <GGMLType WT>
inline __m256 load_wf(const uint8_t* p) {
    if constexpr (WT == GGMLType::F32) return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
    else if constexpr (WT == GGMLType::F16) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    else
        return _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
}

template <GGMLType WT, int R, int T>
void kf(const uint8_t* w, size_t ldw, int64_t n_in, const float* X, int64_t ldx, float* Y, int64_t ldy) {
    constexpr size_t es = kElemBytes<WT>;
    __m256 acc[R][T];
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= n_in; k += 8) {
        if constexpr (T == 1) {  // TG: the next tile's rows, as kernels/avx512/gemm.cpp's kf
            if (k * es % 64 == 0)
                for (int r = 0; r < R; ++r)
                    _mm_prefetch(reinterpret_cast<const char*>(w + (r + R) * ldw + k * es + kGemmNextTilePrefetch),
                                 _MM_HINT_T0);
        }
        __m256 wv[R];
        for (int r = 0; r < R; ++r) wv[r] = load_wf<WT>(w + r * ldw + k * es);
        for (int t = 0; t < T; ++t) {
            const __m256 x = _mm256_loadu_ps(X + t * ldx + k);
            for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], x, acc[r][t]);
        }
    }
    if (k < n_in) {  // tail: through small zero-padded buffers (same FMA order for every tile)
        alignas(32) float wt[R][8] = {}, xt[8];
        for (int r = 0; r < R; ++r) {
            const uint8_t* p = w + r * ldw + k * es;
            for (int64_t i = 0; i < n_in - k; ++i) {
                if constexpr (WT == GGMLType::F32) std::memcpy(&wt[r][i], p + 4 * i, 4);
                else {
                    uint16_t h;
                    std::memcpy(&h, p + 2 * i, 2);
                    if constexpr (WT == GGMLType::F16) wt[r][i] = _cvtsh_ss(h);
                    else {
                        const uint32_t u = static_cast<uint32_t>(h) << 16;
                        std::memcpy(&wt[r][i], &u, 4);
                    }
                }
            }
        }
        for (int t = 0; t < T; ++t) {
            for (int i = 0; i < 8; ++i) xt[i] = k + i < n_in ? X[t * ldx + k + i] : 0.0f;
            const __m256 x = _mm256_load_ps(xt);
            for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(_mm256_load_ps(wt[r]), x, acc[r][t]);
        }
    }
    for (int t = 0; t < T; ++t)
        for (int r = 0; r < R; ++r) Y[t * ldy + r] = hsum(acc[r][t]);
}

// Tiles of kR rows × kT tokens, driven by for_each_gemm_tile (kernels/gemm_tiles.h): a row group's
// weights (~256 KiB) stay in L2 while each token tile (in L1) passes over them kR rows at a time.
constexpr int kR = 4, kT = 2;
using QKern = void (*)(const uint8_t*, size_t, int64_t, const uint8_t*, size_t, float*, int64_t);
using FKern = void (*)(const uint8_t*, size_t, int64_t, const float*, int64_t, float*, int64_t);
template <GGMLType WT, int R>
constexpr QKern qrow[kT] = {kq<WT, R, 1>, kq<WT, R, 2>};
template <GGMLType WT>
constexpr const QKern* qtab[kR] = {qrow<WT, 1>, qrow<WT, 2>, qrow<WT, 3>, qrow<WT, 4>};
template <GGMLType WT, int R>
constexpr FKern frow[kT] = {kf<WT, R, 1>, kf<WT, R, 2>};
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
// Q8_0_R16 / Q4_0_R16: one group (16 rows) × 2 tokens (4 ymm f32 accumulators + 4 for the block's
// int sums); groups in chunks of ~256 KiB, tokens in chunks of 64, as above.
template <GGMLType WT>
void gemm_r16(const uint8_t* W, size_t ldw, int64_t n_in, int64_t n_out, const uint8_t* act, int64_t n_tok, float* Y,
              int64_t ldy) {
    const size_t lda = r16_act_bytes(n_in), gs = 16 * ldw;
    const int64_t nb = n_in / 32;
    for_each_gemm_tile(n_out / 16, n_tok, 1, 2, gs, [&](int64_t g, int, int64_t t1, int T) {
        if (T == 2) kr16<WT, 2>(W + g * gs, nb, act + t1 * lda, lda, Y + t1 * ldy + 16 * g, ldy);
        else kr16<WT, 1>(W + g * gs, nb, act + t1 * lda, lda, Y + t1 * ldy + 16 * g, ldy);
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
// Activation per token (gemm_act_prep), n_in = 256·nb: n_in int8 q (natural order), then f32 d_x[nb]
// (per 256-block: amax/127), then int16 bsum[nb][16] (sums of the 16 q of each 16-element group).
// Per row and 256-block, in int32: Σ_sub sc·(q·x) by maddubs(q u8, x s8) (|pair| <= 2·63·127) then
// madd with the sub-block's scale broadcast as int16, summed over the block (|Σ| < 2^28); Q6_K's
// -32 offset is -32·Σ_16 sc·bsum (int32, exact); Q4_K/Q5_K's mins are Σ_16 m·bsum (int32), scaled by
// -dmin·d_x. Per block: acc += f32(int) · (d_w·d_x) (and the mins term) in 8 f32 lanes.
// (k_act_bytes and is_k: kernels/kquant_act.h)

template <GGMLType WT>
constexpr size_t kKBlockBytes = WT == GGMLType::Q4_K ? 144 : WT == GGMLType::Q5_K ? 176 : 210;

// The 8 6-bit scales (sc8) and mins (m8) of a q4_K/q5_K block, one byte each (see k4_scale_min).
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

// pshufb masks broadcasting int16 element j of each 128-bit lane
inline __m256i bcast16(int j) { return _mm256_set1_epi16(static_cast<short>((2 * j) | ((2 * j + 1) << 8))); }
// Q6_K: int16 element 2g in the low lane, 2g+1 in the high lane
inline __m256i bcast16_q6(int g) {
    return _mm256_setr_m128i(_mm_set1_epi16(static_cast<short>((4 * g) | ((4 * g + 1) << 8))),
                             _mm_set1_epi16(static_cast<short>((4 * g + 2) | ((4 * g + 3) << 8))));
}

// Software prefetch distance in each row's stream (bytes; 0: none). 1024 was at least as good as
// none, 512 and 2048 in the same A/B (the noise is +-30% on this shared box).
#ifndef LATTE_KQ_PF
#define LATTE_KQ_PF 1024
#endif
constexpr size_t kKPrefetch = LATTE_KQ_PF;

template <GGMLType WT, int R, int T>
void kk(const uint8_t* w, size_t ldw, int64_t nb, const uint8_t* act, size_t lda, float* Y, int64_t ldy) {
    constexpr size_t bs = kKBlockBytes<WT>;
    const size_t n_in = static_cast<size_t>(nb) * 256, off_d = n_in, off_s = n_in + 4 * static_cast<size_t>(nb);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc[R][T];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        if constexpr (kKPrefetch > 0) {  // the weights kKPrefetch bytes ahead in each row's stream
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r)
                for (size_t k = 0; k < bs; k += 64)
                    _mm_prefetch(reinterpret_cast<const char*>(w + r * ldw + b * bs + kKPrefetch + k), _MM_HINT_T0);
        }
        float dx[T];
        __m256i bsum[T];
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
            std::memcpy(&dx[t], act + t * lda + off_d + 4 * b, 4);
            bsum[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act + t * lda + off_s + 32 * b));
        }
        __m256i ai[R][T];
        if constexpr (WT == GGMLType::Q6_K) {
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) {
                const uint8_t* blk = w + r * ldw + b * bs;  // ql[128] at 0, qh[64] at 128, scales[16] at 192, d at 208
                const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192)));
#pragma GCC unroll 4
                for (int t = 0; t < T; ++t)  // -32·Σ sc·bsum
                    ai[r][t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(bsum[t], s16), 5));
#pragma GCC unroll 4
                for (int h = 0; h < 2; ++h) {
                    const __m256i sh = h ? _mm256_permute2x128_si256(s16, s16, 0x11) : _mm256_permute2x128_si256(s16, s16, 0x00);
                    const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h));
                    const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h + 32));
                    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * h));
                    const __m256i m30 = _mm256_set1_epi8(0x30);
                    __m256i q[4];
                    q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
                    q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
                    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(qh, m30));
                    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                           _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
#pragma GCC unroll 4
                    for (int g = 0; g < 4; ++g) {
                        const __m256i sc = _mm256_shuffle_epi8(sh, bcast16_q6(g));
#pragma GCC unroll 4
                        for (int t = 0; t < T; ++t) {
                            const __m256i x = _mm256_loadu_si256(
                                reinterpret_cast<const __m256i*>(act + t * lda + 256 * b + 128 * h + 32 * g));
                            ai[r][t] = _mm256_add_epi32(ai[r][t], _mm256_madd_epi16(_mm256_maddubs_epi16(q[g], x), sc));
                        }
                    }
                }
                const float dw = h2f(blk + 208);
#pragma GCC unroll 4
                for (int t = 0; t < T; ++t)
                    acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ai[r][t]), _mm256_set1_ps(dw * dx[t]), acc[r][t]);
            }
        } else {
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) {
                const uint8_t* p = w + r * ldw + b * bs;
                uint64_t sc8, m8;
                k4_unpack(p + 4, sc8, m8);
                const __m128i s8 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc8)));
                const __m128i mm = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(m8)));
                const __m256i s16 = _mm256_broadcastsi128_si256(s8);
                const __m256i mn16 = _mm256_setr_m128i(_mm_unpacklo_epi16(mm, mm), _mm_unpackhi_epi16(mm, mm));
                const float dw = h2f(p), dmw = h2f(p + 2);
#pragma GCC unroll 4
                for (int t = 0; t < T; ++t) {  // the mins: -dmin·d_x·Σ m·bsum
                    acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(bsum[t], mn16)),
                                                _mm256_set1_ps(-dmw * dx[t]), acc[r][t]);
                    ai[r][t] = _mm256_setzero_si256();
                }
                const uint8_t* qs = p + (WT == GGMLType::Q5_K ? 48 : 16);
                __m256i hb = _mm256_setzero_si256();
                if constexpr (WT == GGMLType::Q5_K) hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16));
                const __m256i one = _mm256_set1_epi8(1);
#pragma GCC unroll 4
                for (int c = 0; c < 4; ++c) {
                    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * c));
                    __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                    if constexpr (WT == GGMLType::Q5_K) {
                        lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(hb, one), 4));
                        hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 1), one), 4));
                        hb = _mm256_srli_epi16(hb, 2);
                    }
                    const __m256i slo = _mm256_shuffle_epi8(s16, bcast16(2 * c));
                    const __m256i shi = _mm256_shuffle_epi8(s16, bcast16(2 * c + 1));
#pragma GCC unroll 4
                    for (int t = 0; t < T; ++t) {
                        const uint8_t* x = act + t * lda + 256 * b + 64 * c;
                        const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
                        const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32));
                        const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, x0), slo);
                        const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x1), shi);
                        ai[r][t] = _mm256_add_epi32(ai[r][t], _mm256_add_epi32(p0, p1));
                    }
                }
#pragma GCC unroll 4
                for (int t = 0; t < T; ++t)
                    acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ai[r][t]), _mm256_set1_ps(dw * dx[t]), acc[r][t]);
            }
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t)
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) Y[t * ldy + r] = hsum(acc[r][t]);
}

// ---- Repacked K-quants (Q4_K_R, Q5_K_R, Q6_K_R; latte/types.h) --------------------------------
// The activation as above (k_act_bytes, the same d_x and natural-order bsum), but each 256-block's
// int8 in the weights' "element vector" order: q4_K_r/q5_K_r vector e (0..7, 32 bytes) byte 4l+i is
// x[32l+4e+i], q6_K_r vector e byte 2k+i is x[16k+2e+i] (k_act_perm). So int16 lane pair l of a
// maddubs is sub-block l (q4_K/q5_K) and int16 lane k sub-block k (q6_K): the per-block scales are one
// constant vector (no broadcasts), and the maddubs results are first summed in int16 over the
// vectors (q4_K_r: all 8, |Σ| <= 8·2·15·127 = 30480; q5_K_r: 4, <= 4·2·31·127 = 31496; q6_K_r: 2,
// <= 2·2·63·127 = 32004), then one madd with the scales per sum. All exact: the same int32 block
// total as kk, accumulated in f32 per lane in another lane split (within the same error bound).
template <GGMLType WT>
constexpr GGMLType kr_file = WT == GGMLType::Q4_K_R ? GGMLType::Q4_K : WT == GGMLType::Q5_K_R ? GGMLType::Q5_K : GGMLType::Q6_K;

// Prefetch distance for kkr: 2048 bytes read the head 2048 -> 102400 faster than 1024 in an
// interleaved A/B on the dev box (q4_K_r 1 thread 14.3-16.2 vs 13.0-14.5 GB/s, 2 threads 22.5-28.0
// vs 19.1-24.6, 5 rounds; q5_K_r/q6_K_r about even; 3072 no better).
#ifndef LATTE_KQR_PF
#define LATTE_KQR_PF 2048
#endif
constexpr size_t kKRPrefetch = LATTE_KQR_PF;
template <GGMLType WT, int R, int T>
void kkr(const uint8_t* w, size_t ldw, int64_t nb, const uint8_t* act, size_t lda, float* Y, int64_t ldy) {
    constexpr size_t bs = kKBlockBytes<kr_file<WT>>;
    const size_t n_in = static_cast<size_t>(nb) * 256, off_d = n_in, off_s = n_in + 4 * static_cast<size_t>(nb);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc[R][T];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        if constexpr (kKRPrefetch > 0) {
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r)
                for (size_t k = 0; k < bs; k += 64)
                    _mm_prefetch(reinterpret_cast<const char*>(w + r * ldw + b * bs + kKRPrefetch + k), _MM_HINT_T0);
        }
        float dx[T];
        __m256i bsum[T];
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
            std::memcpy(&dx[t], act + t * lda + off_d + 4 * b, 4);
            bsum[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act + t * lda + off_s + 32 * b));
        }
        auto xv = [&](int t, int e) {  // activation element vector e of token t
            return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act + t * lda + 256 * b + 32 * e));
        };
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            const uint8_t* p = w + r * ldw + b * bs;
            __m256i ai[T];
            float dw;
            if constexpr (WT == GGMLType::Q6_K_R) {
                const __m256i S = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192)));
#pragma GCC unroll 4
                for (int t = 0; t < T; ++t)  // -32·Σ sc·bsum
                    ai[t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(bsum[t], S), 5));
                const __m256i h0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 128));
                const __m256i h1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 160));
                const __m256i m30 = _mm256_set1_epi8(0x30);
#pragma GCC unroll 4
                for (int c = 0; c < 4; ++c) {
                    const __m256i l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * c));
                    // bits 2c..2c+1 of h0 (vector c) / h1 (vector c+4) to bits 4-5
                    auto hb = [&](__m256i h) {
                        return c == 0   ? _mm256_slli_epi16(h, 4)
                               : c == 1 ? _mm256_slli_epi16(h, 2)
                               : c == 2 ? h
                                        : _mm256_srli_epi16(h, 2);
                    };
                    const __m256i qa = _mm256_or_si256(_mm256_and_si256(l, m4), _mm256_and_si256(hb(h0), m30));
                    const __m256i qb =
                        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l, 4), m4), _mm256_and_si256(hb(h1), m30));
#pragma GCC unroll 4
                    for (int t = 0; t < T; ++t) {
                        const __m256i s16 =
                            _mm256_add_epi16(_mm256_maddubs_epi16(qa, xv(t, c)), _mm256_maddubs_epi16(qb, xv(t, c + 4)));
                        ai[t] = _mm256_add_epi32(ai[t], _mm256_madd_epi16(s16, S));
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
                // int16 lanes 2l, 2l+1: sub-block l's scale / min
                const __m256i S = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(sc, sc));
                const __m256i M = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m, m));
                dw = h2f(p);
                const float dmw = h2f(p + 2);
#pragma GCC unroll 4
                for (int t = 0; t < T; ++t)  // the mins: -dmin·d_x·Σ m·bsum
                    acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(bsum[t], M)), _mm256_set1_ps(-dmw * dx[t]),
                                                acc[r][t]);
                const uint8_t* qs = p + (WT == GGMLType::Q5_K_R ? 48 : 16);
                __m256i qh = _mm256_setzero_si256();
                if constexpr (WT == GGMLType::Q5_K_R) qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16));
                const __m256i b4 = _mm256_set1_epi8(0x10);
                __m256i s16[T][2];
#pragma GCC unroll 4
                for (int cc = 0; cc < 4; ++cc) {
                    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * cc));
                    __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                    if constexpr (WT == GGMLType::Q5_K_R) {  // bit e of qh to bit 4: e = cc (lo), cc+4 (hi)
                        const __m256i hl = _mm256_slli_epi16(qh, 4 - cc);
                        const __m256i hh = cc == 0 ? qh : _mm256_srli_epi16(qh, cc);
                        lo = _mm256_or_si256(lo, _mm256_and_si256(hl, b4));
                        hi = _mm256_or_si256(hi, _mm256_and_si256(hh, b4));
                    }
#pragma GCC unroll 4
                    for (int t = 0; t < T; ++t) {
                        const __m256i pr =
                            _mm256_add_epi16(_mm256_maddubs_epi16(lo, xv(t, cc)), _mm256_maddubs_epi16(hi, xv(t, cc + 4)));
                        // q4_K_r: one int16 sum of all 8 vectors; q5_K_r: two of 4
                        const int k = WT == GGMLType::Q5_K_R ? cc / 2 : 0;
                        s16[t][k] = (WT == GGMLType::Q5_K_R ? cc % 2 == 0 : cc == 0) ? pr : _mm256_add_epi16(s16[t][k], pr);
                    }
                }
#pragma GCC unroll 4
                for (int t = 0; t < T; ++t) {
                    ai[t] = _mm256_madd_epi16(s16[t][0], S);
                    if constexpr (WT == GGMLType::Q5_K_R) ai[t] = _mm256_add_epi32(ai[t], _mm256_madd_epi16(s16[t][1], S));
                }
            }
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t)
                acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ai[t]), _mm256_set1_ps(dw * dx[t]), acc[r][t]);
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t)
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) Y[t * ldy + r] = hsum(acc[r][t]);
}

// Register tiles: kKR rows × kKT tokens for prompts, kKRtg rows × 1 token for TG (n_tok == 1).
// Measured on the dev box (Zen 3, 2 cores, contended; kqcheck-style A/B, best of 20): TG over the
// 2048x102400 head, 1 thread, 1 row at a time 10-14 GB/s against 5-6 with 4 rows (one sequential
// stream per thread suits the prefetchers; the 4-row tile also spilled); PP 512 tokens, 1 thread:
// 2x4 and 1x4 ~87-90 GFLOP/s, 4x2 ~82, 2x2 ~70-80. The LATTE_KQ_* macros are for such A/B builds.
#ifndef LATTE_KQ_R
#define LATTE_KQ_R 2
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

// One token's K-quant activation (layout above).
void k_act_prep_row(const float* x, int64_t n_in, uint8_t* a) {
    const int64_t nb = n_in / 256;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < nb; ++b) {
        const float* xb = x + 256 * b;
        __m256 m = _mm256_setzero_ps();
        for (int i = 0; i < 32; ++i) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(xb + 8 * i)));
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        const float amax = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
        const float d = amax / 127.0f;
        const __m256 s = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
        int16_t bs[16];
        for (int g = 0; g < 8; ++g) {  // 32 values
            __m256i q[4];
            for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + 32 * g + 8 * i), s));
            const __m256i p01 = _mm256_packs_epi32(q[0], q[1]), p23 = _mm256_packs_epi32(q[2], q[3]);
            __m256i p = _mm256_packs_epi16(p01, p23);
            p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(a + 256 * b + 32 * g), p);
            for (int k = 0; k < 2; ++k) {
                const __m256i s8 = _mm256_add_epi32(q[2 * k], q[2 * k + 1]);
                __m128i hh = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
                hh = _mm_add_epi32(hh, _mm_shuffle_epi32(hh, 0x4E));
                hh = _mm_add_epi32(hh, _mm_shuffle_epi32(hh, 0xB1));
                bs[2 * g + k] = static_cast<int16_t>(_mm_cvtsi128_si32(hh));
            }
        }
        std::memcpy(a + n_in + 4 * b, &d, 4);
        std::memcpy(a + n_in + 4 * nb + 32 * b, bs, 32);
    }
}

// The repacked K-quants' activation order (see kkr): each 256-block's int8, natural order in `a`,
// transposed as a matrix of w-byte words (w = 4: 8 sub-blocks × 8 vectors; w = 2: 16 × 8).
void k_act_perm(uint8_t* a, int64_t n_in, int w) {
    uint8_t tmp[256];
    const int rows = 256 / (8 * w);  // words per element vector... sub-blocks
    for (int64_t b = 0; b < n_in / 256; ++b) {
        uint8_t* blk = a + 256 * b;
        std::memcpy(tmp, blk, 256);
        for (int e = 0; e < 8; ++e)
            for (int k = 0; k < rows; ++k)
                std::memcpy(blk + 32 * e + w * k, tmp + (256 / rows) * k + w * e, static_cast<size_t>(w));
    }
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
            k_act_prep_row(X + t * ldx, n_in, a);
            if (wt == GGMLType::Q4_K_R || wt == GGMLType::Q5_K_R) k_act_perm(a, n_in, 4);
            if (wt == GGMLType::Q6_K_R) k_act_perm(a, n_in, 2);
        }
        return;
    }
    if (!is_q(wt) && !is_r16(wt)) return;
    // Q8_0/Q4_0 and the r16 types: 32 int8 per block, then the row's f32 scales; the r16 types then
    // the int32 corrections -K·Σq (K = 8 for Q4_0_R16, 128 for Q8_0_R16).
    const int32_t K = wt == GGMLType::Q4_0_R16 ? 8 : 128;
    const int64_t nb = n_in / 32;
    const size_t lda = gemm_act_size(wt, n_in);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t t = 0; t < n_tok; ++t) {
        const float* x = X + t * ldx;
        uint8_t* a = static_cast<uint8_t*>(act) + t * lda;
        for (int64_t b = 0; b < nb; ++b) {
            __m256 v[4], m = _mm256_setzero_ps();
            for (int i = 0; i < 4; ++i) {
                v[i] = _mm256_loadu_ps(x + b * 32 + 8 * i);
                m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[i]));
            }
            const float amax = [&] {
                __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
                h = _mm_max_ps(h, _mm_movehl_ps(h, h));
                return _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
            }();
            const float d = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
            const __m256 s = _mm256_set1_ps(id);
            __m256i q[4];
            for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], s));
            // pack 32 int32 -> 32 int8 in order
            const __m256i p01 = _mm256_packs_epi32(q[0], q[1]), p23 = _mm256_packs_epi32(q[2], q[3]);
            __m256i p = _mm256_packs_epi16(p01, p23);
            p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(a + b * 32), p);
            std::memcpy(a + n_in + 4 * b, &d, 4);
            if (is_r16(wt)) {
                const __m256i s8 = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
                __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
                h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
                h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
                const int32_t c = -K * _mm_cvtsi128_si32(h);
                std::memcpy(a + n_in + 4 * nb + 4 * b, &c, 4);
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

}  // namespace latte::kernels::avx2

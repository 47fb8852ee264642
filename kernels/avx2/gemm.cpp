// AVX2 weight matmul (AVX2+FMA+F16C; compiled with only the avx2 flags). Contract: GemmFn in
// kernels/dispatch.h. As kernels/avx512/gemm.cpp with 8-lane vectors:
// - F32/F16/BF16 weights: exact conversion to f32, f32 FMA on f32 activations.
// - Q8_0/Q4_0: activations quantised once to int8 per 32-block (gemm_act_prep: 32 int8 then the
//   f32 scales of the row); per block the signed dot is maddubs(|w|, sign(x, w)) + madd (Q4_0
//   nibbles are first made signed, q-8), exact in int32, then scaled by d_w·d_x in f32.
// - Register tile 4 rows × 2 tokens (8 ymm accumulators); rows in groups of ~256 KiB of weights,
//   tokens in chunks of 64, each token tile passing over the group's rows. Each output
//   element has its own accumulator and the same operation order in every tile shape.
#include "kernels/avx2/gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

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

constexpr int kR = 4, kT = 2;
constexpr int64_t kTokChunk = 64;
// Rows per group: a group's weights (~256 KiB) stay in L2 while each token tile (in L1) passes
// over them kR rows at a time.
int64_t row_group(size_t ldw) { return std::max<int64_t>(kR, static_cast<int64_t>((256u << 10) / ldw) / kR * kR); }
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
    const int64_t group = row_group(ldw);
    for (int64_t g0 = 0; g0 < n_out; g0 += group) {
        const int64_t ge = std::min(n_out, g0 + group);
        for (int64_t t0 = 0; t0 < n_tok; t0 += kTokChunk) {
            const int64_t te = std::min(n_tok, t0 + kTokChunk);
            for (int64_t t1 = t0; t1 < te; t1 += kT) {
                const int T = static_cast<int>(std::min<int64_t>(kT, te - t1));
                for (int64_t r0 = g0; r0 < ge; r0 += kR) {
                    const int R = static_cast<int>(std::min<int64_t>(kR, ge - r0));
                    qtab<WT>[R - 1][T - 1](W + r0 * ldw, ldw, n_in, act + t1 * lda, lda, Y + t1 * ldy + r0, ldy);
                }
            }
        }
    }
}
template <GGMLType WT>
void gemm_f(const uint8_t* W, size_t ldw, int64_t n_in, int64_t n_out, const float* X, int64_t ldx, int64_t n_tok,
            float* Y, int64_t ldy) {
    const int64_t group = row_group(ldw);
    for (int64_t g0 = 0; g0 < n_out; g0 += group) {
        const int64_t ge = std::min(n_out, g0 + group);
        for (int64_t t0 = 0; t0 < n_tok; t0 += kTokChunk) {
            const int64_t te = std::min(n_tok, t0 + kTokChunk);
            for (int64_t t1 = t0; t1 < te; t1 += kT) {
                const int T = static_cast<int>(std::min<int64_t>(kT, te - t1));
                for (int64_t r0 = g0; r0 < ge; r0 += kR) {
                    const int R = static_cast<int>(std::min<int64_t>(kR, ge - r0));
                    ftab<WT>[R - 1][T - 1](W + r0 * ldw, ldw, n_in, X + t1 * ldx, ldx, Y + t1 * ldy + r0, ldy);
                }
            }
        }
    }
}

}  // namespace

size_t gemm_act_size(GGMLType wt, int64_t n_in) { return is_q(wt) ? q_act_bytes(n_in) : 0; }

void gemm_act_prep(GGMLType wt, const float* X, int64_t ldx, int64_t n_in, int64_t n_tok, void* act) {
    if (!is_q(wt)) return;
    const int64_t nb = n_in / 32;
    const size_t lda = q_act_bytes(n_in);
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
        case GGMLType::F32: return gemm_f<GGMLType::F32>(w, ldw, n_in, n_out, X, ldx, n_tok, Y, ldy);
        case GGMLType::F16: return gemm_f<GGMLType::F16>(w, ldw, n_in, n_out, X, ldx, n_tok, Y, ldy);
        case GGMLType::BF16: return gemm_f<GGMLType::BF16>(w, ldw, n_in, n_out, X, ldx, n_tok, Y, ldy);
        default: return scalar::gemm(wt, W, ldw, n_in, n_out, X, ldx, act, n_tok, Y, ldy);
    }
}

}  // namespace latte::kernels::avx2

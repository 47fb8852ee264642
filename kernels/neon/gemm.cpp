// NEON weight matmul (aarch64; compiled with only -march=armv8.2-a+dotprod). Contract: GemmFn in
// kernels/dispatch.h. The structure of kernels/avx2/gemm.cpp with 4-lane vectors and SDOT:
// - F32/F16/BF16 weights: exact conversion to f32 (f16: FCVTL, base ARMv8; bf16: a 16-bit shift),
//   f32 FMA on the f32 activations, two 4-lane accumulators per (row, token) over 8 columns at a
//   time, the tail zero-extended to 8; the row's sum is (a0 + a1) reduced pairwise.
// - Q8_0/Q4_0: activations quantised once to int8 per 32-block (gemm_act_prep: d = amax/127,
//   round to nearest even; per token n_in int8, then the nb f32 scales, padded to 64 bytes).
//   Per block the signed dot is two SDOT (vdotq_s32, int8 × int8, exact in int32; Q4_0 nibbles are
//   first made signed, q-8); 4 rows' dots are reduced pairwise into one int32x4 (a lane per row),
//   converted to f32 and accumulated as acc = fma(acc, Σq, d_w·d_x) in block order: each row's
//   lane sees the same operations in every tile, so a result does not depend on the row split.
// - Q8_0_R16 / Q4_0_R16 (16-row groups, latte/types.h): per block, four int32x4 (a lane per row);
//   per 4-byte column k, vdotq_laneq_s32 of the 16 rows' 4 bytes (u8 q+128 xor 0x80 for Q8_0_R16;
//   low / high nibbles - 8 for Q4_0_R16) with the token's 4 int8 of that column; then the same f32
//   step as above (so a row gives the bits of the same row in Q8_0 / Q4_0 on this level).
// - Q4_K_R / Q5_K_R / Q6_K_R (repacked at load): SDOT, a lane per sub-block, see kkr4 and kkr6;
//   the file K-quant types (with --no-repack) use the scalar kernel.
// - Register tiles: 4 rows × 4 tokens (q), 4 rows × 2 tokens (float), 16 rows × 2 tokens (r16),
//   1 row × 4 tokens (q4_K_r / q5_K_r / q6_K_r);
//   rows in groups of ~256 KiB of weights, tokens in chunks of 64, each token tile passing over the
//   group's rows. A tile of fewer than 4 rows reads its last row again in the unused lanes and
//   stores only its own.
#include "kernels/neon/gemm.h"

#include <arm_neon.h>

#include <algorithm>
#include <cstring>

#include "kernels/gemm_tiles.h"
#include "kernels/kquant_act.h"
#include "kernels/scalar/gemm.h"

#if !defined(__aarch64__) || !defined(__ARM_FEATURE_DOTPROD)
#error "kernels/neon/gemm.cpp needs an aarch64 target with dotprod (-march=armv8.2-a+dotprod)"
#endif

// GCC's pre-allocation scheduler hoists the r16 kernel's 32 weight loads of a block ahead of their
// dots and then spills the accumulators; without it every kernel here runs out of registers only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-schedule-insns")
#endif

namespace latte::kernels::neon {
namespace {

// Fully unrolled small loops: GCC 12 at -O3 otherwise keeps the accumulator arrays in memory,
// storing them on every iteration.
#define LATTE_NEON_UNROLL _Pragma("GCC unroll 16")

bool is_q(GGMLType t) { return t == GGMLType::Q8_0 || t == GGMLType::Q4_0; }

// Activation row of a quantised type: n_in int8, then f32 d_x[nb]; padded to 64 bytes.
size_t act_bytes(int64_t n_in) { return (static_cast<size_t>(n_in + 4 * (n_in / 32)) + 63) & ~size_t{63}; }

inline float32x4_t h4_to_f32(const uint16_t* h) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h))); }

inline void store_rows(float* y, float32x4_t v, int R) {
    if (R == 4) {
        vst1q_f32(y, v);
    } else {
        float tmp[4];
        vst1q_f32(tmp, v);
        LATTE_NEON_UNROLL for (int r = 0; r < R; ++r) y[r] = tmp[r];
    }
}

// ---- Q8_0 / Q4_0, row-major ----------------------------------------------------------------

template <GGMLType WT>
constexpr size_t kBlockBytes = WT == GGMLType::Q8_0 ? 34 : 18;

// One weight block as 2 × 16 signed int8 (elements 0..15, 16..31).
template <GGMLType WT>
inline void load_wq(const uint8_t* p, int8x16_t& w0, int8x16_t& w1) {
    if constexpr (WT == GGMLType::Q8_0) {
        w0 = vld1q_s8(reinterpret_cast<const int8_t*>(p + 2));
        w1 = vld1q_s8(reinterpret_cast<const int8_t*>(p + 18));
    } else {
        const uint8x16_t v = vld1q_u8(p + 2);
        const int8x16_t eight = vdupq_n_s8(8);
        w0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F))), eight);
        w1 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), eight);
    }
}

// R (1..4) rows × T tokens; lane r of acc[t] is row r.
template <GGMLType WT, int T>
void kq(const uint8_t* w, size_t ldw, int R, int64_t nb, const uint8_t* act, size_t lda, float* Y, int64_t ldy) {
    constexpr size_t bs = kBlockBytes<WT>;
    const size_t n_in = static_cast<size_t>(nb) * 32;
    const uint8_t* p[4];
    LATTE_NEON_UNROLL for (int r = 0; r < 4; ++r) p[r] = w + static_cast<size_t>(std::min(r, R - 1)) * ldw;
    float32x4_t acc[T];
    LATTE_NEON_UNROLL for (int t = 0; t < T; ++t) acc[t] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; ++b) {
        int8x16_t w0[4], w1[4];
        uint16_t h[4];
        LATTE_NEON_UNROLL for (int r = 0; r < 4; ++r) {
            const uint8_t* q = p[r] + static_cast<size_t>(b) * bs;
            load_wq<WT>(q, w0[r], w1[r]);
            std::memcpy(&h[r], q, 2);
        }
        const float32x4_t dw = h4_to_f32(h);
        LATTE_NEON_UNROLL for (int t = 0; t < T; ++t) {
            const uint8_t* a = act + t * lda;
            const int8x16_t x0 = vld1q_s8(reinterpret_cast<const int8_t*>(a + 32 * b));
            const int8x16_t x1 = vld1q_s8(reinterpret_cast<const int8_t*>(a + 32 * b + 16));
            float dx;
            std::memcpy(&dx, a + n_in + 4 * b, 4);
            int32x4_t s[4];
            LATTE_NEON_UNROLL for (int r = 0; r < 4; ++r) s[r] = vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0[r], x0), w1[r], x1);
            const int32x4_t q = vpaddq_s32(vpaddq_s32(s[0], s[1]), vpaddq_s32(s[2], s[3]));
            acc[t] = vfmaq_f32(acc[t], vcvtq_f32_s32(q), vmulq_n_f32(dw, dx));
        }
    }
    LATTE_NEON_UNROLL for (int t = 0; t < T; ++t) store_rows(Y + t * ldy, acc[t], R);
}

// ---- Q8_0_R16 / Q4_0_R16 -------------------------------------------------------------------

// Column k (0..7) of a Q8_0_R16 block: 16 rows' bytes 4k..4k+3 against the tokens' int8 4k..4k+3.
template <int K, int T>
inline void r16q8_col(const uint8_t* wb, const int8x16_t* x0, const int8x16_t* x1, int32x4_t (*s)[4]) {
    int8x16_t wv[4];
    LATTE_NEON_UNROLL for (int h = 0; h < 4; ++h)
        wv[h] = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(wb + 32 + 64 * K + 16 * h), vdupq_n_u8(0x80)));
    LATTE_NEON_UNROLL for (int t = 0; t < T; ++t)
        LATTE_NEON_UNROLL for (int h = 0; h < 4; ++h) {
            if constexpr (K < 4) s[t][h] = vdotq_laneq_s32(s[t][h], wv[h], x0[t], K);
            else s[t][h] = vdotq_laneq_s32(s[t][h], wv[h], x1[t], K - 4);
        }
}
// Column k (0..3) of a Q4_0_R16 block: low nibbles are elements 4k.., high ones 16+4k...
template <int K, int T>
inline void r16q4_col(const uint8_t* wb, const int8x16_t* x0, const int8x16_t* x1, int32x4_t (*s)[4]) {
    int8x16_t lo[4], hi[4];
    const int8x16_t eight = vdupq_n_s8(8);
    LATTE_NEON_UNROLL for (int h = 0; h < 4; ++h) {
        const uint8x16_t v = vld1q_u8(wb + 32 + 64 * K + 16 * h);
        lo[h] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F))), eight);
        hi[h] = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), eight);
    }
    LATTE_NEON_UNROLL for (int t = 0; t < T; ++t)
        LATTE_NEON_UNROLL for (int h = 0; h < 4; ++h) {
            s[t][h] = vdotq_laneq_s32(s[t][h], lo[h], x0[t], K);
            s[t][h] = vdotq_laneq_s32(s[t][h], hi[h], x1[t], K);
        }
}

// One 16-row group × T tokens; lane r of acc[t][h] is row 4h + r.
template <GGMLType WT, int T>
void kr16(const uint8_t* w, int64_t nb, const uint8_t* act, size_t lda, float* Y, int64_t ldy) {
    constexpr size_t gbs = WT == GGMLType::Q8_0_R16 ? 544 : 288;
    const size_t n_in = static_cast<size_t>(nb) * 32;
    float32x4_t acc[T][4];
    LATTE_NEON_UNROLL for (int t = 0; t < T; ++t)
        LATTE_NEON_UNROLL for (int h = 0; h < 4; ++h) acc[t][h] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* wb = w + static_cast<size_t>(b) * gbs;
        int8x16_t x0[T], x1[T];
        int32x4_t s[T][4];
        LATTE_NEON_UNROLL for (int t = 0; t < T; ++t) {
            x0[t] = vld1q_s8(reinterpret_cast<const int8_t*>(act + t * lda + 32 * b));
            x1[t] = vld1q_s8(reinterpret_cast<const int8_t*>(act + t * lda + 32 * b + 16));
            LATTE_NEON_UNROLL for (int h = 0; h < 4; ++h) s[t][h] = vdupq_n_s32(0);
        }
        if constexpr (WT == GGMLType::Q8_0_R16) {
            r16q8_col<0, T>(wb, x0, x1, s);
            r16q8_col<1, T>(wb, x0, x1, s);
            r16q8_col<2, T>(wb, x0, x1, s);
            r16q8_col<3, T>(wb, x0, x1, s);
            r16q8_col<4, T>(wb, x0, x1, s);
            r16q8_col<5, T>(wb, x0, x1, s);
            r16q8_col<6, T>(wb, x0, x1, s);
            r16q8_col<7, T>(wb, x0, x1, s);
        } else {
            r16q4_col<0, T>(wb, x0, x1, s);
            r16q4_col<1, T>(wb, x0, x1, s);
            r16q4_col<2, T>(wb, x0, x1, s);
            r16q4_col<3, T>(wb, x0, x1, s);
        }
        float32x4_t dw[4];
        LATTE_NEON_UNROLL for (int h = 0; h < 4; ++h) {
            uint16_t hh[4];
            std::memcpy(hh, wb + 8 * h, 8);
            dw[h] = h4_to_f32(hh);
        }
        LATTE_NEON_UNROLL for (int t = 0; t < T; ++t) {
            float dx;
            std::memcpy(&dx, act + t * lda + n_in + 4 * b, 4);
            LATTE_NEON_UNROLL for (int h = 0; h < 4; ++h) acc[t][h] = vfmaq_f32(acc[t][h], vcvtq_f32_s32(s[t][h]), vmulq_n_f32(dw[h], dx));
        }
    }
    LATTE_NEON_UNROLL for (int t = 0; t < T; ++t)
        LATTE_NEON_UNROLL for (int h = 0; h < 4; ++h) vst1q_f32(Y + t * ldy + 4 * h, acc[t][h]);
}

// ---- F32 / F16 / BF16 ----------------------------------------------------------------------

template <GGMLType WT>
constexpr size_t kElemBytes = WT == GGMLType::F32 ? 4 : 2;

template <GGMLType WT>
inline float32x4_t load_wf(const uint8_t* p) {
    if constexpr (WT == GGMLType::F32) {
        return vld1q_f32(reinterpret_cast<const float*>(p));
    } else {
        uint16_t h[4];
        std::memcpy(h, p, 8);
        if constexpr (WT == GGMLType::F16) return h4_to_f32(h);
        else return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(h), 16));
    }
}

// The first n (0..4) elements at p, zero-extended to 4 (the tail; fixed-size copies, no library
// call that would make the accumulators live across it).
template <GGMLType WT>
inline float32x4_t load_wf_part(const uint8_t* p, size_t n) {
    float f[4];
    LATTE_NEON_UNROLL for (int i = 0; i < 4; ++i) {
        f[i] = 0.0f;
        if (static_cast<size_t>(i) < n) {
            if constexpr (WT == GGMLType::F32) {
                std::memcpy(&f[i], p + 4 * i, 4);
            } else {
                uint16_t h;
                std::memcpy(&h, p + 2 * i, 2);
                if constexpr (WT == GGMLType::F16) {
                    f[i] = vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
                } else {
                    const uint32_t u = static_cast<uint32_t>(h) << 16;
                    std::memcpy(&f[i], &u, 4);
                }
            }
        }
    }
    return vld1q_f32(f);
}
inline float32x4_t load_x_part(const float* x, size_t n) {
    float f[4];
    LATTE_NEON_UNROLL for (int i = 0; i < 4; ++i) f[i] = static_cast<size_t>(i) < n ? x[i] : 0.0f;
    return vld1q_f32(f);
}

// R (1..4) rows × T tokens.
template <GGMLType WT, int T>
void kf(const uint8_t* w, size_t ldw, int R, int64_t n_in, const float* X, int64_t ldx, float* Y, int64_t ldy) {
    constexpr size_t es = kElemBytes<WT>;
    const uint8_t* p[4];
    LATTE_NEON_UNROLL for (int r = 0; r < 4; ++r) p[r] = w + static_cast<size_t>(std::min(r, R - 1)) * ldw;
    float32x4_t acc[4][T][2];
    LATTE_NEON_UNROLL for (int r = 0; r < 4; ++r)
        LATTE_NEON_UNROLL for (int t = 0; t < T; ++t) acc[r][t][0] = acc[r][t][1] = vdupq_n_f32(0.0f);
    // One loop for the body and the tail (zero-extended to 8 columns), so that the accumulators
    // have a single use and stay in registers.
    for (int64_t k = 0; k < n_in; k += 8) {
        const bool full = k + 8 <= n_in;
        const size_t n = full ? 8 : static_cast<size_t>(n_in - k);
        float32x4_t wv[4][2];
        LATTE_NEON_UNROLL for (int r = 0; r < 4; ++r) {
            if (full) {
                wv[r][0] = load_wf<WT>(p[r] + k * es);
                wv[r][1] = load_wf<WT>(p[r] + (k + 4) * es);
            } else {
                wv[r][0] = load_wf_part<WT>(p[r] + k * es, std::min<size_t>(n, 4));
                wv[r][1] = load_wf_part<WT>(p[r] + (k + 4) * es, n > 4 ? n - 4 : 0);
            }
        }
        LATTE_NEON_UNROLL for (int t = 0; t < T; ++t) {
            float32x4_t x0, x1;
            if (full) {
                x0 = vld1q_f32(X + t * ldx + k);
                x1 = vld1q_f32(X + t * ldx + k + 4);
            } else {
                x0 = load_x_part(X + t * ldx + k, std::min<size_t>(n, 4));
                x1 = load_x_part(X + t * ldx + k + 4, n > 4 ? n - 4 : 0);
            }
            LATTE_NEON_UNROLL for (int r = 0; r < 4; ++r) {
                acc[r][t][0] = vfmaq_f32(acc[r][t][0], wv[r][0], x0);
                acc[r][t][1] = vfmaq_f32(acc[r][t][1], wv[r][1], x1);
            }
        }
    }
    LATTE_NEON_UNROLL for (int t = 0; t < T; ++t) {
        float32x4_t s[4];
        LATTE_NEON_UNROLL for (int r = 0; r < 4; ++r) s[r] = vaddq_f32(acc[r][t][0], acc[r][t][1]);
        store_rows(Y + t * ldy, vpaddq_f32(vpaddq_f32(s[0], s[1]), vpaddq_f32(s[2], s[3])), R);
    }
}

// ---- drivers ---------------------------------------------------------------------------------

// Tiles of up to kR rows, driven by for_each_gemm_tile (kernels/gemm_tiles.h): a row group's
// weights (~256 KiB) stay in L2 while each token tile passes over them.
constexpr int kR = 4;

template <GGMLType WT>
void gemm_q(const uint8_t* W, size_t ldw, int64_t n_in, int64_t n_out, const uint8_t* act, int64_t n_tok, float* Y,
            int64_t ldy) {
    constexpr int kT = 4;
    const size_t lda = act_bytes(n_in);
    const int64_t nb = n_in / 32;
    for_each_gemm_tile(n_out, n_tok, kR, kT, ldw, [&](int64_t r0, int R, int64_t t1, int T) {
        const uint8_t* w = W + r0 * ldw;
        const uint8_t* a = act + t1 * lda;
        float* y = Y + t1 * ldy + r0;
        switch (T) {
            case 1: kq<WT, 1>(w, ldw, R, nb, a, lda, y, ldy); break;
            case 2: kq<WT, 2>(w, ldw, R, nb, a, lda, y, ldy); break;
            case 3: kq<WT, 3>(w, ldw, R, nb, a, lda, y, ldy); break;
            default: kq<WT, 4>(w, ldw, R, nb, a, lda, y, ldy); break;
        }
    });
}

template <GGMLType WT>
void gemm_r16(const uint8_t* W, size_t ldw, int64_t n_in, int64_t n_out, const uint8_t* act, int64_t n_tok, float* Y,
              int64_t ldy) {
    const size_t lda = act_bytes(n_in), gs = 16 * ldw;
    const int64_t nb = n_in / 32;
    for_each_gemm_tile(n_out / 16, n_tok, 1, 2, gs, [&](int64_t g, int, int64_t t1, int T) {
        if (T == 2) kr16<WT, 2>(W + g * gs, nb, act + t1 * lda, lda, Y + t1 * ldy + 16 * g, ldy);
        else kr16<WT, 1>(W + g * gs, nb, act + t1 * lda, lda, Y + t1 * ldy + 16 * g, ldy);
    });
}

template <GGMLType WT>
void gemm_f(const uint8_t* W, size_t ldw, int64_t n_in, int64_t n_out, const float* X, int64_t ldx, int64_t n_tok,
            float* Y, int64_t ldy) {
    constexpr int kT = 2;
    for_each_gemm_tile(n_out, n_tok, kR, kT, ldw, [&](int64_t r0, int R, int64_t t1, int T) {
        if (T == 2) kf<WT, 2>(W + r0 * ldw, ldw, R, n_in, X + t1 * ldx, ldx, Y + t1 * ldy + r0, ldy);
        else kf<WT, 1>(W + r0 * ldw, ldw, R, n_in, X + t1 * ldx, ldx, Y + t1 * ldy + r0, ldy);
    });
}

// ---- q4_K_r / q5_K_r / q6_K_r (Q4_K / Q5_K / Q6_K repacked at load, latte/types.h) ---------------
// Activation per token (as the x86 levels' K-quant one): per 256-block the int8 q (d_x = amax/127,
// round to nearest even) in an order matching the weights' 4-byte SDOT groups (q4_K_r / q5_K_r:
// vector e (32 bytes) byte 4l+i is x[32l+4e+i]; q6_K_r: see kkr6), then f32 d_x[nb], then int16
// sums of each 16 natural-order values [nb][16] (q6_K_r leaves them unused).
// Per row, block and token: sub-block l's dot Σ q·x is the int32 lane l of SDOTs over the 8 element
// vectors (bytes 0-15: sub-blocks 0-3, 16-31: 4-7; q 0..15 as int8), times its 6-bit scale, summed
// (|Σ| < 2^25: exact); the mins Σ m_l·(x sums of sub-block l) exact in int32 too; then in f32
// acc += d·d_x·Σ - dmin·d_x·mins, in block order. The int32 block totals are every level's, so the
// bound is dispatch.h's K-quant one. q5_K_r: the same with the fifth bit.
// (its size: k_act_bytes, kernels/kquant_act.h)

void kr_act_prep_row(const float* x, int64_t n_in, bool q6, uint8_t* a) {
    const int64_t nb = n_in / 256;
    for (int64_t b = 0; b < nb; ++b) {
        const float* xb = x + 256 * b;
        float32x4_t m = vdupq_n_f32(0.0f);
        for (int i = 0; i < 64; ++i) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(xb + 4 * i)));
        const float amax = vmaxvq_f32(m), d = amax / 127.0f;
        const float32x4_t s = vdupq_n_f32(amax > 0.0f ? 127.0f / amax : 0.0f);
        int8_t q[256];
        for (int i = 0; i < 64; ++i) {
            const int32x4_t v = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(xb + 4 * i), s));
            const int16x4_t h = vqmovn_s32(v);
            const int8x8_t c = vqmovn_s16(vcombine_s16(h, h));
            vst1_lane_s32(reinterpret_cast<int32_t*>(q + 4 * i), vreinterpret_s32_s8(c), 0);
        }
        int16_t bs[16];
        for (int g = 0; g < 16; ++g) bs[g] = static_cast<int16_t>(vaddlvq_s8(vld1q_s8(q + 16 * g)));
        uint8_t* blk = a + 256 * b;
        if (q6) {
            for (int P = 0; P < 4; ++P)
                for (int k = 0; k < 16; ++k) std::memcpy(blk + 64 * P + 4 * k, q + 16 * k + 4 * P, 4);
        } else {
            for (int e = 0; e < 8; ++e)
                for (int l = 0; l < 8; ++l) std::memcpy(blk + 32 * e + 4 * l, q + 32 * l + 4 * e, 4);
        }
        std::memcpy(a + n_in + 4 * b, &d, 4);
        std::memcpy(a + n_in + 4 * nb + 32 * b, bs, 32);
    }
}

inline float h2f_k(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

// One q4_K_r (Q5 false) or q5_K_r (Q5 true: qh[32] after the scales, bit e of byte 4l+i the fifth
// bit of element vector e's byte 4l+i; q 0..31, |Σ| < 2^26, still exact) row × T tokens.
template <bool Q5, int T>
void kkr4(const uint8_t* w, int64_t nb, const uint8_t* act, size_t lda, float* Y, int64_t ldy) {
    const size_t n_in = static_cast<size_t>(nb) * 256, off_d = n_in, off_s = n_in + 4 * static_cast<size_t>(nb);
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    constexpr size_t bs = Q5 ? 176 : 144, ql = Q5 ? 48 : 16;
    float acc[T] = {};
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* p = w + bs * b;
        const float d = h2f_k(p), dmin = h2f_k(p + 2);
        int32_t sc[8], mn[8];
        for (int l = 0; l < 8; ++l) kr_scale_min(p + 4, l, sc[l], mn[l]);
        const int32x4_t sc0 = vld1q_s32(sc), sc1 = vld1q_s32(sc + 4);
        int8x16_t q[8][2];  // element vector e, half h
        LATTE_NEON_UNROLL for (int c = 0; c < 4; ++c) {
            const uint8x16_t v0 = vld1q_u8(p + ql + 32 * c), v1 = vld1q_u8(p + ql + 16 + 32 * c);
            q[c][0] = vreinterpretq_s8_u8(vandq_u8(v0, m4));
            q[c][1] = vreinterpretq_s8_u8(vandq_u8(v1, m4));
            q[c + 4][0] = vreinterpretq_s8_u8(vshrq_n_u8(v0, 4));
            q[c + 4][1] = vreinterpretq_s8_u8(vshrq_n_u8(v1, 4));
        }
        if constexpr (Q5) {
            const uint8x16_t h0 = vld1q_u8(p + 16), h1 = vld1q_u8(p + 32), b4 = vdupq_n_u8(0x10);
            LATTE_NEON_UNROLL for (int e = 0; e < 8; ++e) {  // bit e to bit 4
                const int8x16_t sh = vdupq_n_s8(static_cast<int8_t>(4 - e));
                q[e][0] = vorrq_s8(q[e][0], vreinterpretq_s8_u8(vandq_u8(vshlq_u8(h0, sh), b4)));
                q[e][1] = vorrq_s8(q[e][1], vreinterpretq_s8_u8(vandq_u8(vshlq_u8(h1, sh), b4)));
            }
        }
        LATTE_NEON_UNROLL for (int t = 0; t < T; ++t) {
            const uint8_t* a = act + t * lda;
            const int8_t* x = reinterpret_cast<const int8_t*>(a + 256 * b);
            int32x4_t s0 = vdupq_n_s32(0), s1 = vdupq_n_s32(0);
            LATTE_NEON_UNROLL for (int e = 0; e < 8; ++e) {
                s0 = vdotq_s32(s0, q[e][0], vld1q_s8(x + 32 * e));
                s1 = vdotq_s32(s1, q[e][1], vld1q_s8(x + 32 * e + 16));
            }
            const int32_t tot = vaddvq_s32(vaddq_s32(vmulq_s32(s0, sc0), vmulq_s32(s1, sc1)));
            int16_t bs[16];
            std::memcpy(bs, a + off_s + 32 * b, 32);
            int32_t mins = 0;
            for (int l = 0; l < 8; ++l) mins += mn[l] * (bs[2 * l] + bs[2 * l + 1]);
            float dx;
            std::memcpy(&dx, a + off_d + 4 * b, 4);
            acc[t] += d * dx * static_cast<float>(tot) - dmin * dx * static_cast<float>(mins);
        }
    }
    for (int t = 0; t < T; ++t) Y[t * ldy] = acc[t];
}

// One q6_K_r row × T tokens. An element vector holds a sub-block's values 2 bytes at a time (byte
// 2k+i is element 16k+2e+i), and an SDOT lane sums 4 bytes, so element vectors 2P and 2P+1 are
// interleaved by 16-bit lanes (ZIP1/ZIP2, once per block for all tokens): 32-bit lane k of pair P
// is elements 16k+4P..16k+4P+3, the order kr_act_prep_row gives the activation here. The ql
// vectors c, c+1 are zipped before their nibbles are split (low: pair c/2, high: pair c/2+2), and
// each qh vector with itself, whose even / odd vector's 2 bits then sit in bytes 0-1 / 2-3 of a word
// and are moved to bits 4-5 by one per-byte shift. q-32 (-32..31) is signed int8 as it stands, so
// the offset is inside the dots and the bsums are not needed: lane m of s[g] is sub-block 4g+m's
// Σ(q-32)·x, |.| <= 16·32·127 = 65024, times its int8 scale (|sc| <= 128) and summed over the 16
// sub-blocks: |Σ| < 2^27, exact in int32, and as integers the x86 kernels' Σ sc·(Σq·x - 32·bsum).
template <int T>
void kkr6(const uint8_t* w, int64_t nb, const uint8_t* act, size_t lda, float* Y, int64_t ldy) {
    const size_t off_d = static_cast<size_t>(nb) * 256;
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m30 = vdupq_n_u8(0x30);
    const int8x16_t k32 = vdupq_n_s8(32);
    // Per byte of a zipped qh word: pairs 0 / 2 take bits 0-1 / 2-3 of their qh vector, 1 / 3 bits 4-5 / 6-7.
    static constexpr int8_t kShLo[16] = {4, 4, 2, 2, 4, 4, 2, 2, 4, 4, 2, 2, 4, 4, 2, 2};
    static constexpr int8_t kShHi[16] = {0, 0, -2, -2, 0, 0, -2, -2, 0, 0, -2, -2, 0, 0, -2, -2};
    const int8x16_t sh_lo = vld1q_s8(kShLo), sh_hi = vld1q_s8(kShHi);
    float acc[T] = {};
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* p = w + 210 * b;
        const float d = h2f_k(p + 208);
        const int8x16_t sc8 = vld1q_s8(reinterpret_cast<const int8_t*>(p + 192));
        const int16x8_t sc16[2] = {vmovl_s8(vget_low_s8(sc8)), vmovl_high_s8(sc8)};
        int32x4_t sc[4];  // lane m of sc[g]: sub-block 4g+m's scale
        LATTE_NEON_UNROLL for (int h = 0; h < 2; ++h) {
            sc[2 * h] = vmovl_s16(vget_low_s16(sc16[h]));
            sc[2 * h + 1] = vmovl_high_s16(sc16[h]);
        }
        int8x16_t q[4][4];  // pair P, sub-blocks 4g..4g+3
        LATTE_NEON_UNROLL for (int h = 0; h < 2; ++h) {  // bytes 16h.. of a vector: sub-blocks 8h..8h+7
            uint16x8_t l[4];
            LATTE_NEON_UNROLL for (int c = 0; c < 4; ++c) l[c] = vreinterpretq_u16_u8(vld1q_u8(p + 32 * c + 16 * h));
            const uint16x8_t h0 = vreinterpretq_u16_u8(vld1q_u8(p + 128 + 16 * h));
            const uint16x8_t h1 = vreinterpretq_u16_u8(vld1q_u8(p + 160 + 16 * h));
            auto mk = [&](uint8x16_t lo, uint8x16_t hz, int8x16_t sh) {
                return vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, vandq_u8(vshlq_u8(hz, sh), m30))), k32);
            };
            LATTE_NEON_UNROLL for (int z = 0; z < 2; ++z) {
                const int g = 2 * h + z;
                const uint8x16_t a = vreinterpretq_u8_u16(z ? vzip2q_u16(l[0], l[1]) : vzip1q_u16(l[0], l[1]));
                const uint8x16_t c = vreinterpretq_u8_u16(z ? vzip2q_u16(l[2], l[3]) : vzip1q_u16(l[2], l[3]));
                const uint8x16_t z0 = vreinterpretq_u8_u16(z ? vzip2q_u16(h0, h0) : vzip1q_u16(h0, h0));
                const uint8x16_t z1 = vreinterpretq_u8_u16(z ? vzip2q_u16(h1, h1) : vzip1q_u16(h1, h1));
                q[0][g] = mk(vandq_u8(a, m4), z0, sh_lo);
                q[1][g] = mk(vandq_u8(c, m4), z0, sh_hi);
                q[2][g] = mk(vshrq_n_u8(a, 4), z1, sh_lo);
                q[3][g] = mk(vshrq_n_u8(c, 4), z1, sh_hi);
            }
        }
        LATTE_NEON_UNROLL for (int t = 0; t < T; ++t) {
            const uint8_t* a = act + t * lda;
            const int8_t* x = reinterpret_cast<const int8_t*>(a + 256 * b);
            int32x4_t s[4];
            LATTE_NEON_UNROLL for (int g = 0; g < 4; ++g) s[g] = vdupq_n_s32(0);
            LATTE_NEON_UNROLL for (int P = 0; P < 4; ++P)
                LATTE_NEON_UNROLL for (int g = 0; g < 4; ++g)
                    s[g] = vdotq_s32(s[g], q[P][g], vld1q_s8(x + 64 * P + 16 * g));
            int32x4_t v = vmulq_s32(s[0], sc[0]);
            LATTE_NEON_UNROLL for (int g = 1; g < 4; ++g) v = vmlaq_s32(v, s[g], sc[g]);
            const int32_t tot = vaddvq_s32(v);
            float dx;
            std::memcpy(&dx, a + off_d + 4 * b, 4);
            acc[t] += d * dx * static_cast<float>(tot);
        }
    }
    for (int t = 0; t < T; ++t) Y[t * ldy] = acc[t];
}

// One row × 1..4 tokens: the kernel for T tokens is tab[T - 1].
using KrKernel = void (*)(const uint8_t*, int64_t, const uint8_t*, size_t, float*, int64_t);
constexpr KrKernel kKr4[4] = {kkr4<false, 1>, kkr4<false, 2>, kkr4<false, 3>, kkr4<false, 4>};
constexpr KrKernel kKr5[4] = {kkr4<true, 1>, kkr4<true, 2>, kkr4<true, 3>, kkr4<true, 4>};
constexpr KrKernel kKr6[4] = {kkr6<1>, kkr6<2>, kkr6<3>, kkr6<4>};

void gemm_kr(const KrKernel* tab, const uint8_t* W, size_t ldw, int64_t n_in, int64_t n_out, const uint8_t* act,
             int64_t n_tok, float* Y, int64_t ldy) {
    const int64_t nb = n_in / 256;
    const size_t lda = k_act_bytes(n_in);
    for_each_gemm_tile(n_out, n_tok, 1, 4, ldw, [&](int64_t r0, int, int64_t t1, int T) {
        tab[T - 1](W + r0 * ldw, nb, act + t1 * lda, lda, Y + t1 * ldy + r0, ldy);
    });
}

}  // namespace

size_t gemm_act_size(GGMLType wt, int64_t n_in) {
    if (is_kr(wt)) return k_act_bytes(n_in);
    return is_q(wt) || is_r16(wt) ? act_bytes(n_in) : 0;
}

void gemm_act_prep(GGMLType wt, const float* X, int64_t ldx, int64_t n_in, int64_t n_tok, void* act) {
    if (is_kr(wt)) {
        for (int64_t t = 0; t < n_tok; ++t)
            kr_act_prep_row(X + t * ldx, n_in, wt == GGMLType::Q6_K_R,
                            static_cast<uint8_t*>(act) + t * k_act_bytes(n_in));
        return;
    }
    if (!is_q(wt) && !is_r16(wt)) return;
    const int64_t nb = n_in / 32;
    const size_t lda = act_bytes(n_in);
    for (int64_t t = 0; t < n_tok; ++t) {
        const float* x = X + t * ldx;
        uint8_t* a = static_cast<uint8_t*>(act) + t * lda;
        for (int64_t b = 0; b < nb; ++b) {
            float32x4_t v[8];
            float32x4_t m = vdupq_n_f32(0.0f);
            LATTE_NEON_UNROLL for (int i = 0; i < 8; ++i) {
                v[i] = vld1q_f32(x + 32 * b + 4 * i);
                m = vmaxq_f32(m, vabsq_f32(v[i]));
            }
            const float amax = vmaxvq_f32(m);
            const float d = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
            int16x8_t h[4];
            LATTE_NEON_UNROLL for (int i = 0; i < 4; ++i)
                h[i] = vcombine_s16(vqmovn_s32(vcvtnq_s32_f32(vmulq_n_f32(v[2 * i], id))),
                                    vqmovn_s32(vcvtnq_s32_f32(vmulq_n_f32(v[2 * i + 1], id))));
            vst1q_s8(reinterpret_cast<int8_t*>(a + 32 * b), vcombine_s8(vqmovn_s16(h[0]), vqmovn_s16(h[1])));
            vst1q_s8(reinterpret_cast<int8_t*>(a + 32 * b + 16), vcombine_s8(vqmovn_s16(h[2]), vqmovn_s16(h[3])));
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
        case GGMLType::Q8_0_R16: return gemm_r16<GGMLType::Q8_0_R16>(w, ldw, n_in, n_out, a, n_tok, Y, ldy);
        case GGMLType::Q4_0_R16: return gemm_r16<GGMLType::Q4_0_R16>(w, ldw, n_in, n_out, a, n_tok, Y, ldy);
        case GGMLType::Q4_K_R: return gemm_kr(kKr4, w, ldw, n_in, n_out, a, n_tok, Y, ldy);
        case GGMLType::Q5_K_R: return gemm_kr(kKr5, w, ldw, n_in, n_out, a, n_tok, Y, ldy);
        case GGMLType::Q6_K_R: return gemm_kr(kKr6, w, ldw, n_in, n_out, a, n_tok, Y, ldy);
        case GGMLType::F32: return gemm_f<GGMLType::F32>(w, ldw, n_in, n_out, X, ldx, n_tok, Y, ldy);
        case GGMLType::F16: return gemm_f<GGMLType::F16>(w, ldw, n_in, n_out, X, ldx, n_tok, Y, ldy);
        case GGMLType::BF16: return gemm_f<GGMLType::BF16>(w, ldw, n_in, n_out, X, ldx, n_tok, Y, ldy);
        default: return scalar::gemm(wt, W, ldw, n_in, n_out, X, ldx, act, n_tok, Y, ldy);
    }
}

}  // namespace latte::kernels::neon

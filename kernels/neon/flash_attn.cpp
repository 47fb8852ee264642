// NEON attention kernels (aarch64; compiled with only -march=armv8.2-a+dotprod).
//
// The structure of kernels/avx512/flash_attn.cpp, 4 lanes wide. One flash (online-softmax, tiled)
// kernel serves "-fa on", "-fa off" (attn_plain calls it: the same softmax without the full score
// row) and the flash-decoding partials. Per call:
//   - query rows in superblocks of kRowsSB, KV in tiles of kTile = 64 rows;
//   - per tile the K rows are packed once, transposed so that a vector holds 4 KV rows
//     (f32 for f32/f16/bf16 caches: Kp[k][j]; int8 for q8_0/q8_KV: Kp[k/4][j][4], as sdot wants),
//     rows past the tile's end are zero; V rows are converted to f32 once per tile (f32 V is read
//     in place);
//   - S = Q Kᵀ for up to 4 query rows × 16 KV rows per microkernel pass: vfmaq_laneq_f32 (f32), or
//     sdot (vdotq_laneq_s32, signed × signed: no offset or header sum needed) with the query
//     quantised on the fly to int8 — q8_KV: one scale per row, one int32 dot per (query, KV) row,
//     then × dq·dk; q8_0: one scale per 32-block, an int32 dot per block, accumulated in f32;
//   - online softmax per query row (running max m, sum l, O rescaled while it is loaded for P·V);
//   - O += P V in f32 for 4 rows × 16 columns per pass.
// f16 converts with FCVTL (vcvt_f32_f16: base ARMv8, no +fp16 needed), bf16 by a 16-bit shift.
// Shapes outside Dk % 32 == 0 (q8 types) / Dk % 4 == 0 (float types) and Dv % 16 == 0 (q8_0 V:
// Dv % 32 == 0) go to the scalar kernel.
#include "kernels/neon/flash_attn.h"

#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "kernels/scalar/flash_attn.h"
#include "kernels/scratch.h"

#if !defined(__aarch64__) || !defined(__ARM_FEATURE_DOTPROD)
#error "kernels/neon/flash_attn.cpp needs an aarch64 target with dotprod (-march=armv8.2-a+dotprod)"
#endif

namespace latte::kernels::neon {
namespace {

constexpr int kTile = 64;    // KV rows per tile (16 vectors of 4)
constexpr int kRowsSB = 64;  // query rows per superblock
constexpr int kRB = 4;       // query rows per score / softmax / P·V block
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Scratch {
    Buf kp, ks, vb, qq, qd, s, st;
};
Scratch& scratch() {
    static thread_local Scratch s;
    return s;
}

inline float h2f(uint16_t h) { return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0); }

// e^x for x <= 0; x < -87 (e^-87 ~ 1.6e-38, incl. -inf) gives 0. 2^n · poly(r), |r| <= ln2/2,
// degree 6 (rel. error ~2e-7), as the x86 kernels.
inline float32x4_t exp_ps(float32x4_t x) {
    const uint32x4_t tiny = vcltq_f32(x, vdupq_n_f32(-87.0f));
    x = vmaxq_f32(x, vdupq_n_f32(-87.0f));
    const float32x4_t n = vrndnq_f32(vmulq_n_f32(x, 1.44269504088896341f));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693145751953125f));
    r = vfmsq_f32(r, n, vdupq_n_f32(1.428606765330187e-06f));
    float32x4_t p = vdupq_n_f32(1.0f / 720);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 120), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 24), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 6), p, r);
    p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    // n in [-126, 0]: 2^n is a normal float
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vbslq_f32(tiny, vdupq_n_f32(0.0f), vmulq_f32(p, vreinterpretq_f32_s32(e)));
}

// In-place transpose of 4 vectors of 4 32-bit lanes (bits moved as they are).
inline void transpose4(float32x4_t& a, float32x4_t& b, float32x4_t& c, float32x4_t& d) {
    const float64x2_t t0 = vreinterpretq_f64_f32(vtrn1q_f32(a, b)), t1 = vreinterpretq_f64_f32(vtrn2q_f32(a, b));
    const float64x2_t t2 = vreinterpretq_f64_f32(vtrn1q_f32(c, d)), t3 = vreinterpretq_f64_f32(vtrn2q_f32(c, d));
    a = vreinterpretq_f32_f64(vtrn1q_f64(t0, t2));
    b = vreinterpretq_f32_f64(vtrn1q_f64(t1, t3));
    c = vreinterpretq_f32_f64(vtrn2q_f64(t0, t2));
    d = vreinterpretq_f32_f64(vtrn2q_f64(t1, t3));
}

// 4 elements of a float-type row at element k, as f32.
template <GGMLType T>
inline float32x4_t load4(const uint8_t* row, int k) {
    if constexpr (T == GGMLType::F16) {
        return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(row) + k)));
    } else if constexpr (T == GGMLType::BF16) {
        return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(reinterpret_cast<const uint16_t*>(row) + k), 16));
    } else {
        return vld1q_f32(reinterpret_cast<const float*>(row) + k);
    }
}

// Packs tile rows [0, npad) of a float-type K as f32 Kp[k][kTile]; rows >= nt are 0.
template <GGMLType T>
void pack_k_float(const uint8_t* K, size_t ldk, int nt, int npad, int Dk, float* kp) {
    const float32x4_t z = vdupq_n_f32(0.0f);
    for (int j0 = 0; j0 < npad; j0 += 4) {
        const uint8_t* r0 = K + static_cast<size_t>(j0) * ldk;
        const uint8_t* r1 = r0 + ldk;
        const uint8_t* r2 = r1 + ldk;
        const uint8_t* r3 = r2 + ldk;
        for (int k0 = 0; k0 < Dk; k0 += 4) {
            float32x4_t a = j0 < nt ? load4<T>(r0, k0) : z;
            float32x4_t b = j0 + 1 < nt ? load4<T>(r1, k0) : z;
            float32x4_t c = j0 + 2 < nt ? load4<T>(r2, k0) : z;
            float32x4_t d = j0 + 3 < nt ? load4<T>(r3, k0) : z;
            transpose4(a, b, c, d);
            float* dst = kp + static_cast<size_t>(k0) * kTile + j0;
            vst1q_f32(dst, a);
            vst1q_f32(dst + kTile, b);
            vst1q_f32(dst + 2 * kTile, c);
            vst1q_f32(dst + 3 * kTile, d);
        }
    }
}

// 16 int8 of a q8 row at element k (k % 16 == 0: within one q8_0 block).
inline int8x16_t load16_q8(GGMLType t, const uint8_t* row, int k) {
    if (t == GGMLType::Q8_KV) return vld1q_s8(reinterpret_cast<const int8_t*>(row + sizeof(RowQ8KVHeader) + k));
    return vld1q_s8(reinterpret_cast<const int8_t*>(row + static_cast<size_t>(k / 32) * sizeof(BlockQ8_0) + 2 + k % 32));
}

// Packs tile rows [0, npad) of a q8 K as int8 Kp[k/4][kTile][4] and the scales (q8_KV: ks[j];
// q8_0: ks[b][kTile]); rows >= nt are 0 with scale 0.
void pack_k_q8(const uint8_t* K, size_t ldk, GGMLType kt, int nt, int npad, int Dk, int8_t* kp, float* ks) {
    const float32x4_t z = vdupq_n_f32(0.0f);
    auto ld = [&](int j, int k) { return j < nt ? vreinterpretq_f32_s8(load16_q8(kt, K + static_cast<size_t>(j) * ldk, k)) : z; };
    for (int j0 = 0; j0 < npad; j0 += 4) {
        for (int k0 = 0; k0 < Dk; k0 += 16) {
            float32x4_t a = ld(j0, k0), b = ld(j0 + 1, k0), c = ld(j0 + 2, k0), d = ld(j0 + 3, k0);
            transpose4(a, b, c, d);  // vector x: 4 bytes of group k0/4 + x for rows j0..j0+3
            int8_t* dst = kp + (static_cast<size_t>(k0 / 4) * kTile + j0) * 4;
            vst1q_s8(dst, vreinterpretq_s8_f32(a));
            vst1q_s8(dst + kTile * 4, vreinterpretq_s8_f32(b));
            vst1q_s8(dst + 2 * kTile * 4, vreinterpretq_s8_f32(c));
            vst1q_s8(dst + 3 * kTile * 4, vreinterpretq_s8_f32(d));
        }
    }
    if (kt == GGMLType::Q8_KV) {
        for (int j = 0; j < npad; ++j) {
            float d = 0.0f;
            if (j < nt) std::memcpy(&d, K + static_cast<size_t>(j) * ldk, sizeof d);
            ks[j] = d;
        }
    } else {
        const int nb = Dk / 32;
        for (int j = 0; j < npad; ++j) {
            const uint8_t* row = K + static_cast<size_t>(j) * ldk;
            for (int b = 0; b < nb; ++b) {
                uint16_t h = 0;
                if (j < nt) std::memcpy(&h, row + static_cast<size_t>(b) * sizeof(BlockQ8_0), sizeof h);
                ks[b * kTile + j] = h2f(h);
            }
        }
    }
}

// dst[0..16) = d · q[0..16) (the scalar dequantiser's one multiply per element: bit-identical).
inline void dequant16(const int8_t* q, float d, float* dst) {
    const int8x16_t v = vld1q_s8(q);
    const int16x8_t lo = vmovl_s8(vget_low_s8(v)), hi = vmovl_high_s8(v);
    const float32x4_t dv = vdupq_n_f32(d);
    vst1q_f32(dst, vmulq_f32(dv, vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)))));
    vst1q_f32(dst + 4, vmulq_f32(dv, vcvtq_f32_s32(vmovl_high_s16(lo))));
    vst1q_f32(dst + 8, vmulq_f32(dv, vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)))));
    vst1q_f32(dst + 12, vmulq_f32(dv, vcvtq_f32_s32(vmovl_high_s16(hi))));
}

// One row of n elements (n % 16 == 0) of type t to f32.
void convert_row(GGMLType t, const uint8_t* row, int64_t n, float* dst) {
    switch (t) {
        case GGMLType::Q8_KV: {
            float d;
            std::memcpy(&d, row, sizeof d);
            const auto* q = reinterpret_cast<const int8_t*>(row + sizeof(RowQ8KVHeader));
            for (int64_t k = 0; k < n; k += 16) dequant16(q + k, d, dst + k);
            return;
        }
        case GGMLType::Q8_0:
            for (int64_t b = 0; b < n / 32; ++b) {
                const uint8_t* blk = row + static_cast<size_t>(b) * sizeof(BlockQ8_0);
                uint16_t h;
                std::memcpy(&h, blk, sizeof h);
                const float d = h2f(h);
                dequant16(reinterpret_cast<const int8_t*>(blk + 2), d, dst + 32 * b);
                dequant16(reinterpret_cast<const int8_t*>(blk + 18), d, dst + 32 * b + 16);
            }
            return;
        case GGMLType::F16:
            for (int64_t k = 0; k < n; k += 4) vst1q_f32(dst + k, load4<GGMLType::F16>(row + 2 * k, 0));
            return;
        case GGMLType::BF16:
            for (int64_t k = 0; k < n; k += 4) vst1q_f32(dst + k, load4<GGMLType::BF16>(row + 2 * k, 0));
            return;
        default:
            std::memcpy(dst, row, static_cast<size_t>(n) * sizeof(float));
            return;
    }
}

// acc[r][c] += K[c] · q[r][L] for the C vectors of KV rows at kr (f32).
template <int R, int C, int L>
inline void fma_step(float32x4_t (&acc)[R][C], const float* kr, const float32x4_t (&qv)[R]) {
    float32x4_t kv[C];
    for (int c = 0; c < C; ++c) kv[c] = vld1q_f32(kr + 4 * c);
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = vfmaq_laneq_f32(acc[r][c], kv[c], qv[r], L);
}

// acc[r][c] += sdot(K[c], group L of q[r]) for the C vectors (4 KV rows × 4 bytes) at kr.
template <int R, int C, int L>
inline void dot_step(int32x4_t (&acc)[R][C], const int8_t* kr, const int8x16_t (&qv)[R]) {
    int8x16_t kv[C];
    for (int c = 0; c < C; ++c) kv[c] = vld1q_s8(kr + 16 * c);
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = vdotq_laneq_s32(acc[r][c], kv[c], qv[r], L);
}

// S[r][c0..c0+16) = scale · Q[r] · Kp[:, c0..c0+16) for R query rows (f32).
template <int R>
void qk_f32(const float* const* q, int Dk, const float* kp, int c0, float scale, float* S) {
    float32x4_t acc[R][4];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < 4; ++c) acc[r][c] = vdupq_n_f32(0.0f);
    for (int k = 0; k < Dk; k += 4) {
        float32x4_t qv[R];
        for (int r = 0; r < R; ++r) qv[r] = vld1q_f32(q[r] + k);
        const float* kr = kp + static_cast<size_t>(k) * kTile + c0;
        fma_step<R, 4, 0>(acc, kr, qv);
        fma_step<R, 4, 1>(acc, kr + kTile, qv);
        fma_step<R, 4, 2>(acc, kr + 2 * kTile, qv);
        fma_step<R, 4, 3>(acc, kr + 3 * kTile, qv);
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < 4; ++c) vst1q_f32(S + r * kTile + c0 + 4 * c, vmulq_n_f32(acc[r][c], scale));
}

// q8_KV: S[r][j] = qd_r · d_j · Σ_k q_rk k_jk (qd_r includes the softmax scale), j in [c0, c0+16).
template <int R>
void qk_q8kv(const int8_t* const* q, const float* qd, int Dk, const int8_t* kp, const float* ks, int c0, float* S) {
    int32x4_t acc[R][4];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < 4; ++c) acc[r][c] = vdupq_n_s32(0);
    for (int k = 0; k < Dk; k += 16) {
        int8x16_t qv[R];
        for (int r = 0; r < R; ++r) qv[r] = vld1q_s8(q[r] + k);
        const int8_t* kr = kp + (static_cast<size_t>(k / 4) * kTile + c0) * 4;
        dot_step<R, 4, 0>(acc, kr, qv);
        dot_step<R, 4, 1>(acc, kr + kTile * 4, qv);
        dot_step<R, 4, 2>(acc, kr + 2 * kTile * 4, qv);
        dot_step<R, 4, 3>(acc, kr + 3 * kTile * 4, qv);
    }
    for (int c = 0; c < 4; ++c) {
        const float32x4_t kd = vld1q_f32(ks + c0 + 4 * c);
        for (int r = 0; r < R; ++r)
            vst1q_f32(S + r * kTile + c0 + 4 * c, vmulq_f32(vcvtq_f32_s32(acc[r][c]), vmulq_n_f32(kd, qd[r])));
    }
}

// q8_0: per 32-block b: S[r][j] += qd_rb · d_jb · Σ_{k in b} q_rk k_jk, j in [c0, c0+8).
template <int R>
void qk_q80(const int8_t* const* q, const float* const* qd, int Dk, const int8_t* kp, const float* ks, int c0,
            float* S) {
    float32x4_t facc[R][2];
    for (int r = 0; r < R; ++r) facc[r][0] = facc[r][1] = vdupq_n_f32(0.0f);
    for (int b = 0; b < Dk / 32; ++b) {
        int32x4_t acc[R][2];
        for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = vdupq_n_s32(0);
        for (int k = 32 * b; k < 32 * b + 32; k += 16) {
            int8x16_t qv[R];
            for (int r = 0; r < R; ++r) qv[r] = vld1q_s8(q[r] + k);
            const int8_t* kr = kp + (static_cast<size_t>(k / 4) * kTile + c0) * 4;
            dot_step<R, 2, 0>(acc, kr, qv);
            dot_step<R, 2, 1>(acc, kr + kTile * 4, qv);
            dot_step<R, 2, 2>(acc, kr + 2 * kTile * 4, qv);
            dot_step<R, 2, 3>(acc, kr + 3 * kTile * 4, qv);
        }
        const float32x4_t d0 = vld1q_f32(ks + b * kTile + c0), d1 = vld1q_f32(ks + b * kTile + c0 + 4);
        for (int r = 0; r < R; ++r) {
            const float dq = qd[r][b];
            facc[r][0] = vfmaq_f32(facc[r][0], vcvtq_f32_s32(acc[r][0]), vmulq_n_f32(d0, dq));
            facc[r][1] = vfmaq_f32(facc[r][1], vcvtq_f32_s32(acc[r][1]), vmulq_n_f32(d1, dq));
        }
    }
    for (int r = 0; r < R; ++r) {
        vst1q_f32(S + r * kTile + c0, facc[r][0]);
        vst1q_f32(S + r * kTile + c0 + 4, facc[r][1]);
    }
}

// acc[r][c] += V[c] · p[r][L] for the 4 vectors of one V row at vr.
template <int R, int L>
inline void pv_step(float32x4_t (&acc)[R][4], const float* vr, const float32x4_t (&pv)[R]) {
    const float32x4_t v0 = vld1q_f32(vr), v1 = vld1q_f32(vr + 4), v2 = vld1q_f32(vr + 8), v3 = vld1q_f32(vr + 12);
    for (int r = 0; r < R; ++r) {
        acc[r][0] = vfmaq_laneq_f32(acc[r][0], v0, pv[r], L);
        acc[r][1] = vfmaq_laneq_f32(acc[r][1], v1, pv[r], L);
        acc[r][2] = vfmaq_laneq_f32(acc[r][2], v2, pv[r], L);
        acc[r][3] = vfmaq_laneq_f32(acc[r][3], v3, pv[r], L);
    }
}

// O[r][0..Dv) = O[r]·corr[r] + Σ_{j < nj} P[r][j] V[j] for R rows, 16 columns per pass.
template <int R>
void pv(const float* P, int nj, const float* V, size_t ldv, int Dv, const float* corr, float* const* O) {
    for (int c0 = 0; c0 < Dv; c0 += 16) {
        float32x4_t acc[R][4];
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < 4; ++c) acc[r][c] = vmulq_n_f32(vld1q_f32(O[r] + c0 + 4 * c), corr[r]);
        const float* vr = V + c0;
        int j = 0;
        for (; j + 4 <= nj; j += 4, vr += 4 * ldv) {
            float32x4_t p[R];
            for (int r = 0; r < R; ++r) p[r] = vld1q_f32(P + r * kTile + j);
            pv_step<R, 0>(acc, vr, p);
            pv_step<R, 1>(acc, vr + ldv, p);
            pv_step<R, 2>(acc, vr + 2 * ldv, p);
            pv_step<R, 3>(acc, vr + 3 * ldv, p);
        }
        for (; j < nj; ++j, vr += ldv) {
            float32x4_t p[R];
            for (int r = 0; r < R; ++r) p[r] = vdupq_n_f32(P[r * kTile + j]);
            pv_step<R, 0>(acc, vr, p);
        }
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < 4; ++c) vst1q_f32(O[r] + c0 + 4 * c, acc[r][c]);
    }
}

// 16 floats · id rounded to int8 (ties away from zero, as the scalar quantiser's lround).
inline int8x16_t round16_s8(const float* x, float32x4_t id, int32x4_t* sum = nullptr) {
    const int32x4_t a = vcvtaq_s32_f32(vmulq_f32(vld1q_f32(x), id));
    const int32x4_t b = vcvtaq_s32_f32(vmulq_f32(vld1q_f32(x + 4), id));
    const int32x4_t c = vcvtaq_s32_f32(vmulq_f32(vld1q_f32(x + 8), id));
    const int32x4_t d = vcvtaq_s32_f32(vmulq_f32(vld1q_f32(x + 12), id));
    if (sum) *sum = vaddq_s32(*sum, vaddq_s32(vaddq_s32(a, b), vaddq_s32(c, d)));
    return vcombine_s8(vqmovn_s16(vcombine_s16(vqmovn_s32(a), vqmovn_s32(b))),
                       vqmovn_s16(vcombine_s16(vqmovn_s32(c), vqmovn_s32(d))));
}

inline float amax_n(const float* x, int64_t n) {  // n % 4 == 0
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int64_t k = 0; k < n; k += 4) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + k)));
    return vmaxvq_f32(m);
}

// Quantises one query row to int8: q8_KV one scale for the row, q8_0 one per 32-block; qd holds d·scale.
void quantize_q(GGMLType kt, const float* x, int Dk, float scale, int8_t* q, float* qd) {
    const int bs = kt == GGMLType::Q8_KV ? Dk : 32;
    for (int b = 0; b < Dk / bs; ++b) {
        const float* xb = x + b * bs;
        const float d = amax_n(xb, bs) / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        const float32x4_t idv = vdupq_n_f32(id);
        for (int k = 0; k < bs; k += 16) vst1q_s8(q + b * bs + k, round16_s8(xb + k, idv));
        qd[b] = d * scale;
    }
}

void flash(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* Kv, size_t ldk, GGMLType kt,
           const void* Vv, size_t ldv, GGMLType vt, const int* kv_len, float scale, float* O, int64_t ldo,
           float* m_out, float* l_out) {
    const bool kq8 = kt == GGMLType::Q8_0 || kt == GGMLType::Q8_KV;
    const bool kfloat = kt == GGMLType::F32 || kt == GGMLType::F16 || kt == GGMLType::BF16;
    const bool vok = vt == GGMLType::F32 || vt == GGMLType::F16 || vt == GGMLType::BF16 || vt == GGMLType::Q8_0 ||
                     vt == GGMLType::Q8_KV;
    if (!vok || !(kq8 || kfloat) || Dv % 16 != 0 || (vt == GGMLType::Q8_0 && Dv % 32 != 0) || (kq8 && Dk % 32 != 0) ||
        (kfloat && Dk % 4 != 0) || M <= 0) {
        if (m_out) return scalar::attn_flash_part(M, N, Dk, Dv, Q, ldq, Kv, ldk, kt, Vv, ldv, vt, kv_len, scale, O, ldo, m_out, l_out);
        return scalar::attn_flash(M, N, Dk, Dv, Q, ldq, Kv, ldk, kt, Vv, ldv, vt, kv_len, scale, O, ldo);
    }
    const auto* K = static_cast<const uint8_t*>(Kv);
    const auto* V = static_cast<const uint8_t*>(Vv);
    Scratch& sc = scratch();
    const int nb = Dk / 32;
    const int qblocks = kt == GGMLType::Q8_KV ? 1 : nb;
    const bool v_in_place = vt == GGMLType::F32 && ldv % sizeof(float) == 0;
    float* kpf = kq8 ? nullptr : sc.kp.get<float>(static_cast<size_t>(Dk) * kTile);
    int8_t* kpq = kq8 ? sc.kp.get<int8_t>(static_cast<size_t>(Dk) * kTile) : nullptr;
    float* ks = sc.ks.get<float>(static_cast<size_t>(nb + 1) * kTile);
    float* vb = v_in_place ? nullptr : sc.vb.get<float>(static_cast<size_t>(kTile) * Dv);
    int8_t* qq = kq8 ? sc.qq.get<int8_t>(static_cast<size_t>(kRowsSB) * Dk) : nullptr;
    float* qd = kq8 ? sc.qd.get<float>(static_cast<size_t>(kRowsSB) * qblocks) : nullptr;
    float* S = sc.s.get<float>(static_cast<size_t>(kRB) * kTile);
    float* st = sc.st.get<float>(3 * kRowsSB);  // m, l, corr
    float *mrow = st, *lrow = st + kRowsSB, *corr = st + 2 * kRowsSB;
    const uint32x4_t iota = {0, 1, 2, 3};

    for (int r0 = 0; r0 < M; r0 += kRowsSB) {
        const int mb = std::min(kRowsSB, M - r0);
        int nmax = 0;
        for (int i = 0; i < mb; ++i) nmax = std::max(nmax, std::min(kv_len[r0 + i], N));
        for (int i = 0; i < mb; ++i) {
            mrow[i] = kNegInf;
            lrow[i] = 0.0f;
            std::memset(O + (r0 + i) * ldo, 0, static_cast<size_t>(Dv) * sizeof(float));
        }
        if (kq8)
            for (int i = 0; i < mb; ++i)
                quantize_q(kt, Q + (r0 + i) * ldq, Dk, scale, qq + static_cast<size_t>(i) * Dk, qd + i * qblocks);
        for (int j0 = 0; j0 < nmax; j0 += kTile) {
            const int nt = std::min(kTile, nmax - j0);
            const int npad = (nt + 15) & ~15;
            const uint8_t* Kt = K + static_cast<size_t>(j0) * ldk;
            switch (kt) {
                case GGMLType::F32: pack_k_float<GGMLType::F32>(Kt, ldk, nt, npad, Dk, kpf); break;
                case GGMLType::F16: pack_k_float<GGMLType::F16>(Kt, ldk, nt, npad, Dk, kpf); break;
                case GGMLType::BF16: pack_k_float<GGMLType::BF16>(Kt, ldk, nt, npad, Dk, kpf); break;
                default: pack_k_q8(Kt, ldk, kt, nt, npad, Dk, kpq, ks); break;
            }
            const float* Vt;
            size_t ldvf;
            if (v_in_place) {
                Vt = reinterpret_cast<const float*>(V + static_cast<size_t>(j0) * ldv);
                ldvf = ldv / sizeof(float);
            } else {
                for (int j = 0; j < nt; ++j)
                    convert_row(vt, V + static_cast<size_t>(j0 + j) * ldv, Dv, vb + static_cast<size_t>(j) * Dv);
                Vt = vb;
                ldvf = static_cast<size_t>(Dv);
            }
            for (int i0 = 0; i0 < mb; i0 += kRB) {
                const int rb = std::min(kRB, mb - i0);
                int vis[kRB], nj = 0;  // visible rows of this tile per query row
                for (int r = 0; r < rb; ++r) {
                    vis[r] = std::clamp(std::min(kv_len[r0 + i0 + r], N) - j0, 0, nt);
                    nj = std::max(nj, vis[r]);
                }
                if (nj == 0) continue;
                const int ncols = (nj + 15) & ~15;  // S columns computed (<= npad: packed rows)
                // scores
                if (kq8) {
                    const int8_t* qp[kRB];
                    const float* qdp[kRB];
                    float qdr[kRB];
                    for (int r = 0; r < rb; ++r) {
                        qp[r] = qq + static_cast<size_t>(i0 + r) * Dk;
                        qdp[r] = qd + (i0 + r) * qblocks;
                        qdr[r] = qdp[r][0];
                    }
                    for (int c0 = 0; c0 < ncols; c0 += 16) {
                        if (kt == GGMLType::Q8_KV) {
                            switch (rb) {
                                case 4: qk_q8kv<4>(qp, qdr, Dk, kpq, ks, c0, S); break;
                                case 3: qk_q8kv<3>(qp, qdr, Dk, kpq, ks, c0, S); break;
                                case 2: qk_q8kv<2>(qp, qdr, Dk, kpq, ks, c0, S); break;
                                default: qk_q8kv<1>(qp, qdr, Dk, kpq, ks, c0, S); break;
                            }
                        } else {
                            for (int c1 = c0; c1 < c0 + 16; c1 += 8) {
                                switch (rb) {
                                    case 4: qk_q80<4>(qp, qdp, Dk, kpq, ks, c1, S); break;
                                    case 3: qk_q80<3>(qp, qdp, Dk, kpq, ks, c1, S); break;
                                    case 2: qk_q80<2>(qp, qdp, Dk, kpq, ks, c1, S); break;
                                    default: qk_q80<1>(qp, qdp, Dk, kpq, ks, c1, S); break;
                                }
                            }
                        }
                    }
                } else {
                    const float* qp[kRB];
                    for (int r = 0; r < rb; ++r) qp[r] = Q + (r0 + i0 + r) * ldq;
                    for (int c0 = 0; c0 < ncols; c0 += 16) {
                        switch (rb) {
                            case 4: qk_f32<4>(qp, Dk, kpf, c0, scale, S); break;
                            case 3: qk_f32<3>(qp, Dk, kpf, c0, scale, S); break;
                            case 2: qk_f32<2>(qp, Dk, kpf, c0, scale, S); break;
                            default: qk_f32<1>(qp, Dk, kpf, c0, scale, S); break;
                        }
                    }
                }
                // online softmax: S becomes P for columns [0, nj rounded up to 4), 0 past each
                // row's visible end
                const int nv = (nj + 3) / 4;
                for (int r = 0; r < rb; ++r) {
                    const int i = i0 + r;
                    float* Sr = S + r * kTile;
                    if (vis[r] == 0) {
                        corr[i] = 1.0f;
                        std::memset(Sr, 0, static_cast<size_t>(nv) * 4 * sizeof(float));
                        continue;
                    }
                    const uint32x4_t visv = vdupq_n_u32(static_cast<uint32_t>(vis[r]));
                    float32x4_t mx = vdupq_n_f32(kNegInf);
                    for (int c = 0; c < (vis[r] + 3) / 4; ++c) {
                        const uint32x4_t mk = vcltq_u32(vaddq_u32(iota, vdupq_n_u32(4 * c)), visv);
                        mx = vmaxq_f32(mx, vbslq_f32(mk, vld1q_f32(Sr + 4 * c), vdupq_n_f32(kNegInf)));
                    }
                    const float mnew = std::max(mrow[i], vmaxvq_f32(mx));
                    const float cr = std::exp(mrow[i] - mnew);  // 0 on the first visible tile
                    const float32x4_t mv = vdupq_n_f32(mnew);
                    float32x4_t sum = vdupq_n_f32(0.0f);
                    for (int c = 0; c < nv; ++c) {
                        const uint32x4_t mk = vcltq_u32(vaddq_u32(iota, vdupq_n_u32(4 * c)), visv);
                        const float32x4_t p =
                            vbslq_f32(mk, exp_ps(vsubq_f32(vld1q_f32(Sr + 4 * c), mv)), vdupq_n_f32(0.0f));
                        sum = vaddq_f32(sum, p);
                        vst1q_f32(Sr + 4 * c, p);
                    }
                    lrow[i] = lrow[i] * cr + vaddvq_f32(sum);
                    mrow[i] = mnew;
                    corr[i] = cr;
                }
                float* Op[kRB];
                for (int r = 0; r < rb; ++r) Op[r] = O + (r0 + i0 + r) * ldo;
                switch (rb) {
                    case 4: pv<4>(S, nj, Vt, ldvf, Dv, corr + i0, Op); break;
                    case 3: pv<3>(S, nj, Vt, ldvf, Dv, corr + i0, Op); break;
                    case 2: pv<2>(S, nj, Vt, ldvf, Dv, corr + i0, Op); break;
                    default: pv<1>(S, nj, Vt, ldvf, Dv, corr + i0, Op); break;
                }
            }
        }
        for (int i = 0; i < mb; ++i) {
            float* o = O + (r0 + i) * ldo;
            if (m_out) {
                m_out[r0 + i] = mrow[i];
                l_out[r0 + i] = lrow[i];
                continue;
            }
            const float32x4_t inv = vdupq_n_f32(lrow[i] > 0.0f ? 1.0f / lrow[i] : 0.0f);
            for (int d = 0; d < Dv; d += 4) vst1q_f32(o + d, vmulq_f32(inv, vld1q_f32(o + d)));
        }
    }
}

}  // namespace

void attn_flash(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk, GGMLType kt,
                const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale, float* O, int64_t ldo) {
    flash(M, N, Dk, Dv, Q, ldq, K, ldk, kt, V, ldv, vt, kv_len, scale, O, ldo, nullptr, nullptr);
}

void attn_flash_part(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                     GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale, float* O,
                     int64_t ldo, float* m_out, float* l_out) {
    flash(M, N, Dk, Dv, Q, ldq, K, ldk, kt, V, ldv, vt, kv_len, scale, O, ldo, m_out, l_out);
}

// "-fa off" on this level is the flash kernel: the same softmax, without materialising the score
// row (exact up to float rounding; the two-pass scalar kernel stays the reference).
void attn_plain(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk, GGMLType kt,
                const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale, float* O, int64_t ldo) {
    flash(M, N, Dk, Dv, Q, ldq, K, ldk, kt, V, ldv, vt, kv_len, scale, O, ldo, nullptr, nullptr);
}

// The cache writer. f32/bf16/q8_0/q8_KV are bit-identical to latte::quantize_row (vcvtaq rounds
// ties away from zero, as lround; bf16 rounds to nearest even with the same quiet-NaN rule); f16
// uses FCVTN (round to nearest even: identical except for NaN payloads). Other types: scalar.
void quantize_row(GGMLType t, const float* src, void* dst, int64_t n) {
    switch (t) {
        case GGMLType::F16: {
            auto* d = static_cast<uint16_t*>(dst);
            int64_t i = 0;
            for (; i + 4 <= n; i += 4) vst1_u16(d + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + i))));
            for (; i < n; ++i) d[i] = fp32_to_fp16(src[i]);
            return;
        }
        case GGMLType::BF16: {
            auto* d = static_cast<uint16_t*>(dst);
            int64_t i = 0;
            for (; i + 4 <= n; i += 4) {
                const uint32x4_t x = vreinterpretq_u32_f32(vld1q_f32(src + i));
                const uint32x4_t lsb = vandq_u32(vshrq_n_u32(x, 16), vdupq_n_u32(1));
                const uint32x4_t rounded = vshrq_n_u32(vaddq_u32(vaddq_u32(x, vdupq_n_u32(0x7fffu)), lsb), 16);
                const uint32x4_t nan = vcgtq_u32(vandq_u32(x, vdupq_n_u32(0x7fffffffu)), vdupq_n_u32(0x7f800000u));
                const uint32x4_t qnan = vorrq_u32(vshrq_n_u32(x, 16), vdupq_n_u32(0x40u));
                vst1_u16(d + i, vmovn_u32(vbslq_u32(nan, qnan, rounded)));
            }
            for (; i < n; ++i) d[i] = fp32_to_bf16(src[i]);
            return;
        }
        case GGMLType::Q8_0: {
            row_bytes(t, n);  // throws unless n % 32 == 0
            auto* b = static_cast<BlockQ8_0*>(dst);
            for (int64_t i = 0; i < n / 32; ++i) {
                const float* x = src + i * 32;
                const float d = amax_n(x, 32) / 127.0f;
                const float id = d != 0.0f ? 1.0f / d : 0.0f;
                b[i].d = fp32_to_fp16(d);
                const float32x4_t idv = vdupq_n_f32(id);
                vst1q_s8(b[i].qs, round16_s8(x, idv));
                vst1q_s8(b[i].qs + 16, round16_s8(x + 16, idv));
            }
            return;
        }
        case GGMLType::Q8_KV: {
            const int64_t nv = n & ~int64_t{15};
            float amax = amax_n(src, nv);
            for (int64_t i = nv; i < n; ++i) amax = std::max(amax, std::fabs(src[i]));
            RowQ8KVHeader h{amax / 127.0f, 0};
            const float id = h.d != 0.0f ? 1.0f / h.d : 0.0f;
            auto* q = static_cast<int8_t*>(dst) + sizeof h;
            const float32x4_t idv = vdupq_n_f32(id);
            int32x4_t sum = vdupq_n_s32(0);
            for (int64_t i = 0; i < nv; i += 16) vst1q_s8(q + i, round16_s8(src + i, idv, &sum));
            h.sum = vaddvq_s32(sum);
            for (int64_t i = nv; i < n; ++i) {
                q[i] = static_cast<int8_t>(std::lround(src[i] * id));
                h.sum += q[i];
            }
            std::memcpy(dst, &h, sizeof h);
            return;
        }
        default:
            latte::quantize_row(t, src, dst, n);
            return;
    }
}

void dequantize_row(GGMLType t, const void* src, float* dst, int64_t n) {
    const auto* s = static_cast<const uint8_t*>(src);
    switch (t) {
        case GGMLType::F16:
        case GGMLType::BF16: {
            const int64_t nv = n & ~int64_t{15};
            convert_row(t, s, nv, dst);
            const auto* h = static_cast<const uint16_t*>(src);
            for (int64_t i = nv; i < n; ++i) dst[i] = t == GGMLType::F16 ? fp16_to_fp32(h[i]) : bf16_to_fp32(h[i]);
            return;
        }
        case GGMLType::Q8_0:
            row_bytes(t, n);  // throws unless n % 32 == 0
            convert_row(t, s, n, dst);
            return;
        case GGMLType::Q8_KV: {
            const int64_t nv = n & ~int64_t{15};
            convert_row(t, s, nv, dst);
            float d;
            std::memcpy(&d, s, sizeof d);
            const auto* q = reinterpret_cast<const int8_t*>(s + sizeof(RowQ8KVHeader));
            for (int64_t i = nv; i < n; ++i) dst[i] = d * static_cast<float>(q[i]);
            return;
        }
        default:
            latte::dequantize_row(t, src, dst, n);
            return;
    }
}

// The merge of the TG split, one row: 64 columns (16 accumulators) at a time over all chunks, so O
// is written once; the last Dv % 4 columns by scalar::attn_combine_tail (fma as the vectors).
void attn_combine(int chunks, int Dv, const float* w, const float* part, size_t stride, float* o) {
    const int Dv4 = Dv & ~3;
    for (int d0 = 0; d0 < Dv4; d0 += 64) {
        const int nv = std::min(16, (Dv4 - d0) / 4);
        float32x4_t acc[16];
        for (int k = 0; k < 16; ++k) acc[k] = vdupq_n_f32(0.0f);
        for (int c = 0; c < chunks; ++c) {
            if (w[c] == 0.0f) continue;
            const float* p = part + static_cast<size_t>(c) * stride + d0;
            for (int k = 0; k < nv; ++k) acc[k] = vfmaq_n_f32(acc[k], vld1q_f32(p + 4 * k), w[c]);
        }
        for (int k = 0; k < nv; ++k) vst1q_f32(o + d0 + 4 * k, acc[k]);
    }
    scalar::attn_combine_tail(chunks, Dv4, Dv, w, part, stride, o);
}

}  // namespace latte::kernels::neon

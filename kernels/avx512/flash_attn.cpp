// AVX-512 attention kernels (F/BW/VL/DQ/VNNI; compiled with only the avx512 flags).
//
// One flash (online-softmax, tiled) kernel serves "-fa on" and "-fa off" (attn_plain calls it:
// the result is the same softmax, computed without the full score row) and the flash-decoding
// partials. Layout of the work, per call:
//   - query rows in superblocks of kRowsSB (their O block stays in L2), KV in tiles of kTile=64;
//   - per tile the K rows are packed once, transposed so that a vector holds 16 KV rows
//     (f32 for f32/f16/bf16 caches: Kp[k][j]; u8 for q8_0/q8_KV: Kp[k/4][j][4], sign-flipped);
//     the V rows are converted to f32 once per tile (or read in place for f32);
//   - S = Q Kᵀ for 4 query rows × 64 KV rows per microkernel call: broadcast-FMA (f32) or
//     vpdpbusd with the query quantised on the fly to int8 (q8_KV: one scale per row, q8_0: one per
//     32-block) — the K bytes are flipped to u8 (k+128) and the excess 128·Σq is the accumulator's
//     start value, so the q8_KV header sum is not needed here;
//   - online softmax per row (running max m, sum l, O rescaled while it is loaded for P·V);
//   - O += P V in f32 for 8 rows × 32 columns per microkernel pass.
// Shapes outside Dk % 64 == 0 (q8 types) / Dk % 16 == 0 (float types) and Dv % 32 == 0 go to the
// scalar kernel.
#include "kernels/avx512/flash_attn.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "kernels/scalar/flash_attn.h"

namespace latte::kernels::avx512 {
namespace {

constexpr int kTile = 64;     // KV rows per tile (4 vectors of 16)
constexpr int kRowsSB = 64;   // query rows per superblock
constexpr int kRB = 8;        // query rows per softmax / P·V block
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A grow-only 64-byte aligned scratch buffer (one per thread and purpose: no allocation once warm).
struct Buf {
    void* p = nullptr;
    size_t cap = 0;
    ~Buf() { std::free(p); }
    template <class T>
    T* get(size_t n) {
        const size_t bytes = (n * sizeof(T) + 63) & ~size_t{63};
        if (bytes > cap) {
            std::free(p);
            p = std::aligned_alloc(64, bytes);
            cap = bytes;
        }
        return static_cast<T*>(p);
    }
};

struct Scratch {
    Buf kp, ks, vb, qq, qd, qs, s, p, st;
};
Scratch& scratch() {
    static thread_local Scratch s;
    return s;
}

// e^x for x <= 0 (x = -inf gives 0): 2^n · poly(r), |r| <= ln2/2, degree 6 (rel. error ~2e-7).
inline __m512 exp_ps(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

// In-place transpose of 16 vectors of 16 (f32 or any 32-bit lanes).
inline void transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; ++i) {
        const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
        const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
        r[4 * i + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    for (int x = 0; x < 4; ++x) {
        t[x] = _mm512_shuffle_f32x4(r[x], r[4 + x], 0x88);
        t[4 + x] = _mm512_shuffle_f32x4(r[x], r[4 + x], 0xdd);
        t[8 + x] = _mm512_shuffle_f32x4(r[8 + x], r[12 + x], 0x88);
        t[12 + x] = _mm512_shuffle_f32x4(r[8 + x], r[12 + x], 0xdd);
    }
    for (int x = 0; x < 4; ++x) {
        r[x] = _mm512_shuffle_f32x4(t[x], t[8 + x], 0x88);
        r[8 + x] = _mm512_shuffle_f32x4(t[x], t[8 + x], 0xdd);
        r[4 + x] = _mm512_shuffle_f32x4(t[4 + x], t[12 + x], 0x88);
        r[12 + x] = _mm512_shuffle_f32x4(t[4 + x], t[12 + x], 0xdd);
    }
}

// 16 elements of a float-type row at element k, as f32.
inline __m512 load16(GGMLType t, const uint8_t* row, int k) {
    switch (t) {
        case GGMLType::F16:
            return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * k)));
        case GGMLType::BF16:
            return _mm512_castsi512_ps(_mm512_slli_epi32(
                _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * k))), 16));
        default:
            return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + k);
    }
}

// Packs tile rows [0, nt) of a float-type K (f32/f16/bf16) as f32 Kp[k][kTile]; rows >= nt are 0.
void pack_k_float(const uint8_t* K, size_t ldk, GGMLType kt, int nt, int Dk, float* kp) {
    __m512 r[16];
    for (int jg = 0; jg < kTile / 16; ++jg) {
        for (int k0 = 0; k0 < Dk; k0 += 16) {
            for (int x = 0; x < 16; ++x) {
                const int j = jg * 16 + x;
                r[x] = j < nt ? load16(kt, K + static_cast<size_t>(j) * ldk, k0) : _mm512_setzero_ps();
            }
            transpose16(r);
            for (int x = 0; x < 16; ++x) _mm512_store_ps(kp + static_cast<size_t>(k0 + x) * kTile + jg * 16, r[x]);
        }
    }
}

// 64 int8 of a q8 row at element k (q8_0: blocks k/32 and k/32+1; q8_KV: after the header).
inline __m512i load64_q8(GGMLType t, const uint8_t* row, int k) {
    if (t == GGMLType::Q8_KV) return _mm512_loadu_si512(row + sizeof(RowQ8KVHeader) + k);
    const uint8_t* b = row + static_cast<size_t>(k / 32) * sizeof(BlockQ8_0) + 2;
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b))),
                              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + sizeof(BlockQ8_0))), 1);
}

// Packs tile rows of a q8 K as u8 (k+128) Kp[k/4][kTile][4] and the scales: q8_KV ks[j],
// q8_0 ks[b][kTile]; rows >= nt are 0 (scale 0).
void pack_k_q8(const uint8_t* K, size_t ldk, GGMLType kt, int nt, int Dk, uint8_t* kp, float* ks) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    __m512 r[16];
    for (int jg = 0; jg < kTile / 16; ++jg) {
        for (int k0 = 0; k0 < Dk; k0 += 64) {
            for (int x = 0; x < 16; ++x) {
                const int j = jg * 16 + x;
                const __m512i v = j < nt ? load64_q8(kt, K + static_cast<size_t>(j) * ldk, k0) : _mm512_setzero_si512();
                r[x] = _mm512_castsi512_ps(_mm512_xor_si512(v, flip));
            }
            transpose16(r);
            for (int x = 0; x < 16; ++x)
                _mm512_store_ps(reinterpret_cast<float*>(kp) + static_cast<size_t>(k0 / 4 + x) * kTile + jg * 16, r[x]);
        }
    }
    if (kt == GGMLType::Q8_KV) {
        for (int j = 0; j < kTile; ++j) {
            float d = 0.0f;
            if (j < nt) std::memcpy(&d, K + static_cast<size_t>(j) * ldk, sizeof d);
            ks[j] = d;
        }
    } else {
        const int nb = Dk / 32;
        for (int j = 0; j < kTile; ++j) {
            const uint8_t* row = K + static_cast<size_t>(j) * ldk;
            for (int b = 0; b < nb; ++b) {
                uint16_t h = 0;
                if (j < nt) std::memcpy(&h, row + static_cast<size_t>(b) * sizeof(BlockQ8_0), sizeof h);
                ks[b * kTile + j] = _cvtsh_ss(h);
            }
        }
    }
}

// Converts columns [c0, c0+32) of V rows [0, nt) to f32: vb[j][32] (8 KiB, stays in L1).
void convert_v_chunk(const uint8_t* V, size_t ldv, GGMLType vt, int nt, int c0, float* vb) {
    for (int j = 0; j < nt; ++j) {
        const uint8_t* row = V + static_cast<size_t>(j) * ldv;
        float* dst = vb + j * 32;
        if (vt == GGMLType::Q8_KV || vt == GGMLType::Q8_0) {
            float d;
            const int8_t* q;
            if (vt == GGMLType::Q8_KV) {
                std::memcpy(&d, row, sizeof d);
                q = reinterpret_cast<const int8_t*>(row + sizeof(RowQ8KVHeader) + c0);
            } else {
                const uint8_t* blk = row + static_cast<size_t>(c0 / 32) * sizeof(BlockQ8_0);
                uint16_t h;
                std::memcpy(&h, blk, sizeof h);
                d = _cvtsh_ss(h);
                q = reinterpret_cast<const int8_t*>(blk + 2);
            }
            const __m512 dv = _mm512_set1_ps(d);
            const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
            _mm512_store_ps(dst, _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(b)))));
            _mm512_store_ps(dst + 16,
                            _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(b, 1)))));
        } else {
            _mm512_store_ps(dst, load16(vt, row, c0));
            _mm512_store_ps(dst + 16, load16(vt, row, c0 + 16));
        }
    }
}

// Prefetches rows [0, n) of a matrix (bytes [0, bytes) of each row) into the cache.
inline void prefetch_rows(const uint8_t* p, size_t ld, int n, size_t bytes) {
    for (int j = 0; j < n; ++j)
        for (size_t b = 0; b < bytes; b += 64) _mm_prefetch(reinterpret_cast<const char*>(p + j * ld + b), _MM_HINT_T0);
}

// S[r][0..64) = scale · Q[r] · Kp for R query rows (f32).
template <int R>
void qk_f32(const float* const* q, int Dk, const float* kp, float scale, float* S) {
    __m512 acc[R][4];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < 4; ++c) acc[r][c] = _mm512_setzero_ps();
    for (int k = 0; k < Dk; ++k) {
        const float* kr = kp + static_cast<size_t>(k) * kTile;
        const __m512 k0 = _mm512_load_ps(kr), k1 = _mm512_load_ps(kr + 16), k2 = _mm512_load_ps(kr + 32),
                     k3 = _mm512_load_ps(kr + 48);
        for (int r = 0; r < R; ++r) {
            const __m512 qb = _mm512_set1_ps(q[r][k]);
            acc[r][0] = _mm512_fmadd_ps(qb, k0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(qb, k1, acc[r][1]);
            acc[r][2] = _mm512_fmadd_ps(qb, k2, acc[r][2]);
            acc[r][3] = _mm512_fmadd_ps(qb, k3, acc[r][3]);
        }
    }
    const __m512 sc = _mm512_set1_ps(scale);
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < 4; ++c) _mm512_store_ps(S + r * kTile + 16 * c, _mm512_mul_ps(acc[r][c], sc));
}

// q8_KV: S[r][j] = (dq_r·scale) · d_j · Σ_k q_rk k_jk, with Kp = k+128 and the start value −128·Σq.
template <int R>
void qk_q8kv(const int8_t* const* q, const float* qd, const int32_t* qsum, int Dk, const uint8_t* kp,
             const float* ks, float* S) {
    __m512i acc[R][4];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < 4; ++c) acc[r][c] = _mm512_set1_epi32(-128 * qsum[r]);
    for (int k4 = 0; k4 < Dk / 4; ++k4) {
        const __m512i* kr = reinterpret_cast<const __m512i*>(kp + static_cast<size_t>(k4) * kTile * 4);
        const __m512i k0 = _mm512_load_si512(kr), k1 = _mm512_load_si512(kr + 1), k2 = _mm512_load_si512(kr + 2),
                      k3 = _mm512_load_si512(kr + 3);
        for (int r = 0; r < R; ++r) {
            int32_t w;
            std::memcpy(&w, q[r] + 4 * k4, 4);
            const __m512i qb = _mm512_set1_epi32(w);
            acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], k0, qb);
            acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], k1, qb);
            acc[r][2] = _mm512_dpbusd_epi32(acc[r][2], k2, qb);
            acc[r][3] = _mm512_dpbusd_epi32(acc[r][3], k3, qb);
        }
    }
    for (int r = 0; r < R; ++r) {
        const __m512 dq = _mm512_set1_ps(qd[r]);
        for (int c = 0; c < 4; ++c)
            _mm512_store_ps(S + r * kTile + 16 * c,
                            _mm512_mul_ps(_mm512_cvtepi32_ps(acc[r][c]), _mm512_mul_ps(dq, _mm512_load_ps(ks + 16 * c))));
    }
}

// q8_0: per 32-block b: S += (dq_rb·scale) · d_jb · Σ_{k in b} q_rk k_jk; KV vectors [c0, c0+2).
template <int R>
void qk_q80(const int8_t* const* q, const float* const* qd, const int32_t* const* qsum, int Dk, const uint8_t* kp,
            const float* ks, int c0, float* S) {
    __m512 facc[R][2];
    for (int r = 0; r < R; ++r) facc[r][0] = facc[r][1] = _mm512_setzero_ps();
    for (int b = 0; b < Dk / 32; ++b) {
        __m512i acc[R][2];
        for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_set1_epi32(-128 * qsum[r][b]);
        for (int k4 = 8 * b; k4 < 8 * b + 8; ++k4) {
            const __m512i* kr = reinterpret_cast<const __m512i*>(kp + static_cast<size_t>(k4) * kTile * 4) + c0;
            const __m512i k0 = _mm512_load_si512(kr), k1 = _mm512_load_si512(kr + 1);
            for (int r = 0; r < R; ++r) {
                int32_t w;
                std::memcpy(&w, q[r] + 4 * k4, 4);
                const __m512i qb = _mm512_set1_epi32(w);
                acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], k0, qb);
                acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], k1, qb);
            }
        }
        const __m512 d0 = _mm512_load_ps(ks + b * kTile + 16 * c0), d1 = _mm512_load_ps(ks + b * kTile + 16 * c0 + 16);
        for (int r = 0; r < R; ++r) {
            const __m512 dq = _mm512_set1_ps(qd[r][b]);
            facc[r][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][0]), _mm512_mul_ps(dq, d0), facc[r][0]);
            facc[r][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][1]), _mm512_mul_ps(dq, d1), facc[r][1]);
        }
    }
    for (int r = 0; r < R; ++r) {
        _mm512_store_ps(S + r * kTile + 16 * c0, facc[r][0]);
        _mm512_store_ps(S + r * kTile + 16 * c0 + 16, facc[r][1]);
    }
}

// O[r][c0..c0+32) = O[r]·corr[r] + Σ_{j < nj} P[r][j] V[j] for R rows; V: rows of stride ldv floats.
template <int R>
void pv(const float* P, int nj, const float* V, size_t ldv, int c0, const float* corr, float* const* O) {
    __m512 acc[R][2];
    for (int r = 0; r < R; ++r) {
        const __m512 cr = _mm512_set1_ps(corr[r]);
        acc[r][0] = _mm512_mul_ps(cr, _mm512_loadu_ps(O[r] + c0));
        acc[r][1] = _mm512_mul_ps(cr, _mm512_loadu_ps(O[r] + c0 + 16));
    }
    const float* vr = V;
    for (int j = 0; j < nj; ++j, vr += ldv) {
        const __m512 v0 = _mm512_loadu_ps(vr), v1 = _mm512_loadu_ps(vr + 16);
        for (int r = 0; r < R; ++r) {
            const __m512 pb = _mm512_set1_ps(P[r * kTile + j]);
            acc[r][0] = _mm512_fmadd_ps(pb, v0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(pb, v1, acc[r][1]);
        }
    }
    for (int r = 0; r < R; ++r) {
        _mm512_storeu_ps(O[r] + c0, acc[r][0]);
        _mm512_storeu_ps(O[r] + c0 + 16, acc[r][1]);
    }
}

template <int R>
void pv_dispatch(int rows, const float* P, int nj, const float* V, size_t ldv, int c0, const float* corr,
                 float* const* O) {
    if constexpr (R > 0) {
        if (rows == R) return pv<R>(P, nj, V, ldv, c0, corr, O);
        return pv_dispatch<R - 1>(rows, P, nj, V, ldv, c0, corr, O);
    }
}

// Quantises one query row to int8: q8_KV one scale for the row, q8_0 one per 32-block; qd holds
// d·scale, qsum the int8 sums (per row or per block).
void quantize_q(GGMLType kt, const float* x, int Dk, float scale, int8_t* q, float* qd, int32_t* qsum) {
    const int bs = kt == GGMLType::Q8_KV ? Dk : 32;
    for (int b = 0; b < Dk / bs; ++b) {
        const float* xb = x + b * bs;
        __m512 amax = _mm512_setzero_ps();
        for (int k = 0; k < bs; k += 16) amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_loadu_ps(xb + k)));
        const float m = _mm512_reduce_max_ps(amax);
        const float d = m / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        const __m512 idv = _mm512_set1_ps(id);
        __m512i sum = _mm512_setzero_si512();
        for (int k = 0; k < bs; k += 16) {
            const __m512i qi = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + k), idv));
            sum = _mm512_add_epi32(sum, qi);
            _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * bs + k), _mm512_cvtsepi32_epi8(qi));
        }
        qd[b] = d * scale;
        qsum[b] = _mm512_reduce_add_epi32(sum);
    }
}

void flash(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* Kv, size_t ldk, GGMLType kt,
           const void* Vv, size_t ldv, GGMLType vt, const int* kv_len, float scale, float* O, int64_t ldo,
           float* m_out, float* l_out) {
    const bool kq8 = kt == GGMLType::Q8_0 || kt == GGMLType::Q8_KV;
    const bool kfloat = kt == GGMLType::F32 || kt == GGMLType::F16 || kt == GGMLType::BF16;
    const bool vok = vt == GGMLType::F32 || vt == GGMLType::F16 || vt == GGMLType::BF16 || vt == GGMLType::Q8_0 ||
                     vt == GGMLType::Q8_KV;
    if (!vok || !(kq8 || kfloat) || Dv % 32 != 0 || (kq8 && Dk % 64 != 0) || (kfloat && Dk % 16 != 0) || M <= 0) {
        if (m_out) return scalar::attn_flash_part(M, N, Dk, Dv, Q, ldq, Kv, ldk, kt, Vv, ldv, vt, kv_len, scale, O, ldo, m_out, l_out);
        return scalar::attn_flash(M, N, Dk, Dv, Q, ldq, Kv, ldk, kt, Vv, ldv, vt, kv_len, scale, O, ldo);
    }
    const auto* K = static_cast<const uint8_t*>(Kv);
    const auto* V = static_cast<const uint8_t*>(Vv);
    Scratch& sc = scratch();
    const int nb = Dk / 32;
    const bool v_in_k = V == K && ldv == ldk;  // MQA: V is a prefix of the K row
    const size_t krow_bytes = row_bytes(kt, Dk), vrow_bytes = row_bytes(vt, Dv);
    const int qblocks = kt == GGMLType::Q8_KV ? 1 : nb;
    float* kpf = kq8 ? nullptr : sc.kp.get<float>(static_cast<size_t>(Dk) * kTile);
    uint8_t* kpq = kq8 ? sc.kp.get<uint8_t>(static_cast<size_t>(Dk) * kTile) : nullptr;
    float* ks = sc.ks.get<float>(static_cast<size_t>(nb + 1) * kTile);
    float* vb = sc.vb.get<float>(static_cast<size_t>(kTile) * 32);
    int8_t* qq = kq8 ? sc.qq.get<int8_t>(static_cast<size_t>(kRowsSB) * Dk) : nullptr;
    float* qd = kq8 ? sc.qd.get<float>(static_cast<size_t>(kRowsSB) * qblocks) : nullptr;
    int32_t* qs = kq8 ? sc.qs.get<int32_t>(static_cast<size_t>(kRowsSB) * qblocks) : nullptr;
    float* S = sc.s.get<float>(static_cast<size_t>(kRowsSB) * kTile);  // scores, then P, of the superblock
    float* st = sc.st.get<float>(3 * kRowsSB);  // m, l, corr
    float *mrow = st, *lrow = st + kRowsSB, *corr = st + 2 * kRowsSB;

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
                quantize_q(kt, Q + (r0 + i) * ldq, Dk, scale, qq + static_cast<size_t>(i) * Dk, qd + i * qblocks,
                           qs + i * qblocks);
        for (int j0 = 0; j0 < nmax; j0 += kTile) {
            const int nt = std::min(kTile, nmax - j0);
            const uint8_t* Kt = K + static_cast<size_t>(j0) * ldk;
            if (kq8) pack_k_q8(Kt, ldk, kt, nt, Dk, kpq, ks);
            else pack_k_float(Kt, ldk, kt, nt, Dk, kpf);
            // the next tile's rows are fetched while this one is computed
            if (j0 + kTile < nmax) {
                const int nn = std::min(kTile, nmax - j0 - kTile);
                prefetch_rows(Kt + static_cast<size_t>(kTile) * ldk, ldk, nn, krow_bytes);
                if (!v_in_k) prefetch_rows(V + static_cast<size_t>(j0 + kTile) * ldv, ldv, nn, vrow_bytes);
            }
            int vis_all[kRowsSB], nj_blk[kRowsSB / kRB];
            for (int i0 = 0; i0 < mb; i0 += kRB) {
                const int rb = std::min(kRB, mb - i0);
                int* vis = vis_all + i0;
                int nj = 0;
                for (int r = 0; r < rb; ++r) {
                    vis[r] = std::clamp(std::min(kv_len[r0 + i0 + r], N) - j0, 0, nt);
                    nj = std::max(nj, vis[r]);
                }
                nj_blk[i0 / kRB] = nj;
                if (nj == 0) continue;
                // scores
                for (int r = 0; r < rb; r += 4) {
                    const int rr = std::min(4, rb - r);
                    float* Sr = S + (i0 + r) * kTile;
                    if (kq8) {
                        const int8_t* qp[4];
                        const float* qdp[4];
                        const int32_t* qsp[4];
                        float qdr[4];
                        int32_t qsr[4];
                        for (int x = 0; x < rr; ++x) {
                            const int i = i0 + r + x;
                            qp[x] = qq + static_cast<size_t>(i) * Dk;
                            qdp[x] = qd + i * qblocks;
                            qsp[x] = qs + i * qblocks;
                            qdr[x] = qdp[x][0];
                            qsr[x] = qsp[x][0];
                        }
                        if (kt == GGMLType::Q8_KV) {
                            switch (rr) {
                                case 4: qk_q8kv<4>(qp, qdr, qsr, Dk, kpq, ks, Sr); break;
                                case 3: qk_q8kv<3>(qp, qdr, qsr, Dk, kpq, ks, Sr); break;
                                case 2: qk_q8kv<2>(qp, qdr, qsr, Dk, kpq, ks, Sr); break;
                                default: qk_q8kv<1>(qp, qdr, qsr, Dk, kpq, ks, Sr); break;
                            }
                        } else {
                            for (int c0 = 0; c0 < 4; c0 += 2) {
                                switch (rr) {
                                    case 4: qk_q80<4>(qp, qdp, qsp, Dk, kpq, ks, c0, Sr); break;
                                    case 3: qk_q80<3>(qp, qdp, qsp, Dk, kpq, ks, c0, Sr); break;
                                    case 2: qk_q80<2>(qp, qdp, qsp, Dk, kpq, ks, c0, Sr); break;
                                    default: qk_q80<1>(qp, qdp, qsp, Dk, kpq, ks, c0, Sr); break;
                                }
                            }
                        }
                    } else {
                        const float* qp[4];
                        for (int x = 0; x < rr; ++x) qp[x] = Q + (r0 + i0 + r + x) * ldq;
                        switch (rr) {
                            case 4: qk_f32<4>(qp, Dk, kpf, scale, Sr); break;
                            case 3: qk_f32<3>(qp, Dk, kpf, scale, Sr); break;
                            case 2: qk_f32<2>(qp, Dk, kpf, scale, Sr); break;
                            default: qk_f32<1>(qp, Dk, kpf, scale, Sr); break;
                        }
                    }
                }
                // online softmax: S becomes P (0 past each row's visible end)
                for (int r = 0; r < rb; ++r) {
                    const int i = i0 + r;
                    float* Sr = S + i * kTile;
                    if (vis[r] == 0) {
                        corr[i] = 1.0f;
                        std::memset(Sr, 0, kTile * sizeof(float));
                        continue;
                    }
                    __mmask16 mk[4];
                    __m512 sv[4], mx = _mm512_set1_ps(kNegInf);
                    for (int c = 0; c < 4; ++c) {
                        const int bits = std::clamp(vis[r] - 16 * c, 0, 16);
                        mk[c] = static_cast<__mmask16>((1u << bits) - 1u);
                        sv[c] = _mm512_load_ps(Sr + 16 * c);
                        mx = _mm512_mask_max_ps(mx, mk[c], mx, sv[c]);
                    }
                    const float mnew = std::max(mrow[i], _mm512_reduce_max_ps(mx));
                    const float cr = std::exp(mrow[i] - mnew);
                    const __m512 mv = _mm512_set1_ps(mnew);
                    __m512 sum = _mm512_setzero_ps();
                    for (int c = 0; c < 4; ++c) {
                        const __m512 p = _mm512_maskz_mov_ps(mk[c], exp_ps(_mm512_sub_ps(sv[c], mv)));
                        sum = _mm512_add_ps(sum, p);
                        _mm512_store_ps(Sr + 16 * c, p);
                    }
                    lrow[i] = lrow[i] * cr + _mm512_reduce_add_ps(sum);
                    mrow[i] = mnew;
                    corr[i] = cr;
                }
            }
            // O += P V, 32 columns at a time: the V chunk is converted once (L1) for every row block
            const uint8_t* Vtile = V + static_cast<size_t>(j0) * ldv;
            for (int c0 = 0; c0 < Dv; c0 += 32) {
                const float* Vc;
                size_t ldvf;
                if (vt == GGMLType::F32) {
                    Vc = reinterpret_cast<const float*>(Vtile) + c0;
                    ldvf = ldv / sizeof(float);
                } else {
                    convert_v_chunk(Vtile, ldv, vt, nt, c0, vb);
                    Vc = vb;
                    ldvf = 32;
                }
                for (int i0 = 0; i0 < mb; i0 += kRB) {
                    if (nj_blk[i0 / kRB] == 0) continue;
                    const int rb = std::min(kRB, mb - i0);
                    float* Op[kRB];
                    for (int r = 0; r < rb; ++r) Op[r] = O + (r0 + i0 + r) * ldo;
                    pv_dispatch<kRB>(rb, S + i0 * kTile, nj_blk[i0 / kRB], Vc, ldvf, c0, corr + i0, Op);
                }
            }
            // rows whose O was not rescaled (no visible row in this tile) had corr = 1: nothing to do
        }
        for (int i = 0; i < mb; ++i) {
            float* o = O + (r0 + i) * ldo;
            if (m_out) {
                m_out[r0 + i] = mrow[i];
                l_out[r0 + i] = lrow[i];
                continue;
            }
            const __m512 inv = _mm512_set1_ps(lrow[i] > 0.0f ? 1.0f / lrow[i] : 0.0f);
            for (int d = 0; d < Dv; d += 16) _mm512_storeu_ps(o + d, _mm512_mul_ps(inv, _mm512_loadu_ps(o + d)));
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

void quantize_row(GGMLType t, const float* src, void* dst, int64_t n) {
    if (t == GGMLType::F16 && n % 16 == 0) {
        auto* d = static_cast<uint16_t*>(dst);
        for (int64_t i = 0; i < n; i += 16)
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i),
                                _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        return;
    }
    latte::quantize_row(t, src, dst, n);
}

void dequantize_row(GGMLType t, const void* src, float* dst, int64_t n) { latte::dequantize_row(t, src, dst, n); }

}  // namespace latte::kernels::avx512

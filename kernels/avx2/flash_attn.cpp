// AVX2 attention kernels (AVX2 + FMA + F16C; compiled with only those flags).
//
// The same structure as kernels/avx512/flash_attn.cpp, 8 lanes wide: KV tiles of 64 rows packed
// once per tile (f32 Kp[k][j] for float caches; raw int8 Kp[k/4][j][4] for q8 caches), S = Q Kᵀ for
// 4 query rows × 16 KV rows per microkernel pass, online softmax for the whole superblock, then
// O += P V in f32 as the AVX-512 kernel does it: V converted to f32 in chunks of 32 columns (8 KiB,
// L1) shared by every row block of the superblock, 4 rows × 16 columns per FMA pass (AVX2 has no
// bf16 dot product); the next tile's rows are prefetched while one is computed. q8 caches: the
// query is quantised on the fly (q8_KV per row, q8_0 per 32-block) and Q·Kᵀ uses
// _mm256_maddubs_epi16 on (|k|, sign(q, k)) — products fit int16 without saturation since
// |k|, |q| <= 127 — then _mm256_madd_epi16 with ones into int32.
// "-fa off" runs the flash kernel. Shapes outside Dk % 32 == 0 (q8) / Dk % 8 == 0 (float) and
// Dv % 32 == 0 go to the scalar kernel.
#include "kernels/avx2/flash_attn.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "kernels/scalar/flash_attn.h"

namespace latte::kernels::avx2 {
namespace {

constexpr int kTile = 64;    // KV rows per tile (8 vectors of 8)
constexpr int kRowsSB = 64;  // query rows per superblock
constexpr int kRB = 8;       // query rows per softmax / P·V block
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

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
    Buf kp, ks, vb, qq, qd, qs, s, st;
};
Scratch& scratch() {
    static thread_local Scratch s;
    return s;
}

inline float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}
inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

// e^x for x <= 0 (clamped at -87: e^-87 ~ 1.6e-38; masked lanes are zeroed by the caller).
inline __m256 exp_ps(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
    __m256 p = _mm256_set1_ps(1.0f / 720);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

inline void transpose8(__m256 r[8]) {
    __m256 t[8], s[8];
    for (int i = 0; i < 4; ++i) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int g = 0; g < 2; ++g) {
        s[4 * g + 0] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        s[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
        s[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        s[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
    }
    for (int x = 0; x < 4; ++x) {
        r[x] = _mm256_permute2f128_ps(s[x], s[4 + x], 0x20);
        r[4 + x] = _mm256_permute2f128_ps(s[x], s[4 + x], 0x31);
    }
}

inline __m256 load8(GGMLType t, const uint8_t* row, int k) {
    switch (t) {
        case GGMLType::F16:
            return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k)));
        case GGMLType::BF16:
            return _mm256_castsi256_ps(_mm256_slli_epi32(
                _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k))), 16));
        default:
            return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + k);
    }
}

void pack_k_float(const uint8_t* K, size_t ldk, GGMLType kt, int nt, int Dk, float* kp) {
    __m256 r[8];
    for (int jg = 0; jg < kTile / 8; ++jg) {
        for (int k0 = 0; k0 < Dk; k0 += 8) {
            for (int x = 0; x < 8; ++x) {
                const int j = jg * 8 + x;
                r[x] = j < nt ? load8(kt, K + static_cast<size_t>(j) * ldk, k0) : _mm256_setzero_ps();
            }
            transpose8(r);
            for (int x = 0; x < 8; ++x) _mm256_store_ps(kp + static_cast<size_t>(k0 + x) * kTile + jg * 8, r[x]);
        }
    }
}

// 32 int8 of a q8 row at element k (k % 32 == 0).
inline __m256i load32_q8(GGMLType t, const uint8_t* row, int k) {
    if (t == GGMLType::Q8_KV) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + sizeof(RowQ8KVHeader) + k));
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + static_cast<size_t>(k / 32) * sizeof(BlockQ8_0) + 2));
}

void pack_k_q8(const uint8_t* K, size_t ldk, GGMLType kt, int nt, int Dk, uint8_t* kp, float* ks) {
    __m256 r[8];
    for (int jg = 0; jg < kTile / 8; ++jg) {
        for (int k0 = 0; k0 < Dk; k0 += 32) {
            for (int x = 0; x < 8; ++x) {
                const int j = jg * 8 + x;
                r[x] = _mm256_castsi256_ps(j < nt ? load32_q8(kt, K + static_cast<size_t>(j) * ldk, k0)
                                                  : _mm256_setzero_si256());
            }
            transpose8(r);
            for (int x = 0; x < 8; ++x)
                _mm256_store_ps(reinterpret_cast<float*>(kp) + static_cast<size_t>(k0 / 4 + x) * kTile + jg * 8, r[x]);
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

inline __m256 cvt8_i8(const int8_t* q) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q))));
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
            const __m256 dv = _mm256_set1_ps(d);
            for (int x = 0; x < 4; ++x) _mm256_store_ps(dst + 8 * x, _mm256_mul_ps(dv, cvt8_i8(q + 8 * x)));
        } else {
            for (int x = 0; x < 4; ++x) _mm256_store_ps(dst + 8 * x, load8(vt, row, c0 + 8 * x));
        }
    }
}

// Prefetches rows [0, n) of a matrix (bytes [0, bytes) of each row) into the cache.
inline void prefetch_rows(const uint8_t* p, size_t ld, int n, size_t bytes) {
    for (int j = 0; j < n; ++j)
        for (size_t b = 0; b < bytes; b += 64) _mm_prefetch(reinterpret_cast<const char*>(p + j * ld + b), _MM_HINT_T0);
}

// S[r][8c0 .. 8c0+16) = scale · Q[r] · Kp for R rows (f32), KV vectors c0, c0+1.
template <int R>
void qk_f32(const float* const* q, int Dk, const float* kp, float scale, int c0, float* S) {
    __m256 acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int k = 0; k < Dk; ++k) {
        const float* kr = kp + static_cast<size_t>(k) * kTile + 8 * c0;
        const __m256 k0 = _mm256_load_ps(kr), k1 = _mm256_load_ps(kr + 8);
        for (int r = 0; r < R; ++r) {
            const __m256 qb = _mm256_broadcast_ss(q[r] + k);
            acc[r][0] = _mm256_fmadd_ps(qb, k0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(qb, k1, acc[r][1]);
        }
    }
    const __m256 sc = _mm256_set1_ps(scale);
    for (int r = 0; r < R; ++r) {
        _mm256_store_ps(S + r * kTile + 8 * c0, _mm256_mul_ps(acc[r][0], sc));
        _mm256_store_ps(S + r * kTile + 8 * c0 + 8, _mm256_mul_ps(acc[r][1], sc));
    }
}

// int32 lanes += Σ_4 k·q for 8 KV rows: maddubs(|k|, sign(q, k)) then madd with ones.
inline __m256i dot4(__m256i acc, __m256i kabs, __m256i kraw, __m256i qb, __m256i ones) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(kabs, _mm256_sign_epi8(qb, kraw)), ones));
}

// q8_KV: S[r][j] = (dq_r·scale) · d_j · Σ_k q_rk k_jk, KV vectors c0, c0+1.
template <int R>
void qk_q8kv(const int8_t* const* q, const float* qd, int Dk, const uint8_t* kp, const float* ks, int c0, float* S) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    for (int k4 = 0; k4 < Dk / 4; ++k4) {
        const __m256i* kr = reinterpret_cast<const __m256i*>(kp + static_cast<size_t>(k4) * kTile * 4) + c0;
        const __m256i k0 = _mm256_load_si256(kr), k1 = _mm256_load_si256(kr + 1);
        const __m256i a0 = _mm256_abs_epi8(k0), a1 = _mm256_abs_epi8(k1);
        for (int r = 0; r < R; ++r) {
            int32_t w;
            std::memcpy(&w, q[r] + 4 * k4, 4);
            const __m256i qb = _mm256_set1_epi32(w);
            acc[r][0] = dot4(acc[r][0], a0, k0, qb, ones);
            acc[r][1] = dot4(acc[r][1], a1, k1, qb, ones);
        }
    }
    const __m256 d0 = _mm256_load_ps(ks + 8 * c0), d1 = _mm256_load_ps(ks + 8 * c0 + 8);
    for (int r = 0; r < R; ++r) {
        const __m256 dq = _mm256_set1_ps(qd[r]);
        _mm256_store_ps(S + r * kTile + 8 * c0, _mm256_mul_ps(_mm256_cvtepi32_ps(acc[r][0]), _mm256_mul_ps(dq, d0)));
        _mm256_store_ps(S + r * kTile + 8 * c0 + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(acc[r][1]), _mm256_mul_ps(dq, d1)));
    }
}

// q8_0: per 32-block b: S += (dq_rb·scale) · d_jb · Σ_{k in b} q_rk k_jk, KV vectors c0, c0+1.
template <int R>
void qk_q80(const int8_t* const* q, const float* const* qd, int Dk, const uint8_t* kp, const float* ks, int c0,
            float* S) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 facc[R][2];
    for (int r = 0; r < R; ++r) facc[r][0] = facc[r][1] = _mm256_setzero_ps();
    for (int b = 0; b < Dk / 32; ++b) {
        __m256i acc[R][2];
        for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
        for (int k4 = 8 * b; k4 < 8 * b + 8; ++k4) {
            const __m256i* kr = reinterpret_cast<const __m256i*>(kp + static_cast<size_t>(k4) * kTile * 4) + c0;
            const __m256i k0 = _mm256_load_si256(kr), k1 = _mm256_load_si256(kr + 1);
            const __m256i a0 = _mm256_abs_epi8(k0), a1 = _mm256_abs_epi8(k1);
            for (int r = 0; r < R; ++r) {
                int32_t w;
                std::memcpy(&w, q[r] + 4 * k4, 4);
                const __m256i qb = _mm256_set1_epi32(w);
                acc[r][0] = dot4(acc[r][0], a0, k0, qb, ones);
                acc[r][1] = dot4(acc[r][1], a1, k1, qb, ones);
            }
        }
        const __m256 d0 = _mm256_load_ps(ks + b * kTile + 8 * c0), d1 = _mm256_load_ps(ks + b * kTile + 8 * c0 + 8);
        for (int r = 0; r < R; ++r) {
            const __m256 dq = _mm256_set1_ps(qd[r][b]);
            facc[r][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r][0]), _mm256_mul_ps(dq, d0), facc[r][0]);
            facc[r][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r][1]), _mm256_mul_ps(dq, d1), facc[r][1]);
        }
    }
    for (int r = 0; r < R; ++r) {
        _mm256_store_ps(S + r * kTile + 8 * c0, facc[r][0]);
        _mm256_store_ps(S + r * kTile + 8 * c0 + 8, facc[r][1]);
    }
}

// O[r][c0..c0+16) = O[r]·corr[r] + Σ_{j < nj} P[r][j] V[j] for R rows (R <= 4); V: rows of stride
// ldv floats starting at column c0.
template <int R>
void pv(const float* P, int nj, const float* V, size_t ldv, int c0, const float* corr, float* const* O) {
    __m256 acc[R][2];
    for (int r = 0; r < R; ++r) {
        const __m256 cr = _mm256_set1_ps(corr[r]);
        acc[r][0] = _mm256_mul_ps(cr, _mm256_loadu_ps(O[r] + c0));
        acc[r][1] = _mm256_mul_ps(cr, _mm256_loadu_ps(O[r] + c0 + 8));
    }
    const float* vr = V;
    for (int j = 0; j < nj; ++j, vr += ldv) {
        const __m256 v0 = _mm256_loadu_ps(vr), v1 = _mm256_loadu_ps(vr + 8);
        for (int r = 0; r < R; ++r) {
            const __m256 pb = _mm256_broadcast_ss(P + r * kTile + j);
            acc[r][0] = _mm256_fmadd_ps(pb, v0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(pb, v1, acc[r][1]);
        }
    }
    for (int r = 0; r < R; ++r) {
        _mm256_storeu_ps(O[r] + c0, acc[r][0]);
        _mm256_storeu_ps(O[r] + c0 + 8, acc[r][1]);
    }
}

void pv_rows(int rows, const float* P, int nj, const float* V, size_t ldv, int c0, const float* corr, float* const* O) {
    switch (rows) {
        case 4: return pv<4>(P, nj, V, ldv, c0, corr, O);
        case 3: return pv<3>(P, nj, V, ldv, c0, corr, O);
        case 2: return pv<2>(P, nj, V, ldv, c0, corr, O);
        default: return pv<1>(P, nj, V, ldv, c0, corr, O);
    }
}

void quantize_q(GGMLType kt, const float* x, int Dk, float scale, int8_t* q, float* qd) {
    const int bs = kt == GGMLType::Q8_KV ? Dk : 32;
    for (int b = 0; b < Dk / bs; ++b) {
        const float* xb = x + b * bs;
        const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
        __m256 amax = _mm256_setzero_ps();
        for (int k = 0; k < bs; k += 8) amax = _mm256_max_ps(amax, _mm256_and_ps(absmask, _mm256_loadu_ps(xb + k)));
        const float d = hmax(amax) / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int k = 0; k < bs; ++k) q[b * bs + k] = static_cast<int8_t>(std::nearbyint(xb[k] * id));
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
    if (!vok || !(kq8 || kfloat) || Dv % 32 != 0 || (kq8 && Dk % 32 != 0) || (kfloat && Dk % 8 != 0) || M <= 0) {
        if (m_out) return scalar::attn_flash_part(M, N, Dk, Dv, Q, ldq, Kv, ldk, kt, Vv, ldv, vt, kv_len, scale, O, ldo, m_out, l_out);
        return scalar::attn_flash(M, N, Dk, Dv, Q, ldq, Kv, ldk, kt, Vv, ldv, vt, kv_len, scale, O, ldo);
    }
    const auto* K = static_cast<const uint8_t*>(Kv);
    const auto* V = static_cast<const uint8_t*>(Vv);
    Scratch& sc = scratch();
    const int nb = Dk / 32;
    const int qblocks = kt == GGMLType::Q8_KV ? 1 : nb;
    float* kpf = kq8 ? nullptr : sc.kp.get<float>(static_cast<size_t>(Dk) * kTile);
    uint8_t* kpq = kq8 ? sc.kp.get<uint8_t>(static_cast<size_t>(Dk) * kTile) : nullptr;
    float* ks = sc.ks.get<float>(static_cast<size_t>(nb + 1) * kTile);
    float* vb = vt == GGMLType::F32 ? nullptr : sc.vb.get<float>(static_cast<size_t>(kTile) * 32);
    const bool v_in_k = V == K && ldv == ldk;  // MQA: V is a prefix of the K row
    const size_t krow_bytes = row_bytes(kt, Dk), vrow_bytes = row_bytes(vt, Dv);
    int8_t* qq = kq8 ? sc.qq.get<int8_t>(static_cast<size_t>(kRowsSB) * Dk) : nullptr;
    float* qd = kq8 ? sc.qd.get<float>(static_cast<size_t>(kRowsSB) * qblocks) : nullptr;
    float* S = sc.s.get<float>(static_cast<size_t>(kRowsSB) * kTile);  // scores, then P, of the superblock
    float* st = sc.st.get<float>(3 * kRowsSB);
    float *mrow = st, *lrow = st + kRowsSB, *corr = st + 2 * kRowsSB;
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);

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
            const int ncv = (nt + 15) / 16 * 2;  // KV vectors of 8 worth computing (pairs)
            const uint8_t* Kt = K + static_cast<size_t>(j0) * ldk;
            if (kq8) pack_k_q8(Kt, ldk, kt, nt, Dk, kpq, ks);
            else pack_k_float(Kt, ldk, kt, nt, Dk, kpf);
            // the next tile's rows are fetched while this one is computed
            if (j0 + kTile < nmax) {
                const int nn = std::min(kTile, nmax - j0 - kTile);
                prefetch_rows(Kt + static_cast<size_t>(kTile) * ldk, ldk, nn, krow_bytes);
                if (!v_in_k) prefetch_rows(V + static_cast<size_t>(j0 + kTile) * ldv, ldv, nn, vrow_bytes);
            }
            int nj_blk[kRowsSB / kRB];
            for (int i0 = 0; i0 < mb; i0 += kRB) {
                const int rb = std::min(kRB, mb - i0);
                float* const Sb = S + i0 * kTile;  // this row block's scores
                int vis[kRB], nj = 0;
                for (int r = 0; r < rb; ++r) {
                    vis[r] = std::clamp(std::min(kv_len[r0 + i0 + r], N) - j0, 0, nt);
                    nj = std::max(nj, vis[r]);
                }
                nj_blk[i0 / kRB] = nj;
                if (nj == 0) continue;
                if (kt == GGMLType::Q8_0) {
                    for (int r = 0; r < rb; r += 2) {
                        const int rr = std::min(2, rb - r);
                        const int8_t* qp[2];
                        const float* qdp[2];
                        for (int x = 0; x < rr; ++x) {
                            qp[x] = qq + static_cast<size_t>(i0 + r + x) * Dk;
                            qdp[x] = qd + (i0 + r + x) * qblocks;
                        }
                        for (int c0 = 0; c0 < ncv; c0 += 2) {
                            if (rr == 2) qk_q80<2>(qp, qdp, Dk, kpq, ks, c0, Sb + r * kTile);
                            else qk_q80<1>(qp, qdp, Dk, kpq, ks, c0, Sb + r * kTile);
                        }
                    }
                } else {
                    for (int r = 0; r < rb; r += 4) {
                        const int rr = std::min(4, rb - r);
                        float* Sr = Sb + r * kTile;
                        for (int c0 = 0; c0 < ncv; c0 += 2) {
                            if (kt == GGMLType::Q8_KV) {
                                const int8_t* qp[4];
                                float qdr[4];
                                for (int x = 0; x < rr; ++x) {
                                    qp[x] = qq + static_cast<size_t>(i0 + r + x) * Dk;
                                    qdr[x] = qd[i0 + r + x];
                                }
                                switch (rr) {
                                    case 4: qk_q8kv<4>(qp, qdr, Dk, kpq, ks, c0, Sr); break;
                                    case 3: qk_q8kv<3>(qp, qdr, Dk, kpq, ks, c0, Sr); break;
                                    case 2: qk_q8kv<2>(qp, qdr, Dk, kpq, ks, c0, Sr); break;
                                    default: qk_q8kv<1>(qp, qdr, Dk, kpq, ks, c0, Sr); break;
                                }
                            } else {
                                const float* qp[4];
                                for (int x = 0; x < rr; ++x) qp[x] = Q + (r0 + i0 + r + x) * ldq;
                                switch (rr) {
                                    case 4: qk_f32<4>(qp, Dk, kpf, scale, c0, Sr); break;
                                    case 3: qk_f32<3>(qp, Dk, kpf, scale, c0, Sr); break;
                                    case 2: qk_f32<2>(qp, Dk, kpf, scale, c0, Sr); break;
                                    default: qk_f32<1>(qp, Dk, kpf, scale, c0, Sr); break;
                                }
                            }
                        }
                    }
                }
                for (int r = 0; r < rb; ++r) {
                    const int i = i0 + r;
                    float* Sr = Sb + r * kTile;
                    if (vis[r] == 0) {
                        corr[i] = 1.0f;
                        std::memset(Sr, 0, kTile * sizeof(float));
                        continue;
                    }
                    const int nv = (vis[r] + 7) / 8;
                    __m256 mk[8], sv[8], mx = _mm256_set1_ps(kNegInf);
                    for (int c = 0; c < nv; ++c) {
                        mk[c] = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(vis[r] - 8 * c), iota));
                        sv[c] = _mm256_blendv_ps(_mm256_set1_ps(kNegInf), _mm256_load_ps(Sr + 8 * c), mk[c]);
                        mx = _mm256_max_ps(mx, sv[c]);
                    }
                    const float mnew = std::max(mrow[i], hmax(mx));
                    const float cr = std::exp(mrow[i] - mnew);
                    const __m256 mv = _mm256_set1_ps(mnew);
                    __m256 sum = _mm256_setzero_ps();
                    for (int c = 0; c < 8; ++c) {
                        __m256 p = _mm256_setzero_ps();
                        if (c < nv) p = _mm256_and_ps(mk[c], exp_ps(_mm256_sub_ps(sv[c], mv)));
                        sum = _mm256_add_ps(sum, p);
                        _mm256_store_ps(Sr + 8 * c, p);
                    }
                    lrow[i] = lrow[i] * cr + hsum(sum);
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
                    const int nj = nj_blk[i0 / kRB];
                    if (nj == 0) continue;
                    const int rb = std::min(kRB, mb - i0);
                    float* Op[kRB];
                    for (int r = 0; r < rb; ++r) Op[r] = O + (r0 + i0 + r) * ldo;
                    for (int r = 0; r < rb; r += 4)
                        for (int h = 0; h < 32; h += 16)
                            pv_rows(std::min(4, rb - r), S + (i0 + r) * kTile, nj, Vc + h, ldvf, c0 + h,
                                    corr + i0 + r, Op + r);
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
            const __m256 inv = _mm256_set1_ps(lrow[i] > 0.0f ? 1.0f / lrow[i] : 0.0f);
            for (int d = 0; d < Dv; d += 8) _mm256_storeu_ps(o + d, _mm256_mul_ps(inv, _mm256_loadu_ps(o + d)));
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

// "-fa off" on this level is the flash kernel (same softmax, no materialised score row).
void attn_plain(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk, GGMLType kt,
                const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale, float* O, int64_t ldo) {
    flash(M, N, Dk, Dv, Q, ldq, K, ldk, kt, V, ldv, vt, kv_len, scale, O, ldo, nullptr, nullptr);
}

void quantize_row(GGMLType t, const float* src, void* dst, int64_t n) {
    if (t == GGMLType::F16 && n % 8 == 0) {
        auto* d = static_cast<uint16_t*>(dst);
        for (int64_t i = 0; i < n; i += 8)
            _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                             _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        return;
    }
    latte::quantize_row(t, src, dst, n);
}

void dequantize_row(GGMLType t, const void* src, float* dst, int64_t n) { latte::dequantize_row(t, src, dst, n); }

}  // namespace latte::kernels::avx2

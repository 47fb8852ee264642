// AVX2 attention kernels (AVX2 + FMA + F16C; compiled with only those flags — no AVX-VNNI, so no
// int8 or bf16 dot with accumulate: every int8 product goes through vpmaddubsw/vpmaddwd).
//
// The general path has the structure of kernels/avx512/flash_attn.cpp, 8 lanes wide: KV tiles of 64
// rows packed once per tile (f32 Kp[k][j] for float caches; raw int8 Kp[k/4][j][4] for q8 caches),
// S = Q Kᵀ for 4 query rows × 16 KV rows per microkernel pass, online softmax for the whole
// superblock, then O += P V over V chunks shared by every row block of the superblock; the next
// tile's rows are prefetched while one is computed.
//   - q8 caches, Q·Kᵀ: the query is quantised on the fly (q8_KV per row, q8_0 per 32-block; round to
//     nearest even, the scales avx512 uses) and multiplied as maddubs(|q|, sign(k, q)) — products fit
//     the int16 pairs without saturation since |k|, |q| <= 127 — then vpmaddwd with ones into int32.
//     |q| is computed once with the query (not |k| per K vector and row block).
//   - q8 V (q8_0, q8_KV), P·V in int16 (pv_q8): per query row and tile, P·d (d the V row scale;
//     q8_0: the row's largest block scale) is quantised to int16 with one scale (max/32767), V is
//     converted to int16 pairs of KV rows (vp[j/2][c][2], chunks of 64 columns), and vpmaddwd of the
//     broadcast P pair with V gives 16 products per instruction into int32 (|Σ| <= 128·32767·128 <
//     2^31), scaled into the f32 O once per tile; q8_0 re-quantises P·d_jb per 32-column block with
//     the row's scale. 4 rows × 16 columns per pass. This replaced the f32 P·V (V converted to f32,
//     8 products per FMA) — the AVX2 P·V bottleneck. int8 P (vpmaddubsw, as avx512's u8 P) is no
//     faster here: maddubs + the madd that widens it occupy the same two multiply pipes (Zen 3) as
//     two vpmaddwd, and its int16 pairs saturate at 2·255·127 unless P is cut to 7 bits (~1.4e-2 of
//     max |O|, twice avx512's u8 P). The int16 rounding (half a step of 2^-15 of the row's largest
//     P·d per element) adds <= 1.5e-4 of max |O| against the f32 P·V it replaced (measured
//     2026-12-03: M 1..64, N 1..4096, both softmax scales of the tests), far below the query
//     quantisation error (1.8e-2 / 2.5e-2 against scalar, tests/test_kernels.cpp).
//   - f32/f16/bf16 V: f32 FMA as before (V converted to f32 in chunks of 32 columns, 8 KiB, L1;
//     4 rows × 16 columns per pass); these caches are exact to ~1e-6 and keep it.
//   - 8 < rows <= 16 with q8 K and q8 V (TG with 16 heads; LATTE_ROWS16=0 turns it off, read on
//     every call): flash_rows16 holds the 16 query rows as the lanes of two vectors, so Q·Kᵀ
//     broadcasts the 4 K bytes of each KV row straight from the cache row (no packed K tile; |q| and
//     q prepacked as [k/4][16][4]), 4 KV rows × 16 query rows per pass (q8_0: a fresh int32 sum per
//     32-block, its 8 steps unrolled, then one FMA with d_Q·d_K into the f32 score); the online
//     softmax runs on whole vectors across the tile, P is transposed back to rows for pv_q8 (whose
//     int32 sums then span the 128-row tile: the bound above). KV tiles of 128 rows (64:
//     3% slower, 256: 2% slower); q8_0 V is packed to int16 pairs right after Q·Kᵀ has read each
//     group of 4 rows (its 34-byte blocks made the later chunk packing from L2 slower) and takes
//     its block scales from Q·Kᵀ when it is the K row's prefix; KV rows are prefetched 16 ahead.
//   - The accumulators of the int8/int16 inner loops are named variables kept in registers by a
//     tied asm operand: GCC 12 keeps arrays of them in rotating registers or spills some to the stack
//     (a store-forwarding round trip per step). Measured and not kept: unrolling the P·V loop, V as
//     the memory operand of vpmaddwd, 2 rows × 32 columns per P·V pass (no better than 4 × 16),
//     prepacking q8_KV V during Q·Kᵀ, a burst prefetch of the next tile.
//   Measured 2026-12-03 on a 2-core Zen 3 VM shared with other jobs (per-thread CPU time, best of
//   30; MQA -mla 1, Dk 576, Dv 512, V = the K row's prefix, scale 1/sqrt(192)), scalar / this file /
//   the f32-P·V version before it:
//     TG M = 16, N = 4096:  q8_KV 8.2-8.5 / 1.09-1.12 / 1.57-1.70 ms (7.5-7.8× scalar, was 5.0-5.2×)
//                           q8_0  8.4-8.6 / 1.32-1.40 / 1.70-1.82 ms (6.1-6.5×, was 4.7-5.1×)
//     PP M = 512, N = 4096 causal: q8_KV 238 / 37.3 / 43.7 ms, q8_0 241 / 42.7 / 48.2 ms;
//     f16/bf16: unchanged (bit-identical results). Not reached: 8× for q8_0 (and only just short
//     for q8_KV). Per 32 products both Q·Kᵀ (sign, maddubs, madd, add) and int16 P·V (2 × madd, add)
//     take 4 vector ops, ~1.27 / ~1.25 cycles measured in isolation on Zen 3: ~0.9 ms for this shape
//     at 3.2 GHz. The rest is the V packing (~6%), softmax/transposes/P quantisation (~5%) and, for
//     q8_0, the per-32-block scale work in Q·Kᵀ and P (~20% more than q8_KV).
// "-fa off" runs the flash kernel. Shapes outside Dk % 32 == 0 (q8) / Dk % 8 == 0 (float) and
// Dv % 32 == 0 go to the scalar kernel.
//
// AVX-VNNI (Alder Lake and later Intel cores without AVX-512, Zen 5): kernels/avx2/flash_attn_vnni.cpp
// compiles this file a second time with -mavxvnni and LATTE_AVX2_VNNI into namespace avx2vnni, and
// the dispatch gives the avx2 level those functions where the CPU has AVX-VNNI (LATTE_AVX_VNNI=0:
// the plain ones). Q·Kᵀ's maddubs + madd(ones) + add becomes one vpdpbusd (one side flipped to u8,
// see LATTE_DPBUSD: the same exact sums). P·V for q8 V is u8 P × s8 V through vpdpbusd, 32
// products per instruction where int16 pairs (vpdpwssd) do 16: V packed as quads of KV rows per
// 32-bit lane (pack_v_u8, pack_quad), P·d quantised to u8 per query row and tile (p_to_u8; q8_0 per
// 32-column block with the row's scale), as avx512's int8 P·V; no saturation (int32 accumulation).
// Zen 5, 1 thread, latte-attn-ab against scalar, old and new binaries alternated (2026-12-06): TG
// 16 heads @ 4K q8_0 6.6-7.3 -> 8.6-9.0x, q8_KV 9.1-9.2 -> 11.4-12.3x; PP 512 @ 0 q8_0 7.7 -> 9.1x,
// q8_KV 9.2-9.6 -> 11.9x (16-core Xeon: TG 8.6x / 12.0x, PP 8.3x / 11.2x; docs/PERFORMANCE.md). The
// cost is avx512's rounding: 1.5e-2 of max |O| from the plain build's int16 P·V at worst
// (tests/test_kernels.cpp; the float caches and the softmax sums l stay bitwise equal between the
// builds).
#include "kernels/avx2/flash_attn.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "kernels/scalar/flash_attn.h"
#include "kernels/scratch.h"

#if defined(LATTE_AVX2_VNNI)
#define LATTE_AVX2_NS avx2vnni
#else
#define LATTE_AVX2_NS avx2
#endif

namespace latte::kernels::LATTE_AVX2_NS {
namespace {

constexpr int kTile = 64;    // KV rows per tile (8 vectors of 8)
constexpr int kRowsSB = 64;  // query rows per superblock
constexpr int kRB = 8;       // query rows per softmax / P·V block
constexpr int kT16 = 128;    // KV rows per tile of the 16-row TG path (flash_rows16)
constexpr int kMaxT = 128;   // the largest tile pv_q8 takes
constexpr int kPfAhead = 16; // flash_rows16 prefetches the KV rows this far ahead of Q·Kᵀ
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Scratch {
    Buf kp, ks, vb, vd, pq, ps, qq, qd, s, st;
    Buf q16, qd16, st16, s16, kd16, vp16;  // flash_rows16's own
    Buf qs, qs16;                           // AVX-VNNI: the query's block sums (general, 16-row)
    Buf kc16;                               // flash_rows16: 4 q8_0 K rows copied (copy_k16_q80)
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
        const int nx = std::clamp(nt - jg * 8, 0, 8);  // valid rows of this group of 8
        const uint8_t* Kg = K + static_cast<size_t>(jg) * 8 * ldk;
        for (int k0 = 0; k0 < Dk; k0 += 32) {
            if (nx == 8) {
                for (int x = 0; x < 8; ++x) r[x] = _mm256_castsi256_ps(load32_q8(kt, Kg + x * ldk, k0));
            } else {
                for (int x = 0; x < 8; ++x)
                    r[x] = _mm256_castsi256_ps(x < nx ? load32_q8(kt, Kg + x * ldk, k0) : _mm256_setzero_si256());
            }
#if defined(LATTE_AVX2_VNNI)
            // k + 128 as u8: the u8 operand of vpdpbusd (the query sums correct it, acc_start)
            const __m256 flip = _mm256_castsi256_ps(_mm256_set1_epi8(static_cast<char>(0x80)));
            for (int x = 0; x < 8; ++x) r[x] = _mm256_xor_ps(r[x], flip);
#endif
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

// Converts columns [c0, c0+32) of f16/bf16 V rows [0, nt) to f32: vb[j][32] (8 KiB, stays in L1).
// (q8 V takes the int16 P·V, pv_q8.)
void convert_v_chunk(const uint8_t* V, size_t ldv, GGMLType vt, int nt, int c0, float* vb) {
    for (int j = 0; j < nt; ++j) {
        const uint8_t* row = V + static_cast<size_t>(j) * ldv;
        float* dst = vb + j * 32;
        for (int x = 0; x < 4; ++x) _mm256_store_ps(dst + 8 * x, load8(vt, row, c0 + 8 * x));
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

inline __m256i bcast4(const int8_t* p) {
    int32_t w;
    std::memcpy(&w, p, sizeof w);
    return _mm256_set1_epi32(w);
}

// int32 lanes += Σ_4 q·k for 8 KV rows: maddubs(|q|, sign(k, q)) — products fit int16 pairs without
// saturation since |k|, |q| <= 127 — then madd with ones (a `ones` in scope); |q| is precomputed
// with the query. The accumulator is pinned to one register: GCC 12
// otherwise rotates an array of accumulators through registers or spills some of them to the stack
// (a store-forwarding round trip in the dependency chain of every k step).
#if defined(LATTE_AVX2_VNNI)
// acc += Σ_4 u·s per int32 lane (u: u8, s: s8), one vpdpbusd. With AVX-VNNI the sign trick is not
// needed: one side of every Q·Kᵀ product goes in as u8 (x + 128) and the sums start at the
// correction (−128 · Σ of the other side), so each product is one instruction (was vpsignb +
// vpdpbusd): the general path's packed K tile is flipped to u8 when packed (the query stays s8, the
// sums start at −128·Σ_{k in block} q_rk); the 16-row path copies q8_0 K rows to L1 flipped
// (copy_k16_q80, the same start values) and for q8_KV takes the query as q + 128 and subtracts
// 128 · (the K row's int8 sum, stored in its header).
#define LATTE_DPBUSD(acc, u, s) asm("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(s))
#else
#define LATTE_DOT4(acc, qabs, qraw, kb)                                                              \
    do {                                                                                          \
        const __m256i t_ = _mm256_madd_epi16(_mm256_maddubs_epi16(qabs, _mm256_sign_epi8(kb, qraw)), ones); \
        asm("vpaddd %1, %0, %0" : "+x"(acc) : "x"(t_));                                             \
    } while (0)
#endif

// R (1..4) query rows × 2 KV vectors (16 KV rows) of Q·Kᵀ over the k4 steps [k4b, k4e), in named
// accumulators (A.a<r><v>; the 16-row path's dot16 uses them too) that LATTE_DOT4 keeps in registers: as arrays, GCC 12 kept 3 of the 8 on
// the stack (a store-forwarding round trip per step; perf, 2026-12-03) in the general path's
// Q·Kᵀ, which took 47% of PP time.
struct AccR4 {
    __m256i a00, a01, a10, a11, a20, a21, a30, a31;
};
template <int R>
inline void dot_rows(AccR4& A, const int8_t* const* q, const int8_t* const* qa, const uint8_t* kp, int c0, int k4b,
                     int k4e) {
#if defined(LATTE_AVX2_VNNI)
    (void)qa;
#else
    const __m256i ones = _mm256_set1_epi16(1);
#endif
    for (int k4 = k4b; k4 < k4e; ++k4) {
        const __m256i* kr = reinterpret_cast<const __m256i*>(kp + static_cast<size_t>(k4) * kTile * 4) + c0;
        const __m256i k0 = _mm256_load_si256(kr), k1 = _mm256_load_si256(kr + 1);
        // query row r against the two KV vectors, into accumulators a0, a1
#if defined(LATTE_AVX2_VNNI)
        // kp holds k + 128 (pack_k_q8), the accumulators start at −128·Σq (acc_start)
#define LATTE_DOT_ROW(r, a0, a1)                                                  \
    do {                                                                          \
        const __m256i qb = bcast4(q[r] + 4 * k4);                                 \
        LATTE_DPBUSD(a0, k0, qb);                                                 \
        LATTE_DPBUSD(a1, k1, qb);                                                 \
    } while (0)
#else
#define LATTE_DOT_ROW(r, a0, a1)                                                  \
    do {                                                                          \
        const __m256i qb = bcast4(q[r] + 4 * k4), ab = bcast4(qa[r] + 4 * k4);    \
        LATTE_DOT4(a0, ab, qb, k0);                                               \
        LATTE_DOT4(a1, ab, qb, k1);                                               \
    } while (0)
#endif
        LATTE_DOT_ROW(0, A.a00, A.a01);
        if constexpr (R > 1) LATTE_DOT_ROW(1, A.a10, A.a11);
        if constexpr (R > 2) LATTE_DOT_ROW(2, A.a20, A.a21);
        if constexpr (R > 3) LATTE_DOT_ROW(3, A.a30, A.a31);
#undef LATTE_DOT_ROW
    }
}

// The accumulators' start for R rows and query block b: 0, or with AVX-VNNI −128·Σ_{k in b} q_rk
// (qs[r][b], quantize_q), the correction for the u8 K (k + 128) of the packed tile.
template <int R>
inline AccR4 acc_start(const int32_t* const* qs, int b) {
    __m256i s[4];
    for (int r = 0; r < 4; ++r) {
#if defined(LATTE_AVX2_VNNI)
        s[r] = _mm256_set1_epi32(r < R ? -128 * qs[r][b] : 0);
#else
        (void)qs, (void)b;
        s[r] = _mm256_setzero_si256();
#endif
    }
    return AccR4{s[0], s[0], s[1], s[1], s[2], s[2], s[3], s[3]};
}

// q8_KV: S[r][j] = (dq_r·scale) · d_j · Σ_k q_rk k_jk, KV vectors c0, c0+1 (qa: |q|; qs: Σ q per row).
template <int R>
void qk_q8kv(const int8_t* const* q, const int8_t* const* qa, const int32_t* const* qs, const float* qd, int Dk,
             const uint8_t* kp, const float* ks, int c0, float* S) {
    AccR4 A = acc_start<R>(qs, 0);
    dot_rows<R>(A, q, qa, kp, c0, 0, Dk / 4);
    const __m256i acc[4][2] = {{A.a00, A.a01}, {A.a10, A.a11}, {A.a20, A.a21}, {A.a30, A.a31}};
    const __m256 d0 = _mm256_load_ps(ks + 8 * c0), d1 = _mm256_load_ps(ks + 8 * c0 + 8);
    for (int r = 0; r < R; ++r) {
        const __m256 dq = _mm256_set1_ps(qd[r]);
        _mm256_store_ps(S + r * kTile + 8 * c0, _mm256_mul_ps(_mm256_cvtepi32_ps(acc[r][0]), _mm256_mul_ps(dq, d0)));
        _mm256_store_ps(S + r * kTile + 8 * c0 + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(acc[r][1]), _mm256_mul_ps(dq, d1)));
    }
}

// q8_0: per 32-block b: S += (dq_rb·scale) · d_jb · Σ_{k in b} q_rk k_jk, KV vectors c0, c0+1. The f32
// sums go through S (L1) per block, which leaves the registers to the 8 int32 accumulators.
template <int R>
void qk_q80(const int8_t* const* q, const int8_t* const* qa, const int32_t* const* qs, const float* const* qd, int Dk,
            const uint8_t* kp, const float* ks, int c0, float* S) {
    for (int b = 0; b < Dk / 32; ++b) {
        AccR4 A = acc_start<R>(qs, b);
        dot_rows<R>(A, q, qa, kp, c0, 8 * b, 8 * b + 8);
        const __m256i acc[4][2] = {{A.a00, A.a01}, {A.a10, A.a11}, {A.a20, A.a21}, {A.a30, A.a31}};
        const __m256 d0 = _mm256_load_ps(ks + b * kTile + 8 * c0), d1 = _mm256_load_ps(ks + b * kTile + 8 * c0 + 8);
        for (int r = 0; r < R; ++r) {
            const __m256 dq = _mm256_set1_ps(qd[r][b]);
            float* sr = S + r * kTile + 8 * c0;
            const __m256 s0 = b == 0 ? _mm256_setzero_ps() : _mm256_load_ps(sr);
            const __m256 s1 = b == 0 ? _mm256_setzero_ps() : _mm256_load_ps(sr + 8);
            _mm256_store_ps(sr, _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r][0]), _mm256_mul_ps(dq, d0), s0));
            _mm256_store_ps(sr + 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r][1]), _mm256_mul_ps(dq, d1), s1));
        }
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

// Quantises one query row for Q·Kᵀ: q (int8, round to nearest even), qa = |q|, qd = d·scale and
// qs = Σ q per block (q8_KV: one block of Dk, q8_0: blocks of 32).
void quantize_q(GGMLType kt, const float* x, int Dk, float scale, int8_t* q, int8_t* qa, float* qd, int32_t* qs) {
    const int bs = kt == GGMLType::Q8_KV ? Dk : 32;
    for (int b = 0; b < Dk / bs; ++b) {
        __m256i sum = _mm256_setzero_si256();  // Σ (q + 128) in 4 u64 lanes (vpsadbw)
        const float* xb = x + b * bs;
        const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
        __m256 amax = _mm256_setzero_ps();
        for (int k = 0; k < bs; k += 8) amax = _mm256_max_ps(amax, _mm256_and_ps(absmask, _mm256_loadu_ps(xb + k)));
        const float d = hmax(amax) / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        // round(x·id) to nearest even (the MXCSR default, as std::nearbyint), 32 at a time
        const __m256 idv = _mm256_set1_ps(id);
        for (int k = 0; k < bs; k += 32) {
            __m256i v[4];
            for (int x = 0; x < 4; ++x) v[x] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + k + 8 * x), idv));
            const __m256i w = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
            // packs interleave the 128-bit lanes: dwords 0 4 1 5 2 6 3 7 hold elements 0-3, 4-7, ...
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * bs + k),
                                _mm256_permutevar8x32_epi32(w, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
            sum = _mm256_add_epi64(sum, _mm256_sad_epu8(_mm256_xor_si256(w, _mm256_set1_epi8(static_cast<char>(0x80))),
                                                        _mm256_setzero_si256()));
        }
        qd[b] = d * scale;
        alignas(32) int64_t s4[4];
        _mm256_store_si256(reinterpret_cast<__m256i*>(s4), sum);
        qs[b] = static_cast<int32_t>(s4[0] + s4[1] + s4[2] + s4[3] - 128 * static_cast<int64_t>(bs));
    }
    for (int k = 0; k < Dk; k += 32) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + k));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(qa + k), _mm256_abs_epi8(v));
    }
}

// ---- int16 P·V for q8 V ----------------------------------------------------------------------
// Packs columns [c0, c0+w) (w = 32 or 64) of q8 V rows [0, 2·np) as int16 pairs of rows:
// vp[p][c] = 32-bit lane {v[2p][c0+c], v[2p+1][c0+c]} (pair stride 2·w int16; rows >= nt are zero).
[[maybe_unused]] void pack_v_i16(const uint8_t* V, size_t ldv, GGMLType vt, int nt, int np, int c0, int w, int16_t* vp) {
    const bool kv = vt == GGMLType::Q8_KV;
    const __m128i zero = _mm_setzero_si128();
    for (int p = 0; p < np; ++p) {
        const uint8_t* ra = V + static_cast<size_t>(2 * p) * ldv;
        const bool hb = 2 * p + 1 < nt;
        int16_t* dst = vp + static_cast<size_t>(p) * 2 * w;
        for (int g = 0; g < w; g += 16) {
            const int c = c0 + g;
            const size_t off =
                kv ? sizeof(RowQ8KVHeader) + c : static_cast<size_t>(c / 32) * sizeof(BlockQ8_0) + 2 + c % 32;
            const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ra + off));
            const __m128i b = hb ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(ra + ldv + off)) : zero;
            auto* d = reinterpret_cast<__m256i*>(dst + 2 * g);
            _mm256_store_si256(d, _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(a, b)));
            _mm256_store_si256(d + 1, _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(a, b)));
        }
    }
}

// Packs one pair of q8 V rows (a, and b or zeros when b is null) in full, into the layout pack_v_i16
// gives each 64-column chunk, for a whole tile prepacked at once: vpre[c0/64][p][w][2] with T/2
// pairs per chunk (the 16-row path packs each pair right after Q·Kᵀ has read its K rows, hot in L1).
template <bool KV>
inline void pack_pair_i16(const uint8_t* a, const uint8_t* b, int Dv, int T, int p, int16_t* vpre) {
    const __m128i zero = _mm_setzero_si128();
    for (int c0 = 0; c0 < Dv; c0 += 64) {
        const int w = std::min(64, Dv - c0);
        int16_t* dst = vpre + static_cast<size_t>(c0 / 64) * (T / 2) * 128 + static_cast<size_t>(p) * 2 * w;
        for (int g = 0; g < w; g += 16) {
            const int c = c0 + g;
            const size_t off =
                KV ? sizeof(RowQ8KVHeader) + c : static_cast<size_t>(c / 32) * sizeof(BlockQ8_0) + 2 + c % 32;
            const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + off));
            const __m128i y = b ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + off)) : zero;
            auto* d = reinterpret_cast<__m256i*>(dst + 2 * g);
            _mm256_store_si256(d, _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(x, y)));
            _mm256_store_si256(d + 1, _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(x, y)));
        }
    }
}

[[maybe_unused]] inline void pack_pair(GGMLType vt, const uint8_t* a, const uint8_t* b, int Dv, int T, int p, int16_t* vpre) {
    if (vt == GGMLType::Q8_KV) pack_pair_i16<true>(a, b, Dv, T, p, vpre);
    else pack_pair_i16<false>(a, b, Dv, T, p, vpre);
}

#if defined(LATTE_AVX2_VNNI)
// ---- u8 P·V (AVX-VNNI build): vpdpbusd of u8 P × s8 V, 32 products per instruction ----------
// (vpdpwssd's int16 pairs do 16.) V as quads of KV rows per 32-bit lane, P·d quantised to u8 per
// query row and tile (scale max/255, avx512's int8 P·V), int32 sums (|Σ| <= 128·255·128 < 2^31).
// The 16 int8 of columns [c, c+16) of 4 rows (null: zeros) as 4 lanes each, in column order:
// dst[4i + x] = row x's column c + i.
inline void pack_quad16(const uint8_t* const r[4], size_t off, uint8_t* dst) {
    const __m128i zero = _mm_setzero_si128();
    __m128i x[4];
    for (int i = 0; i < 4; ++i) x[i] = r[i] ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(r[i] + off)) : zero;
    const __m128i t0 = _mm_unpacklo_epi8(x[0], x[1]), t1 = _mm_unpackhi_epi8(x[0], x[1]);
    const __m128i u0 = _mm_unpacklo_epi8(x[2], x[3]), u1 = _mm_unpackhi_epi8(x[2], x[3]);
    auto* d = reinterpret_cast<__m128i*>(dst);
    _mm_store_si128(d, _mm_unpacklo_epi16(t0, u0));
    _mm_store_si128(d + 1, _mm_unpackhi_epi16(t0, u0));
    _mm_store_si128(d + 2, _mm_unpacklo_epi16(t1, u1));
    _mm_store_si128(d + 3, _mm_unpackhi_epi16(t1, u1));
}
inline size_t v_off(bool kv, int c) {
    return kv ? sizeof(RowQ8KVHeader) + c : static_cast<size_t>(c / 32) * sizeof(BlockQ8_0) + 2 + c % 32;
}
// Columns [c0, c0+w) of one quad of q8 V rows (null: zeros) as dst[c][4].
inline void pack_quad_cols(bool kv, const uint8_t* const r[4], int c0, int w, uint8_t* dst) {
    for (int g = 0; g < w; g += 16) pack_quad16(r, v_off(kv, c0 + g), dst + 4 * g);
}
// Columns [c0, c0+w) of q8 V rows [0, 4·nq) as quads: vp[q][c][4] (quad stride 4·w bytes; rows >= nt zero).
void pack_v_u8(const uint8_t* V, size_t ldv, GGMLType vt, int nt, int nq, int c0, int w, uint8_t* vp) {
    for (int q = 0; q < nq; ++q) {
        const uint8_t* r[4];
        for (int x = 0; x < 4; ++x) r[x] = 4 * q + x < nt ? V + static_cast<size_t>(4 * q + x) * ldv : nullptr;
        pack_quad_cols(vt == GGMLType::Q8_KV, r, c0, w, vp + static_cast<size_t>(q) * 4 * w);
    }
}
// One quad of V rows (null: zeros) in full, in pack_v_u8's layout per 64-column chunk, for a tile
// prepacked at once: chunk c0/64 at vpre + (c0/64)·(T/4)·256, quad q at + 4·w·q.
inline void pack_quad(GGMLType vt, const uint8_t* const r[4], int Dv, int T, int q, uint8_t* vpre) {
    for (int c0 = 0; c0 < Dv; c0 += 64) {
        const int w = std::min(64, Dv - c0);
        pack_quad_cols(vt == GGMLType::Q8_KV, r, c0, w,
                       vpre + static_cast<size_t>(c0 / 64) * (T / 4) * 256 + static_cast<size_t>(q) * 4 * w);
    }
}
// Pq[r][j] = round(P[r][j]·vd[j]·pinv[r]) as u8 (<= 255: vd[j] <= dmax[j]) for rows [0, rows),
// j in [0, 4·nq) rounded up to 32 (row stride T in P and Pq); pinv null: P already holds P·pinv.
// (q8_0 V: P·d_jb per 32-column block with the row's one scale, from the largest block scale of
// each KV row, as the int16 P·V. Scaling each block by its own max, as avx512 does, moved the
// worst error against f32 P·V only from 1.54e-2 to 1.52e-2 of max |O| and cost 15% of TG 16 heads
// @ 4K: a max pass per row and block.)
inline void p_to_u8(const float* P, int T, int rows, int nq, const float* vd, const float* pinv, uint8_t* pq) {
    const int nv = (4 * nq + 31) / 32;  // vectors of 32 u8
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int r = 0; r < rows; ++r) {
        const float* p = P + r * T;
        const __m256 inv = _mm256_set1_ps(pinv ? pinv[r] : 1.0f);
        for (int c = 0; c < nv; ++c) {
            __m256i x[4];
            for (int i = 0; i < 4; ++i)
                x[i] = _mm256_cvtps_epi32(_mm256_mul_ps(
                    _mm256_mul_ps(_mm256_load_ps(p + 32 * c + 8 * i), _mm256_load_ps(vd + 32 * c + 8 * i)), inv));
            // packus within 128-bit lanes gives [x0 0-3, x1 0-3, x2 0-3, x3 0-3 | x0 4-7, ...]
            const __m256i b = _mm256_packus_epi16(_mm256_packus_epi32(x[0], x[1]), _mm256_packus_epi32(x[2], x[3]));
            _mm256_store_si256(reinterpret_cast<__m256i*>(pq + r * T + 32 * c), _mm256_permutevar8x32_epi32(b, perm));
        }
    }
}
constexpr float kPvQmax = 255.0f;   // u8 P
#else
constexpr float kPvQmax = 32767.0f; // int16 P
#endif

// Per row of the tile: pinv[r] = kPvQmax / max_j P[r][j]·dmax[j] (0 for an all-zero row) and
// ps[r] = 1 / pinv[r], the scale of the row's u8 / int16 P·d (dmax[j]: the largest V scale of row j).
inline void p_scale(const float* P, int T, int rows, const float* dmax, float* pinv, float* ps) {
    for (int r = 0; r < rows; ++r) {
        const float* p = P + r * T;
        __m256 mx = _mm256_setzero_ps();
        for (int c = 0; c < T / 8; ++c)
            mx = _mm256_max_ps(mx, _mm256_mul_ps(_mm256_load_ps(p + 8 * c), _mm256_load_ps(dmax + 8 * c)));
        const float m = hmax(mx);
        pinv[r] = m > 0.0f ? kPvQmax / m : 0.0f;
        ps[r] = m / kPvQmax;
    }
}

// Pq[r][j] = round(P[r][j]·vd[j]·pinv[r]) as int16 (|.| <= 32767 since vd[j] <= dmax[j]) for rows
// [0, rows), j in [0, 2·np) (row stride T in P and Pq). pinv null: P already holds P·pinv (pv_q8's
// q8_0 path scales it once per tile).
[[maybe_unused]] inline void p_to_i16(const float* P, int T, int rows, int np, const float* vd, const float* pinv, int16_t* pq) {
    const int nv = (2 * np + 15) / 16;  // vectors of 16 int16
    for (int r = 0; r < rows; ++r) {
        const float* p = P + r * T;
        const __m256 inv = _mm256_set1_ps(pinv ? pinv[r] : 1.0f);
        for (int c = 0; c < nv; ++c) {
            __m256 x0 = _mm256_mul_ps(_mm256_load_ps(p + 16 * c), _mm256_load_ps(vd + 16 * c));
            __m256 x1 = _mm256_mul_ps(_mm256_load_ps(p + 16 * c + 8), _mm256_load_ps(vd + 16 * c + 8));
            if (pinv) {
                x0 = _mm256_mul_ps(x0, inv);
                x1 = _mm256_mul_ps(x1, inv);
            }
            const __m256i a = _mm256_cvtps_epi32(x0), b = _mm256_cvtps_epi32(x1);
            _mm256_store_si256(reinterpret_cast<__m256i*>(pq + r * T + 16 * c),
                               _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8));
        }
    }
}

// acc += madd(a, b) (int16 pairs into int32 lanes: |Σ| <= 128·32767·128 < 2^31 over a tile): one
// vpdpwssd with AVX-VNNI
#if defined(LATTE_AVX2_VNNI)
#define LATTE_MADD_ADD(acc, a, b) asm("%{vex%} vpdpwssd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(b))
#else
#define LATTE_MADD_ADD(acc, a, b)                                  \
    do {                                                           \
        const __m256i t_ = _mm256_madd_epi16(a, b);                \
        asm("vpaddd %1, %0, %0" : "+x"(acc) : "x"(t_));            \
    } while (0)
#endif
// The int P·V step for R (1..4) rows and 16 columns: O[r][oc..oc+16) = O[r]·corr[r] + ps[r] ·
// Σ_{i < n} dot(w_ri, V_i), w_ri the 32-bit P word of row r at step i (pq + r·ldp + 4i bytes) and
// V_i two vectors at vp + i·vstride bytes. U8 (AVX-VNNI build only): w = 4 u8 P of a quad of KV
// rows, V_i quads of s8 rows, one vpdpbusd per vector; else w = an int16 pair of P, V_i int16
// pairs of rows, madd + add (vpdpwssd with AVX-VNNI). int32 sums either way (bounds above). O[r] + oc:
// the 16 columns.
template <int R, bool U8>
void pv_int(const uint8_t* pq, int ldp, int n, const uint8_t* vp, int vstride, const float* corr,
            const float* ps, float* const* O, int oc) {
#if defined(LATTE_AVX2_VNNI)
#define LATTE_PV_DOT(acc, a, b)                       \
    do {                                              \
        if constexpr (U8) LATTE_DPBUSD(acc, a, b);    \
        else LATTE_MADD_ADD(acc, a, b);               \
    } while (0)
#else
    static_assert(!U8, "u8 P·V needs the AVX-VNNI build");
#define LATTE_PV_DOT(acc, a, b) LATTE_MADD_ADD(acc, a, b)
#endif
    // named accumulators, pinned to registers by the asm (see LATTE_DOT4)
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
#define LATTE_PV2(r, x0, x1)                                       \
    do {                                                           \
        int32_t w;                                                 \
        std::memcpy(&w, pq + (r) * ldp + 4 * i, sizeof w);         \
        const __m256i pb = _mm256_set1_epi32(w);                   \
        LATTE_PV_DOT(x0, pb, v0);                                  \
        LATTE_PV_DOT(x1, pb, v1);                                  \
    } while (0)
    for (int i = 0; i < n; ++i) {
        const __m256i* v = reinterpret_cast<const __m256i*>(vp + i * vstride);
        const __m256i v0 = _mm256_load_si256(v), v1 = _mm256_load_si256(v + 1);
        LATTE_PV2(0, c00, c01);
        if constexpr (R > 1) LATTE_PV2(1, c10, c11);
        if constexpr (R > 2) LATTE_PV2(2, c20, c21);
        if constexpr (R > 3) LATTE_PV2(3, c30, c31);
    }
#undef LATTE_PV2
#undef LATTE_PV_DOT
    const __m256i acc[4][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
    for (int r = 0; r < R; ++r) {
        const __m256 cr = _mm256_set1_ps(corr[r]), sr = _mm256_set1_ps(ps[r]);
        float* o = O[r] + oc;
        for (int x = 0; x < 2; ++x)
            _mm256_storeu_ps(o + 8 * x, _mm256_fmadd_ps(sr, _mm256_cvtepi32_ps(acc[r][x]),
                                                        _mm256_mul_ps(cr, _mm256_loadu_ps(o + 8 * x))));
    }
}

template <bool U8>
void pv_int_rows(int rows, const uint8_t* pq, int ldp, int n, const uint8_t* vp, int vstride,
                 const float* corr, const float* ps, float* const* O, int oc) {
    switch (rows) {
        case 4: return pv_int<4, U8>(pq, ldp, n, vp, vstride, corr, ps, O, oc);
        case 3: return pv_int<3, U8>(pq, ldp, n, vp, vstride, corr, ps, O, oc);
        case 2: return pv_int<2, U8>(pq, ldp, n, vp, vstride, corr, ps, O, oc);
        default: return pv_int<1, U8>(pq, ldp, n, vp, vstride, corr, ps, O, oc);
    }
}

// The build's int P·V: KV rows per 32-bit P word and V lane (AVX-VNNI: u8 quads, else int16
// pairs), its P element, and the packing / P conversion of that layout.
#if defined(LATTE_AVX2_VNNI)
constexpr int kPvG = 4;
using PvElem = uint8_t;
#else
constexpr int kPvG = 2;
using PvElem = int16_t;
#endif
// Columns [c0, c0+w) of V rows [0, kPvG·ng) (pack_v_u8 / pack_v_i16).
inline void pack_v_int(const uint8_t* V, size_t ldv, GGMLType vt, int nt, int ng, int c0, int w, PvElem* vp) {
#if defined(LATTE_AVX2_VNNI)
    pack_v_u8(V, ldv, vt, nt, ng, c0, w, vp);
#else
    pack_v_i16(V, ldv, vt, nt, ng, c0, w, vp);
#endif
}
// P·d as the build's P elements for KV rows [0, kPvG·ng) (p_to_u8 / p_to_i16).
inline void p_to_int(const float* P, int T, int rows, int ng, const float* vd, const float* pinv, PvElem* pq) {
#if defined(LATTE_AVX2_VNNI)
    p_to_u8(P, T, rows, ng, vd, pinv, pq);
#else
    p_to_i16(P, T, rows, ng, vd, pinv, pq);
#endif
}

struct PvBufs {
    PvElem* vp = nullptr;     // V chunk in the build's layout: [kMaxT/kPvG][64][kPvG] elements
    float* vd = nullptr;      // V scales vd[b][j]
    float* dmax = nullptr;    // max_b vd[b][j]
    PvElem* pq = nullptr;     // P·d of the superblock's rows, [2 blocks][kRowsSB][kMaxT]
    float* pinv = nullptr;    // per row: kPvQmax / max P·d
    float* ps = nullptr;      // per row: the P scale
};

PvBufs pv_bufs(Scratch& sc, GGMLType vt, int Dv) {
    PvBufs b;
    const int nbv = vt == GGMLType::Q8_0 ? Dv / 32 : 1;
    b.vp = sc.vb.get<PvElem>(static_cast<size_t>(kMaxT) * 64);
    b.vd = sc.vd.get<float>(static_cast<size_t>(nbv + 1) * kMaxT);
    b.dmax = b.vd + static_cast<size_t>(nbv) * kMaxT;
    b.pq = sc.pq.get<PvElem>(static_cast<size_t>(2) * kRowsSB * kMaxT);
    b.pinv = sc.ps.get<float>(2 * kRowsSB);
    b.ps = b.pinv + kRowsSB;
    return b;
}

// O += P V for a q8 V tile, in int16 (AVX-VNNI: u8): P·d per row quantised with one scale per row and tile
// (p_scale), V as int16 pairs (u8 quads) of rows in chunks of 64 columns (L1) shared by every row
// block of the superblock; q8_0: P·d_jb re-quantised per 32-column block with the row's scale.
// P: S[r][j] (0 past each row's visible end; q8_0 scales it by the row's pinv in place), rows
// [0, mb) of O from O0 (stride ldo); nj_blk: the visible KV rows of each block of kRB rows (0:
// skipped); ksv: the K tile's q8_0 block scales when V is the prefix of a q8_0 K row (then V's
// scales are its first Dv/32), else null.
void pv_q8(float* S, int T, int mb, const int* nj_blk, int nj_all, int nt, const uint8_t* Vtile, size_t ldv,
           GGMLType vt, int Dv, const float* ksv, const float* corr, float* O0, int64_t ldo, const PvBufs& bf,
           const PvElem* vpre = nullptr) {
    const int nbv = vt == GGMLType::Q8_0 ? Dv / 32 : 1;
    const float* vd = bf.vd;
    if (vt == GGMLType::Q8_KV) {
        for (int j = 0; j < T; ++j) {
            float d = 0.0f;
            if (j < nt) std::memcpy(&d, Vtile + static_cast<size_t>(j) * ldv, sizeof d);
            bf.vd[j] = d;
        }
        std::memcpy(bf.dmax, bf.vd, T * sizeof(float));
    } else {
        if (ksv) {
            vd = ksv;
        } else {
            for (int j = 0; j < T; ++j) {
                const uint8_t* row = Vtile + static_cast<size_t>(j) * ldv;
                for (int b = 0; b < nbv; ++b) {
                    uint16_t h = 0;
                    if (j < nt) std::memcpy(&h, row + static_cast<size_t>(b) * sizeof(BlockQ8_0), sizeof h);
                    bf.vd[b * T + j] = _cvtsh_ss(h);
                }
            }
        }
        for (int c = 0; c < T / 8; ++c) {
            __m256 m = _mm256_load_ps(vd + 8 * c);
            for (int b = 1; b < nbv; ++b) m = _mm256_max_ps(m, _mm256_load_ps(vd + b * T + 8 * c));
            _mm256_store_ps(bf.dmax + 8 * c, m);
        }
    }
    for (int i0 = 0; i0 < mb; i0 += kRB)
        if (nj_blk[i0 / kRB] > 0) {
            const int rb = std::min(kRB, mb - i0);
            p_scale(S + i0 * T, T, rb, bf.dmax, bf.pinv + i0, bf.ps + i0);
            if (vt == GGMLType::Q8_KV) {
                p_to_int(S + i0 * T, T, rb, (nj_blk[i0 / kRB] + kPvG - 1) / kPvG, vd, bf.pinv + i0,
                         bf.pq + i0 * T);
            } else {
                // q8_0 quantises P·d per 32-column block below: P·pinv once here, not per block
                // (the same products in another order: the int16 P may differ by one step)
                const int nv = (nj_blk[i0 / kRB] + 1) / 2 * 2;
                for (int r = 0; r < rb; ++r) {
                    float* p = S + (i0 + r) * T;
                    const __m256 inv = _mm256_set1_ps(bf.pinv[i0 + r]);
                    for (int c = 0; c < (nv + 15) / 16 * 16; c += 8)
                        _mm256_store_ps(p + c, _mm256_mul_ps(_mm256_load_ps(p + c), inv));
                }
            }
        }
    const int ng_all = (nj_all + kPvG - 1) / kPvG;
    for (int c0 = 0; c0 < Dv; c0 += 64) {
        const int w = std::min(64, Dv - c0);
        // chunk c0/64 of the prepacked tile: T/kPvG groups × 64 columns × 4 bytes
        const uint8_t* vp = reinterpret_cast<const uint8_t*>(bf.vp);
        if (vpre) vp = reinterpret_cast<const uint8_t*>(vpre + static_cast<size_t>(c0 / 64) * T * 64);
        else pack_v_int(Vtile, ldv, vt, nt, ng_all, c0, w, bf.vp);
        if (vt == GGMLType::Q8_0)
            for (int h = 0; h < w; h += 32)
                for (int i0 = 0; i0 < mb; i0 += kRB)
                    if (nj_blk[i0 / kRB] > 0)
                        p_to_int(S + i0 * T, T, std::min(kRB, mb - i0), (nj_blk[i0 / kRB] + kPvG - 1) / kPvG,
                                 vd + static_cast<size_t>((c0 + h) / 32) * T, nullptr,
                                 bf.pq + static_cast<size_t>(h / 32) * kRowsSB * T + i0 * T);
        for (int i0 = 0; i0 < mb; i0 += kRB) {
            const int nj = nj_blk[i0 / kRB];
            if (nj == 0) continue;
            const int rb = std::min(kRB, mb - i0), ng = (nj + kPvG - 1) / kPvG;
            float* Op[kRB];
            for (int r = 0; r < rb; ++r) Op[r] = O0 + (i0 + r) * ldo + c0;
            for (int h = 0; h < w; h += 16) {
                const PvElem* pqh = bf.pq + (vt == GGMLType::Q8_0 ? static_cast<size_t>(h / 32) * kRowsSB * T : 0);
                // 16 columns at byte 4h of each group; groups 4w bytes apart
                for (int r = 0; r < rb; r += 4)
                    pv_int_rows<kPvG == 4>(std::min(4, rb - r), reinterpret_cast<const uint8_t*>(pqh + (i0 + r) * T),
                                           static_cast<int>(sizeof(PvElem)) * T, ng, vp + 4 * h, 4 * w,
                                           corr + i0 + r, bf.ps + i0 + r, Op + r, h);
            }
        }
    }
}

// ---- 8 < rows <= 16 (TG with 16 heads): the query rows as the lanes of two vectors ------------
// Q·Kᵀ of J KV rows read in place (no packed K tile) for the 16 rows: qp[k/4][16][4] (raw q) and
// qap (|q|), lanes 0..7 in the first vector, 8..15 in the second; per KV row the 4 bytes of K at k are
// broadcast and multiplied as maddubs(|q|, sign(k, q)) (LATTE_DOT4). q8_KV:
//   St[j][r] = (qd_r · d_j) · Σ_k q_rk k_jk.
// J (1, 2 or 4) KV rows × 16 query rows: S_x (lanes 0..7: acc x0, 8..15: acc x1) over the int8 values at
// kq (row stride ldk) for k in [k4b·4, k4e·4); qp/qap: the query layout of flash_rows16. The
// accumulators are the general path's AccR4 (a<KV row><half>).
// With AVX-VNNI one vpdpbusd per product (see LATTE_DPBUSD): KU8 (q8_0, copy_k16_q80) the K bytes
// are k + 128 (u8) against the s8 query (accumulators started at −128·Σ_b q); otherwise (q8_KV) qp
// holds q + 128 as u8 against the s8 K bytes (the caller subtracts 128·Σk from the K row header).
template <int J, bool KU8>
inline void dot16(AccR4& A, const int8_t* qp, const int8_t* qap, const int8_t* kq, size_t ldk, int k4b, int k4e,
                  int kofs) {
#if defined(LATTE_AVX2_VNNI)
    (void)qap;
#define LATTE_D16(a0, a1, kb)                 \
    do {                                      \
        const __m256i k_ = kb;                \
        if constexpr (KU8) {                  \
            LATTE_DPBUSD(a0, k_, q0);         \
            LATTE_DPBUSD(a1, k_, q1);         \
        } else {                              \
            LATTE_DPBUSD(a0, q0, k_);         \
            LATTE_DPBUSD(a1, q1, k_);         \
        }                                     \
    } while (0)
#pragma GCC unroll 8
    for (int k4 = k4b; k4 < k4e; ++k4) {
        const __m256i q0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(qp + 64 * k4));
        const __m256i q1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(qp + 64 * k4 + 32));
        const int8_t* kk = kq + 4 * (k4 - kofs);
        LATTE_D16(A.a00, A.a01, bcast4(kk));
        if constexpr (J > 1) LATTE_D16(A.a10, A.a11, bcast4(kk + ldk));
        if constexpr (J > 2) {
            LATTE_D16(A.a20, A.a21, bcast4(kk + 2 * ldk));
            LATTE_D16(A.a30, A.a31, bcast4(kk + 3 * ldk));
        }
    }
#undef LATTE_D16
#else
    const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 8
    for (int k4 = k4b; k4 < k4e; ++k4) {
        const __m256i a0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(qap + 64 * k4));
        const __m256i a1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(qap + 64 * k4 + 32));
        const __m256i q0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(qp + 64 * k4));
        const __m256i q1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(qp + 64 * k4 + 32));
        const int8_t* kk = kq + 4 * (k4 - kofs);
        const __m256i k0 = bcast4(kk);
        LATTE_DOT4(A.a00, a0, q0, k0);
        LATTE_DOT4(A.a01, a1, q1, k0);
        if constexpr (J > 1) {
            const __m256i k1 = bcast4(kk + ldk);
            LATTE_DOT4(A.a10, a0, q0, k1);
            LATTE_DOT4(A.a11, a1, q1, k1);
        }
        if constexpr (J > 2) {
            const __m256i k2 = bcast4(kk + 2 * ldk);
            LATTE_DOT4(A.a20, a0, q0, k2);
            LATTE_DOT4(A.a21, a1, q1, k2);
            const __m256i k3 = bcast4(kk + 3 * ldk);
            LATTE_DOT4(A.a30, a0, q0, k3);
            LATTE_DOT4(A.a31, a1, q1, k3);
        }
    }
#endif
}

// q8_KV: St[j][r] = (qd_r · d_j) · Σ_k q_rk k_jk for J KV rows (K: the first of them).
template <int J>
inline void qk16_q8kv(const int8_t* qp, const int8_t* qap, int Dk, const uint8_t* K, size_t ldk, __m256 qd0,
                      __m256 qd1, float* St) {
    const __m256i z = _mm256_setzero_si256();
    AccR4 A{z, z, z, z, z, z, z, z};
    dot16<J, false>(A, qp, qap, reinterpret_cast<const int8_t*>(K + sizeof(RowQ8KVHeader)), ldk, 0, Dk / 4, 0);
    const __m256i acc[4][2] = {{A.a00, A.a01}, {A.a10, A.a11}, {A.a20, A.a21}, {A.a30, A.a31}};
    for (int x = 0; x < J; ++x) {
        RowQ8KVHeader h;
        std::memcpy(&h, K + x * ldk, sizeof h);
#if defined(LATTE_AVX2_VNNI)
        const __m256i c = _mm256_set1_epi32(128 * h.sum);  // qp holds q + 128
#else
        const __m256i c = z;
#endif
        const __m256 dv = _mm256_set1_ps(h.d);
        _mm256_store_ps(St + 16 * x, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(acc[x][0], c)), _mm256_mul_ps(qd0, dv)));
        _mm256_store_ps(St + 16 * x + 8,
                        _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(acc[x][1], c)), _mm256_mul_ps(qd1, dv)));
    }
}

// Copies J q8_0 K rows (stride ldk) for qk16_q80 into L1: kc[x][32·nb] the int8 values without the
// block scales (with AVX-VNNI flipped to u8, k + 128: vpdpbusd's u8 operand, one vpxor per 32 bytes
// instead of one per broadcast 4), kdf[x][nb] the scales as f32, and kd[b·kT16 + x] (when not null)
// those of blocks b < nbv (V's scales, when V is the prefix of the K row).
template <int J>
inline void copy_k16_q80(const uint8_t* K, size_t ldk, int nb, int8_t* kc, float* kdf, float* kd, int nbv) {
#if defined(LATTE_AVX2_VNNI)
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
#endif
    for (int x = 0; x < J; ++x) {
        const uint8_t* row = K + x * ldk;
        for (int b = 0; b < nb; ++b) {
            const uint8_t* blk = row + static_cast<size_t>(b) * sizeof(BlockQ8_0);
            __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
#if defined(LATTE_AVX2_VNNI)
            v = _mm256_xor_si256(v, flip);
#endif
            _mm256_store_si256(reinterpret_cast<__m256i*>(kc + (static_cast<size_t>(x) * nb + b) * 32), v);
            uint16_t h;
            std::memcpy(&h, blk, sizeof h);
            const float d = _cvtsh_ss(h);
            kdf[x * nb + b] = d;
            if (kd && b < nbv) kd[b * kT16 + x] = d;
        }
    }
}

// As qk16_q8kv for q8_0 K copied by copy_k16_q80 (kc, kdf): per 32-block b a fresh int32 sum, then
// St[j][r] += (qdb[b][r] · d_jb) · sum (qdb: the query's block scales times the softmax scale,
// [b][16]). qs16 (AVX-VNNI): the accumulators' start per block, −128·Σ_{k in b} q per row, [b][16].
template <int J>
inline void qk16_q80(const int8_t* qp, const int8_t* qap, int nb, const int8_t* kc, const float* kdf, const float* qdb,
                     const int32_t* qs16, float* St) {
    const size_t ldc = static_cast<size_t>(nb) * 32;
    for (int b = 0; b < nb; ++b) {
#if defined(LATTE_AVX2_VNNI)
        const __m256i z0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(qs16 + 16 * b));
        const __m256i z1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(qs16 + 16 * b + 8));
        AccR4 A{z0, z1, z0, z1, z0, z1, z0, z1};
#else
        (void)qs16;
        const __m256i z = _mm256_setzero_si256();
        AccR4 A{z, z, z, z, z, z, z, z};
#endif
        dot16<J, true>(A, qp, qap, kc + 32 * b, ldc, 8 * b, 8 * b + 8, 8 * b);
        const __m256i acc[4][2] = {{A.a00, A.a01}, {A.a10, A.a11}, {A.a20, A.a21}, {A.a30, A.a31}};
        const __m256 qd0 = _mm256_load_ps(qdb + 16 * b), qd1 = _mm256_load_ps(qdb + 16 * b + 8);
        for (int x = 0; x < J; ++x) {
            const __m256 dv = _mm256_broadcast_ss(kdf + x * nb + b);
            float* st = St + 16 * x;
            const __m256 z0 = b == 0 ? _mm256_setzero_ps() : _mm256_load_ps(st);
            const __m256 z1 = b == 0 ? _mm256_setzero_ps() : _mm256_load_ps(st + 8);
            _mm256_store_ps(st, _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[x][0]), _mm256_mul_ps(qd0, dv), z0));
            _mm256_store_ps(st + 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[x][1]), _mm256_mul_ps(qd1, dv), z1));
        }
    }
}

// Flash attention for one block of 8 < mb <= 16 query rows over a q8 K and q8 V (TG with 16 heads):
// Q·Kᵀ with the rows as lanes (qk16_*, K rows read in place), the online softmax on whole vectors
// across the tile's KV rows, then P transposed to rows for the int16 P·V of the general path (pv_q8).
// qq/qa/qd: the rows' quantised query, |q| and scales (quantize_q); O, m_out, l_out, kv_len: this
// block's rows.
void flash_rows16(int mb, int N, int Dk, int Dv, const int8_t* qq, const int8_t* qa, const float* qd,
                  const int32_t* qs, GGMLType kt,
                  const uint8_t* K, size_t ldk, GGMLType vt, const uint8_t* V, size_t ldv, const int* kv_len, float* O,
                  int64_t ldo, float* m_out, float* l_out, Scratch& sc, const PvBufs& pvb) {
    const int nb = Dk / 32;
    const bool kv = kt == GGMLType::Q8_KV;
    int8_t* qp = sc.q16.get<int8_t>(static_cast<size_t>(Dk) * 2 * 16);
    int8_t* qap = qp + static_cast<size_t>(Dk) * 16;
    // [k/4][16][4]: 8×8 transposes of 4-byte groups (rows >= mb zero)
    for (int h = 0; h < 2; ++h)
        for (int k0 = 0; k0 < Dk; k0 += 32)
            for (int which = 0; which < 2; ++which) {
                const int8_t* src = which ? qa : qq;
                int8_t* dst = which ? qap : qp;
                __m256 t[8];
                for (int x = 0; x < 8; ++x) {
                    const int r = 8 * h + x;
                    t[x] = r < mb ? _mm256_loadu_ps(reinterpret_cast<const float*>(src + static_cast<size_t>(r) * Dk + k0))
                                  : _mm256_setzero_ps();
                }
                transpose8(t);
                for (int x = 0; x < 8; ++x)  // x: the k4 step k0/4 + x
                    _mm256_store_ps(reinterpret_cast<float*>(dst + (static_cast<size_t>(k0 / 4 + x) * 16 + 8 * h) * 4),
                                    t[x]);
            }
    // query scales per lane: q8_KV one per row; q8_0 qdb[b][16]
    float* qdb = sc.qd16.get<float>(static_cast<size_t>(nb) * 16);
    const int qblocks = kv ? 1 : nb;
    for (int b = 0; b < qblocks; ++b)
        for (int r = 0; r < 16; ++r) qdb[16 * b + r] = r < mb ? qd[r * qblocks + b] : 0.0f;
    // AVX-VNNI (see dot16): q8_KV takes q + 128 as u8; q8_0 starts each block's sums at −128·Σ_b q
    int32_t* qs16 = nullptr;
#if defined(LATTE_AVX2_VNNI)
    if (kv) {
        const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
        for (size_t i = 0; i < static_cast<size_t>(Dk) * 16; i += 32) {
            auto* p = reinterpret_cast<__m256i*>(qp + i);
            _mm256_store_si256(p, _mm256_xor_si256(_mm256_load_si256(p), flip));
        }
    } else {
        qs16 = sc.qs16.get<int32_t>(static_cast<size_t>(nb) * 16);
        for (int b = 0; b < nb; ++b)
            for (int r = 0; r < 16; ++r) qs16[16 * b + r] = r < mb ? -128 * qs[r * nb + b] : 0;
    }
#else
    (void)qs;
#endif
    float* St = sc.st16.get<float>(static_cast<size_t>(kT16) * 16);  // scores, then P, as [j][r]
    float* S = sc.s16.get<float>(static_cast<size_t>(16) * kT16);  // P as [r][j]
    alignas(32) float corr[16], mrow[16], lrow[16];
    alignas(32) int32_t len[16];
    int nmax = 0;
    for (int r = 0; r < 16; ++r) {
        len[r] = r < mb ? std::min(kv_len[r], N) : 0;
        nmax = std::max(nmax, len[r]);
    }
    for (int r = 0; r < mb; ++r) std::memset(O + r * ldo, 0, static_cast<size_t>(Dv) * sizeof(float));
    const bool v_in_k = V == K && ldv == ldk;
    const size_t krow_bytes = row_bytes(kt, Dk), vrow_bytes = row_bytes(vt, Dv);
    // q8_0 V inside the q8_0 K row: Q·Kᵀ hands V's block scales to P·V (kd[b][j])
    const int nbv = Dv / 32;
    float* kd = !kv && v_in_k && vt == GGMLType::Q8_0 && Dv <= Dk
                    ? sc.kd16.get<float>(static_cast<size_t>(nbv) * kT16)
                    : nullptr;
    // q8_0 V: the tile's V prepacked as Q·Kᵀ goes (measured faster than packing 64-column chunks from
    // L2 afterwards, as q8_KV V is: its rows are contiguous, q8_0's split in 34-byte blocks)
    // (AVX-VNNI: q8_KV V too, as u8 quads: TG 16 heads @ 4K 1.04x, Zen 5, latte-attn-ab 9 rounds x 3;
    // the int16 pairs, twice the bytes, measured no faster)
#if defined(LATTE_AVX2_VNNI)
    constexpr bool kPrepackKV = true;
#else
    constexpr bool kPrepackKV = false;
#endif
    PvElem* vpre = vt == GGMLType::Q8_0 || kPrepackKV
                       ? sc.vp16.get<PvElem>(static_cast<size_t>(kT16) * Dv * 2)
                       : nullptr;
    // q8_0 K: 4 rows at a time copied without their block scales (and the scales as f32)
    int8_t* kc = kv ? nullptr : sc.kc16.get<int8_t>(static_cast<size_t>(4) * Dk + 4 * nb * sizeof(float));
    float* kdf = kv ? nullptr : reinterpret_cast<float*>(kc + static_cast<size_t>(4) * Dk);
    const __m256 ninf = _mm256_set1_ps(kNegInf), qd0 = _mm256_load_ps(qdb), qd1 = _mm256_load_ps(qdb + 8);
    const __m256i len0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(len));
    const __m256i len1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(len + 8));
    __m256 mv0 = ninf, mv1 = ninf, lv0 = _mm256_setzero_ps(), lv1 = lv0;
    for (int j0 = 0; j0 < nmax; j0 += kT16) {
        const int nt = std::min(kT16, nmax - j0);
        const uint8_t* Kt = K + static_cast<size_t>(j0) * ldk;
        const uint8_t* Vt = V + static_cast<size_t>(j0) * ldv;
        // V rows [ja, jb) packed as int16 pairs (AVX-VNNI: u8 quads) right after Q·Kᵀ has read
        // them (MQA: the same rows)
        auto pack_groups = [&](int ja, int jb) {
#if defined(LATTE_AVX2_VNNI)
            for (int jj = ja; jj < jb && vpre; jj += 4) {  // quads of rows for the u8 P·V
                const uint8_t* r[4];
                for (int x = 0; x < 4; ++x) r[x] = jj + x < nt ? Vt + static_cast<size_t>(jj + x) * ldv : nullptr;
                pack_quad(vt, r, Dv, kT16, jj / 4, vpre);
            }
#else
            for (int jj = ja; jj < jb && vpre; jj += 2)
                pack_pair(vt, Vt + static_cast<size_t>(jj) * ldv,
                          jj + 1 < nt ? Vt + static_cast<size_t>(jj + 1) * ldv : nullptr, Dv, kT16, jj / 2, vpre);
#endif
        };
        // rows kPfAhead ahead of each group of 4 are fetched while it is computed (a burst of the
        // next tile's rows at the tile start measured slower)
        auto prefetch_ahead = [&](int jj) {
            const int a = j0 + jj + kPfAhead, b = std::min(a + 4, nmax);
            if (a < b) {
                prefetch_rows(K + static_cast<size_t>(a) * ldk, ldk, b - a, krow_bytes);
                if (!v_in_k) prefetch_rows(V + static_cast<size_t>(a) * ldv, ldv, b - a, vrow_bytes);
            }
        };
        int j = 0;
        if (kv) {
            for (; j + 4 <= nt; j += 4) {
                prefetch_ahead(j);
                qk16_q8kv<4>(qp, qap, Dk, Kt + static_cast<size_t>(j) * ldk, ldk, qd0, qd1, St + 16 * j);
                pack_groups(j, j + 4);
            }
            for (; j < nt; ++j) qk16_q8kv<1>(qp, qap, Dk, Kt + static_cast<size_t>(j) * ldk, ldk, qd0, qd1, St + 16 * j);
        } else {
            for (; j + 4 <= nt; j += 4) {
                prefetch_ahead(j);
                copy_k16_q80<4>(Kt + static_cast<size_t>(j) * ldk, ldk, nb, kc, kdf, kd ? kd + j : nullptr, nbv);
                qk16_q80<4>(qp, qap, nb, kc, kdf, qdb, qs16, St + 16 * j);
                pack_groups(j, j + 4);
            }
            for (; j < nt; ++j) {
                copy_k16_q80<1>(Kt + static_cast<size_t>(j) * ldk, ldk, nb, kc, kdf, kd ? kd + j : nullptr, nbv);
                qk16_q80<1>(qp, qap, nb, kc, kdf, qdb, qs16, St + 16 * j);
            }
            if (kd)  // rows past the tile: scale 0 (pv_q8 reads them for the row max)
                for (int b = 0; b < nbv; ++b)
                    for (int x = nt; x < kT16; ++x) kd[b * kT16 + x] = 0.0f;
        }
        pack_groups(nt / 4 * 4, nt);
        // online softmax across the tile, 16 rows at once (lanes past a row's length are -inf, then 0)
        __m256 t0 = ninf, t1 = ninf;
        for (j = 0; j < nt; ++j) {
            const __m256i jv = _mm256_set1_epi32(j0 + j);
            const __m256 v0 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(len0, jv));
            const __m256 v1 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(len1, jv));
            const __m256 s0 = _mm256_blendv_ps(ninf, _mm256_load_ps(St + 16 * j), v0);
            const __m256 s1 = _mm256_blendv_ps(ninf, _mm256_load_ps(St + 16 * j + 8), v1);
            _mm256_store_ps(St + 16 * j, s0);
            _mm256_store_ps(St + 16 * j + 8, s1);
            t0 = _mm256_max_ps(t0, s0);
            t1 = _mm256_max_ps(t1, s1);
        }
        const __m256 mn0 = _mm256_max_ps(mv0, t0), mn1 = _mm256_max_ps(mv1, t1);
        // rows with nothing visible yet keep corr = 1 (their O and l are 0)
        const __m256 one = _mm256_set1_ps(1.0f);
        const __m256 c0 = _mm256_blendv_ps(exp_ps(_mm256_sub_ps(mv0, mn0)), one, _mm256_cmp_ps(mn0, ninf, _CMP_EQ_OQ));
        const __m256 c1 = _mm256_blendv_ps(exp_ps(_mm256_sub_ps(mv1, mn1)), one, _mm256_cmp_ps(mn1, ninf, _CMP_EQ_OQ));
        __m256 sum0 = _mm256_setzero_ps(), sum1 = sum0;
        for (j = 0; j < nt; ++j) {
            const __m256 s0 = _mm256_load_ps(St + 16 * j), s1 = _mm256_load_ps(St + 16 * j + 8);
            const __m256 p0 = _mm256_and_ps(_mm256_cmp_ps(s0, ninf, _CMP_NEQ_OQ), exp_ps(_mm256_sub_ps(s0, mn0)));
            const __m256 p1 = _mm256_and_ps(_mm256_cmp_ps(s1, ninf, _CMP_NEQ_OQ), exp_ps(_mm256_sub_ps(s1, mn1)));
            sum0 = _mm256_add_ps(sum0, p0);
            sum1 = _mm256_add_ps(sum1, p1);
            _mm256_store_ps(St + 16 * j, p0);
            _mm256_store_ps(St + 16 * j + 8, p1);
        }
        for (; j < kT16; ++j) {
            _mm256_store_ps(St + 16 * j, _mm256_setzero_ps());
            _mm256_store_ps(St + 16 * j + 8, _mm256_setzero_ps());
        }
        lv0 = _mm256_fmadd_ps(lv0, c0, sum0);
        lv1 = _mm256_fmadd_ps(lv1, c1, sum1);
        mv0 = mn0;
        mv1 = mn1;
        _mm256_store_ps(corr, c0);
        _mm256_store_ps(corr + 8, c1);
        // P to rows: S[r][j]
        for (int jb = 0; jb < kT16 / 8; ++jb)
            for (int h = 0; h < 2; ++h) {
                __m256 t[8];
                for (int x = 0; x < 8; ++x) t[x] = _mm256_load_ps(St + 16 * (8 * jb + x) + 8 * h);
                transpose8(t);
                for (int x = 0; x < 8; ++x) _mm256_store_ps(S + (8 * h + x) * kT16 + 8 * jb, t[x]);
            }
        int nj_blk[2] = {0, 0};
        for (int r = 0; r < mb; ++r) nj_blk[r / kRB] = std::max(nj_blk[r / kRB], std::clamp(len[r] - j0, 0, nt));
        const int nj_all = std::max(nj_blk[0], nj_blk[1]);
        pv_q8(S, kT16, mb, nj_blk, nj_all, nt, Vt, ldv, vt, Dv, kd, corr, O, ldo, pvb, vpre);
    }
    _mm256_store_ps(mrow, mv0);
    _mm256_store_ps(mrow + 8, mv1);
    _mm256_store_ps(lrow, lv0);
    _mm256_store_ps(lrow + 8, lv1);
    for (int r = 0; r < mb; ++r) {
        if (m_out) {
            m_out[r] = mrow[r];
            l_out[r] = lrow[r];
            continue;
        }
        float* o = O + r * ldo;
        const __m256 inv = _mm256_set1_ps(lrow[r] > 0.0f ? 1.0f / lrow[r] : 0.0f);
        for (int d = 0; d < Dv; d += 8) _mm256_storeu_ps(o + d, _mm256_mul_ps(inv, _mm256_loadu_ps(o + d)));
    }
}

// LATTE_ROWS16=0 turns the 16-row TG path off, to compare. Read on every call that could take it.
bool rows16_off() {
    const char* e = std::getenv("LATTE_ROWS16");
    return e && std::strcmp(e, "0") == 0;
}

void flash(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* Kv, size_t ldk, GGMLType kt,
           const void* Vv, size_t ldv, GGMLType vt, const int* kv_len, float scale, float* O, int64_t ldo,
           float* m_out, float* l_out) {
    const bool kq8 = kt == GGMLType::Q8_0 || kt == GGMLType::Q8_KV;
    const bool kfloat = kt == GGMLType::F32 || kt == GGMLType::F16 || kt == GGMLType::BF16;
    const bool vq8 = vt == GGMLType::Q8_0 || vt == GGMLType::Q8_KV;
    const bool vok = vt == GGMLType::F32 || vt == GGMLType::F16 || vt == GGMLType::BF16 || vq8;
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
    const bool v_in_k = V == K && ldv == ldk;  // MQA: V is a prefix of the K row
    const size_t krow_bytes = row_bytes(kt, Dk), vrow_bytes = row_bytes(vt, Dv);
    // f32/f16/bf16 V: f32 chunks vb[j][32]; q8 V: int16 pairs vp[j/2][64][2]
    float* vb = vt == GGMLType::F32 || vq8 ? nullptr : sc.vb.get<float>(static_cast<size_t>(kTile) * 32);
    PvBufs pvb;
    if (vq8) pvb = pv_bufs(sc, vt, Dv);
    int8_t* qq = kq8 ? sc.qq.get<int8_t>(static_cast<size_t>(2) * kRowsSB * Dk) : nullptr;
    int8_t* qa = kq8 ? qq + static_cast<size_t>(kRowsSB) * Dk : nullptr;
    float* qd = kq8 ? sc.qd.get<float>(static_cast<size_t>(kRowsSB) * qblocks) : nullptr;
    int32_t* qsum = kq8 ? sc.qs.get<int32_t>(static_cast<size_t>(kRowsSB) * qblocks) : nullptr;
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
                quantize_q(kt, Q + (r0 + i) * ldq, Dk, scale, qq + static_cast<size_t>(i) * Dk,
                           qa + static_cast<size_t>(i) * Dk, qd + i * qblocks, qsum + i * qblocks);
        if (kq8 && vq8 && mb > 8 && mb <= 16 && !rows16_off()) {
            flash_rows16(mb, N, Dk, Dv, qq, qa, qd, qsum, kt, K, ldk, vt, V, ldv, kv_len + r0, O + r0 * ldo, ldo,
                         m_out ? m_out + r0 : nullptr, m_out ? l_out + r0 : nullptr, sc, pvb);
            continue;
        }
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
            int nj_blk[kRowsSB / kRB], nj_all = 0;
            for (int i0 = 0; i0 < mb; i0 += kRB) {
                const int rb = std::min(kRB, mb - i0);
                float* const Sb = S + i0 * kTile;  // this row block's scores
                int vis[kRB], nj = 0;
                for (int r = 0; r < rb; ++r) {
                    vis[r] = std::clamp(std::min(kv_len[r0 + i0 + r], N) - j0, 0, nt);
                    nj = std::max(nj, vis[r]);
                }
                nj_blk[i0 / kRB] = nj;
                nj_all = std::max(nj_all, nj);
                if (nj == 0) continue;
                for (int r = 0; r < rb; r += 4) {
                    const int rr = std::min(4, rb - r);
                    float* Sr = Sb + r * kTile;
                    if (kq8) {
                        const int8_t *qp[4], *qap[4];
                        const int32_t* qsp[4];
                        const float* qdp[4];
                        float qdr[4];
                        for (int x = 0; x < rr; ++x) {
                            const int i = i0 + r + x;
                            qp[x] = qq + static_cast<size_t>(i) * Dk;
                            qap[x] = qa + static_cast<size_t>(i) * Dk;
                            qsp[x] = qsum + i * qblocks;
                            qdp[x] = qd + i * qblocks;
                            qdr[x] = qdp[x][0];
                        }
                        for (int c0 = 0; c0 < ncv; c0 += 2) {
                            if (kt == GGMLType::Q8_KV) {
                                switch (rr) {
                                    case 4: qk_q8kv<4>(qp, qap, qsp, qdr, Dk, kpq, ks, c0, Sr); break;
                                    case 3: qk_q8kv<3>(qp, qap, qsp, qdr, Dk, kpq, ks, c0, Sr); break;
                                    case 2: qk_q8kv<2>(qp, qap, qsp, qdr, Dk, kpq, ks, c0, Sr); break;
                                    default: qk_q8kv<1>(qp, qap, qsp, qdr, Dk, kpq, ks, c0, Sr); break;
                                }
                            } else {
                                switch (rr) {
                                    case 4: qk_q80<4>(qp, qap, qsp, qdp, Dk, kpq, ks, c0, Sr); break;
                                    case 3: qk_q80<3>(qp, qap, qsp, qdp, Dk, kpq, ks, c0, Sr); break;
                                    case 2: qk_q80<2>(qp, qap, qsp, qdp, Dk, kpq, ks, c0, Sr); break;
                                    default: qk_q80<1>(qp, qap, qsp, qdp, Dk, kpq, ks, c0, Sr); break;
                                }
                            }
                        }
                    } else {
                        const float* qp[4];
                        for (int x = 0; x < rr; ++x) qp[x] = Q + (r0 + i0 + r + x) * ldq;
                        for (int c0 = 0; c0 < ncv; c0 += 2) {
                            switch (rr) {
                                case 4: qk_f32<4>(qp, Dk, kpf, scale, c0, Sr); break;
                                case 3: qk_f32<3>(qp, Dk, kpf, scale, c0, Sr); break;
                                case 2: qk_f32<2>(qp, Dk, kpf, scale, c0, Sr); break;
                                default: qk_f32<1>(qp, Dk, kpf, scale, c0, Sr); break;
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
            const uint8_t* Vtile = V + static_cast<size_t>(j0) * ldv;
            if (vq8) {
                pv_q8(S, kTile, mb, nj_blk, nj_all, nt, Vtile, ldv, vt, Dv, v_in_k && kt == GGMLType::Q8_0 ? ks : nullptr,
                      corr, O + r0 * ldo, ldo, pvb);
                continue;
            }
            // O += P V, 32 columns at a time: the V chunk is converted once (L1) for every row block
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

#if !defined(LATTE_AVX2_VNNI)
// The merge of the TG split, one row: 64 columns (8 accumulators) at a time over all chunks, so O
// is written once and each chunk's partial is read as 256 contiguous bytes per pass; the last Dv % 8
// columns by scalar::attn_combine_tail (fma as the vectors).
void attn_combine(int chunks, int Dv, const float* w, const float* part, size_t stride, float* o) {
    const int Dv8 = Dv & ~7;
    for (int d0 = 0; d0 < Dv8; d0 += 64) {
        const int nv = std::min(8, (Dv8 - d0) / 8);
        __m256 acc[8];
        for (int k = 0; k < 8; ++k) acc[k] = _mm256_setzero_ps();
        for (int c = 0; c < chunks; ++c) {
            if (w[c] == 0.0f) continue;
            const __m256 wv = _mm256_set1_ps(w[c]);
            const float* p = part + static_cast<size_t>(c) * stride + d0;
            if (nv == 8) {
                for (int k = 0; k < 8; ++k) acc[k] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(p + 8 * k), acc[k]);
            } else {
                for (int k = 0; k < nv; ++k) acc[k] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(p + 8 * k), acc[k]);
            }
        }
        for (int k = 0; k < nv; ++k) _mm256_storeu_ps(o + d0 + 8 * k, acc[k]);
    }
    scalar::attn_combine_tail(chunks, Dv8, Dv, w, part, stride, o);
}
#endif

}  // namespace latte::kernels::LATTE_AVX2_NS

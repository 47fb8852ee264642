// AVX-512 helpers shared by the avx512 and amx attention kernels (kernels/avx512/flash_attn.cpp,
// kernels/amx/flash_attn.cpp): scratch buffers, exp, the 16×16 transpose, the query quantiser and
// the rows-as-lanes online-softmax step. Include only from files compiled with the avx512 flags
// (F/BW/VL/DQ/VNNI/BF16). Everything is in an anonymous namespace: each ISA file gets its own copy,
// so no inline function compiled with one file's flags can be picked by the linker for another's.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <limits>

#include "kernels/scratch.h"
#include "latte/types.h"

namespace latte::kernels::simd512 {
namespace {

using Buf = kernels::Buf;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

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

// 2^x for x <= 0 (x = -inf gives 0): 2^n · p(r), n = round(x), |r| <= 1/2, p the degree-5 Taylor
// polynomial of e^(r·ln2) (relative error < 4e-6: far below the u8 rounding of P that follows).
// The int8 kernels (amx, avx512's 16-row q8_KV path) keep their scores in log2 units (log2 e
// folded into the query scales) so that their exp is 9 vector instructions instead of exp_ps's 12:
// the softmax step is most of their vector work.
constexpr float kLog2e = 1.44269504088896341f, kLn2 = 0.693147180559945309f;
// exp2_poly5 without the clamp (8 instructions), for finite x only (x = -inf gives NaN; a finite x
// far below -150 still gives 0 through scalef): the softmax's main loop, where x = score − max.
inline __m512 exp2_poly5_nc(__m512 x) {
    const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 r = _mm512_sub_ps(x, n);
    __m512 p = _mm512_set1_ps(1.3333558146428443e-3f);                   // ln2^5 / 120
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(9.618129107628477e-3f));   // ln2^4 / 24
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.550410866482158e-2f));   // ln2^3 / 6
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.2402265069591007f));     // ln2^2 / 2
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.6931471805599453f));     // ln2
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}
inline __m512 exp2_poly5(__m512 x) { return exp2_poly5_nc(_mm512_max_ps(x, _mm512_set1_ps(-150.0f))); }

// In-place transpose of 16 vectors of 16 (f32 or any 32-bit lanes).
[[gnu::always_inline]] inline void transpose16(__m512 r[16]) {
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

// The 4×4 transpose of 128-bit lanes over f[0..3]: lane L of f[k] goes to lane k of f[L]. The
// column order of the int8 P·V accumulators (vector k, lane L = columns 16L + 4k .. +3) back to the
// natural one, and its own inverse.
inline void transpose_lanes4(__m512 f[4]) {
    const __m512 a = _mm512_shuffle_f32x4(f[0], f[1], 0x44), b = _mm512_shuffle_f32x4(f[0], f[1], 0xEE);
    const __m512 c = _mm512_shuffle_f32x4(f[2], f[3], 0x44), d = _mm512_shuffle_f32x4(f[2], f[3], 0xEE);
    f[0] = _mm512_shuffle_f32x4(a, c, 0x88);
    f[1] = _mm512_shuffle_f32x4(a, c, 0xDD);
    f[2] = _mm512_shuffle_f32x4(b, d, 0x88);
    f[3] = _mm512_shuffle_f32x4(b, d, 0xDD);
}

// One row of Dv columns kept in that accumulator order per 64 columns (avx512's 16-row q8_KV path,
// the amx int8 kernel), put back in order in place and multiplied by `scale`.
inline void unpermute_o64(float* o, int Dv, float scale) {
    const __m512 sv = _mm512_set1_ps(scale);
    for (int c0 = 0; c0 < Dv; c0 += 64) {
        __m512 f[4];
        for (int k = 0; k < 4; ++k) f[k] = _mm512_loadu_ps(o + c0 + 16 * k);
        transpose_lanes4(f);
        for (int k = 0; k < 4; ++k) _mm512_storeu_ps(o + c0 + 16 * k, _mm512_mul_ps(sv, f[k]));
    }
}

// Prefetches rows [0, n) of a matrix (bytes [0, bytes) of each row) into the cache.
template <int Hint = _MM_HINT_T0>
inline void prefetch_rows(const uint8_t* p, size_t ld, int n, size_t bytes) {
    for (int j = 0; j < n; ++j)
        for (size_t b = 0; b < bytes; b += 64) _mm_prefetch(reinterpret_cast<const char*>(p + j * ld + b), static_cast<_mm_hint>(Hint));
}

// Quantises one query row to int8: q8_KV one scale for the row, q8_0 one per 32-block; qd holds
// d·scale, qsum the int8 sums (per row or per block).
inline void quantize_q(GGMLType kt, const float* x, int Dk, float scale, int8_t* q, float* qd, int32_t* qsum) {
    const int bs = kt == GGMLType::Q8_KV ? Dk : 32;
    for (int b = 0; b < Dk / bs; ++b) {
        const float* xb = x + b * bs;
        // four max chains where the block allows (q8_KV: 36 vectors of 576; a single chain waited
        // on vmaxps latency, and TG re-quantises the query rows once per KV chunk)
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        int k = 0;
        for (; k + 64 <= bs; k += 64) {
            a0 = _mm512_max_ps(a0, _mm512_abs_ps(_mm512_loadu_ps(xb + k)));
            a1 = _mm512_max_ps(a1, _mm512_abs_ps(_mm512_loadu_ps(xb + k + 16)));
            a2 = _mm512_max_ps(a2, _mm512_abs_ps(_mm512_loadu_ps(xb + k + 32)));
            a3 = _mm512_max_ps(a3, _mm512_abs_ps(_mm512_loadu_ps(xb + k + 48)));
        }
        for (; k < bs; k += 16) a0 = _mm512_max_ps(a0, _mm512_abs_ps(_mm512_loadu_ps(xb + k)));
        const float m = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(a0, a1), _mm512_max_ps(a2, a3)));
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

// Per lane (query row): how many rows of the tile [j0, j0 + nt) it sees, its length clamped to the tile.
inline __m512i tile_visible16(__m512i lenv, int j0, int nt) {
    return _mm512_min_epi32(_mm512_max_epi32(_mm512_sub_epi32(lenv, _mm512_set1_epi32(j0)), _mm512_setzero_si512()),
                            _mm512_set1_epi32(nt));
}

// step(j, j % 4) for j in [0, nt), four at a time: the rows-as-lanes loops over a tile's score
// vectors keep four independent accumulator chains (row j into chain j % 4), since one chain
// waits an add's or max's latency per vector (4 cycles on Intel's cores) whatever the throughput.
template <class F>
[[gnu::always_inline]] inline void in_four_chains(int nt, const F& step) {
    int j = 0;
    for (; j + 4 <= nt; j += 4) {
        step(j, 0);
        step(j + 1, 1);
        step(j + 2, 2);
        step(j + 3, 3);
    }
    for (; j < nt; ++j) step(j, j & 3);
}
inline __m512 max_of4(const __m512 m[4]) { return _mm512_max_ps(_mm512_max_ps(m[0], m[1]), _mm512_max_ps(m[2], m[3])); }
// m with score vector v (KV row j of the tile) folded in, in the lanes that see row j (visv:
// tile_visible16; full: every lane sees every row): the step of the tile max loops.
[[gnu::always_inline]] inline __m512 max_if_seen(__m512 m, __m512 v, int j, __m512i visv, bool full) {
    return full ? _mm512_max_ps(m, v) : _mm512_mask_max_ps(m, _mm512_cmpgt_epi32_mask(visv, _mm512_set1_epi32(j)), m, v);
}

// The max over the tile's nt score vectors St of the rows each lane sees (visv: tile_visible16; full:
// every lane sees all nt); -inf where a lane sees none.
// In four chains: max is exact in any order.
inline __m512 tile_max16(const float* St, int nt, __m512i visv, bool full) {
    const __m512 ninf = _mm512_set1_ps(kNegInf);
    __m512 mc[4] = {ninf, ninf, ninf, ninf};
    in_four_chains(nt, [&](int j, int u) {
        mc[u] = max_if_seen(mc[u], _mm512_load_ps(St + 16 * j), j, visv, full);
    });
    return max_of4(mc);
}

// The online-softmax step of the int8 rows-as-lanes kernels (avx512's 16-row q8_KV path, the amx
// int8 kernel), in log2 units (log2 e folded into their query scales), fused with the ×d_j pass:
// given the tile's nt score vectors St and their max mx over the rows each lane sees (visv, from
// tile_visible16; full: every lane sees all nt), updates the running max mv and sum lv, writes the
// old accumulator's rescale factor to corr, turns St into P·d(j) (0 past what a row sees; d(j) the V
// row's scale) and returns the lanes' max of P·d. exp2 without the clamp in the loop: score − max
// is finite there (rows with nothing visible yet take max 0 and are masked).
template <class D>
inline __m512 softmax_pd_log2(float* St, int nt, __m512i visv, bool full, __m512 mx, __m512& mv, __m512& lv,
                              float* corr, const D& d) {
    const __m512 ninf = _mm512_set1_ps(kNegInf);
    const __m512 mnew = _mm512_max_ps(mv, mx);
    const __mmask16 has = _mm512_cmp_ps_mask(mnew, ninf, _CMP_NEQ_OQ);  // rows with a visible KV row so far
    const __m512 msafe = _mm512_maskz_mov_ps(has, mnew);
    const __m512 cr = _mm512_mask_blend_ps(has, _mm512_set1_ps(1.0f), exp2_poly5(_mm512_sub_ps(mv, msafe)));
    // the sums and P·d's max in four chains (in_four_chains): l is added as four partial sums
    __m512 sum[4], pm[4];
    for (int u = 0; u < 4; ++u) sum[u] = pm[u] = _mm512_setzero_ps();
    in_four_chains(nt, [&](int j, int u) {
        __m512 p = exp2_poly5_nc(_mm512_sub_ps(_mm512_load_ps(St + 16 * j), msafe));
        if (!full) p = _mm512_maskz_mov_ps(_mm512_cmpgt_epi32_mask(visv, _mm512_set1_epi32(j)), p);
        sum[u] = _mm512_add_ps(sum[u], p);
        p = _mm512_mul_ps(p, _mm512_set1_ps(d(j)));
        _mm512_store_ps(St + 16 * j, p);
        pm[u] = _mm512_max_ps(pm[u], p);
    });
    const __m512 pmax = max_of4(pm);
    lv = _mm512_fmadd_ps(lv, cr, _mm512_add_ps(_mm512_add_ps(sum[0], sum[1]), _mm512_add_ps(sum[2], sum[3])));
    mv = mnew;
    _mm512_store_ps(corr, cr);
    return pmax;
}

// Online softmax over one KV tile for 16 query rows at once (rows are the lanes) — the 16-row TG
// paths' shared step. St holds nt score vectors (one per KV row of the tile); a row sees the tile's
// first clamp(len - j0, 0, nt) KV rows. Updates the running max mv and sum lv, writes the old
// accumulator's rescale factor to corr and turns St into P (tile vectors; 0 past what a row sees).
inline void softmax_tile16(float* St, int nt, int j0, __m512i lenv, __m512& mv, __m512& lv, float* corr,
                           int tile = 64) {
    const __m512 ninf = _mm512_set1_ps(kNegInf);
    const __m512i visv = tile_visible16(lenv, j0, nt);
    const __m512 mx = tile_max16(St, nt, visv, _mm512_cmplt_epi32_mask(visv, _mm512_set1_epi32(nt)) == 0);
    const __m512 mnew = _mm512_max_ps(mv, mx);
    const __mmask16 has = _mm512_cmp_ps_mask(mnew, ninf, _CMP_NEQ_OQ);  // rows with a visible KV row so far
    const __m512 msafe = _mm512_maskz_mov_ps(has, mnew);
    const __m512 cr = _mm512_mask_blend_ps(has, _mm512_set1_ps(1.0f), exp_ps(_mm512_sub_ps(mv, msafe)));
    __m512 sum = _mm512_setzero_ps();
    for (int j = 0; j < tile; ++j) {
        __m512 p = _mm512_setzero_ps();
        if (j < nt)
            p = _mm512_maskz_mov_ps(_mm512_cmpgt_epi32_mask(visv, _mm512_set1_epi32(j)),
                                    exp_ps(_mm512_sub_ps(_mm512_load_ps(St + 16 * j), msafe)));
        sum = _mm512_add_ps(sum, p);
        _mm512_store_ps(St + 16 * j, p);
    }
    lv = _mm512_fmadd_ps(lv, cr, sum);
    mv = mnew;
    _mm512_store_ps(corr, cr);
}


// 16 quantised query rows as qp[k/4][16][4] = the int8 query of row r at dims k..k+3 (rows >= mb
// zero), flipped to u8 (q + 128, i.e. XOR 0x80) when `flip`; Dk % 64 == 0: the avx512 16-row paths'
// query and the amx int8 kernel's Qᵀ B tiles (1 KiB per 64 dims). One 16×16 transpose of 32-bit
// lanes per 64 dims (the 16-row paths had a scalar byte loop: 9216 steps per call, ~10% of TG 16
// heads @ 4K on one thread, where every KV chunk of the flash-decoding split repacks it).
inline void pack_q_rows16(const int8_t* qq, int mb, int Dk, bool flip, uint8_t* qp) {
    const __m512i x80 = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int c = 0; c < Dk / 64; ++c) {
        __m512 r[16];
        for (int n = 0; n < 16; ++n)
            r[n] = n < mb ? _mm512_castsi512_ps(_mm512_loadu_si512(qq + static_cast<size_t>(n) * Dk + 64 * c))
                          : _mm512_setzero_ps();
        transpose16(r);
        for (int k4 = 0; k4 < 16; ++k4) {
            __m512i v = _mm512_castps_si512(r[k4]);
            if (flip) v = _mm512_xor_si512(v, x80);
            _mm512_storeu_si512(qp + static_cast<size_t>(c * 16 + k4) * 64, v);
        }
    }
}

}  // namespace
}  // namespace latte::kernels::simd512

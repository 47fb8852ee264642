// AVX-512 attention kernels (F/BW/VL/DQ/VNNI/BF16 — the dispatch's avx512 level requires all of
// them, so no fallback below it; compiled with only the avx512 flags).
//
// One flash (online-softmax, tiled) kernel serves "-fa on" and "-fa off" (attn_plain calls it:
// the result is the same softmax, computed without the full score row) and the flash-decoding
// partials. Layout of the work, per call:
//   - query rows in superblocks of kRowsSB = 128 (their O block, 256 KiB at Dv 512, stays in L2;
//     64 until 2026-12-06: 128 rows share each packed K tile, the float caches' f16/bf16 → f32
//     conversion and transposes 12% of PP's samples before. Zen 5, 1 thread, alternated 3×: PP-512
//     16 heads @ 4K f16 369-417 -> 362-383 ms, @ 0 bf16 24.3-24.4 -> 23.3-23.6 ms, q8_0 @ 4K
//     144.4-144.9 -> 138.1-139.2 ms, q8_KV even; TG 128 heads @ 8K 2 threads q8_0 1.02-1.05×,
//     q8_KV even), KV in tiles of kTile=64;
//   - per tile the K rows are packed once, transposed so that a vector holds 16 KV rows
//     (f32 for f32/f16 caches: Kp[k][j]; bf16 pairs for bf16: Kb[k/2][j]; u8 for q8_0/q8_KV:
//     Kp[k/4][j][4], sign-flipped);
//   - S = Q Kᵀ for 4 query rows × 64 KV rows per microkernel call (only the 16-column vectors the
//     rows see): broadcast-FMA (f32), vdpbf16ps for bf16 K with the query rounded to bf16 once per
//     superblock (the cache's own precision, as the amx level's bf16 tiles and ggml's bf16 dot do;
//     V and P stay f32; 8.4e-3 of max |O| against scalar on the test grid where the f32 FMA path
//     is within 5e-6; 1.32-1.42x on Zen 5 (PP @ 0 / @ 4K, TG 16 heads @ 4K, 1 thread, in one process
//     against LATTE_BF16DOT=0, which keeps the f32 path), or
//     vpdpbusd with the query quantised on the fly to int8 (q8_KV: one scale per row, q8_0: one per
//     32-block) — the K bytes are flipped to u8 (k+128) and the excess 128·Σq is the accumulator's
//     start value, so the q8_KV header sum is not needed here;
//   - online softmax per row (running max m, sum l, O rescaled while it is loaded for P·V);
//   - O += P V over V chunks packed once per tile (L1) and shared by every row block of the
//     superblock (the next tile's rows are prefetched meanwhile):
//       q8_KV V (Dv % 64 == 0): int8 vpdpbusd, 4 rows × 64 columns per pass. P·d_j (d_j the V row
//       scale) is quantised to u8 per query row and tile (scale max/255), V stays int8 (quads of
//       KV rows interleaved per 32-bit lane), the int32 tile sums are scaled into the f32 O;
//       q8_0 V (and q8_KV with LATTE_PV=bf16): AVX512-BF16 vdpbf16ps, 8 rows × 32 columns per pass:
//       pairs of KV rows interleaved as bf16 (int8 values are exact in bf16), P·d (d_j per row for
//       q8_KV, the chunk's block scale d_jb for q8_0) rounded to bf16 pairs broadcast per row;
//       f32/f16/bf16 V: f32 FMA, 4 rows × 64 columns per pass (V converted to f32 per 64-column
//       chunk, 16 KiB in L1; f32 in place; 8 rows × 32 columns before 2026-12-06 and with
//       LATTE_PV64=0: 10 loads per 16 FMAs where 4 × 64 takes 8; Zen 5 1 thread, in one process:
//       PP-512 @ 0 bf16/f16 1.04×, @ 4K bf16 1.047×, TG 16 heads @ 4K 1.01-1.02×, 128 heads 1.03×)
//       — bf16 P would cost ~2e-3 relative there, where these caches are exact to ~1e-6.
//     The P rounding (u8 or bf16) adds up to 7e-3 (int8) / 3e-3 (bf16) of max |O| against f32 P·V
//     (tests/test_kernels.cpp), below the query quantisation error these caches already carry.
//   - groups of 9..16 rows with q8_KV K and V (TG with 16 heads): flash_rows16_q8kv holds the query rows
//     as the 16 lanes of a vector, so Q·Kᵀ reads K rows in place (no packed tile) and the softmax
//     runs on whole vectors; P is transposed back to rows for the int8 P·V.
//     Its Q·Kᵀ takes the query as the u8 operand (q+128), so it uses the row sums that the q8_KV
//     writer (latte::quantize_row) stores in the row header. Each 16-row step prefetches the next
//     16 K rows into L1 and packs its V rows (the whole tile's V, 128 KiB at Dv 512, is packed as
//     Q·Kᵀ goes); in MQA (V = the K rows' prefix) the packing runs inside the Q·Kᵀ loop
//     (qk_rows16_pack: one 4-row × 64-column unit per 4 steps, its unpacks beside the vpdpbusd;
//     LATTE_FUSEPACK=0 packs after the loop instead, the same bytes: TG 16 heads @ 4K 1 thread
//     1.037×, @ 32K 2 threads 1.036×, 128 heads @ 8K 1.017×, PP @ 4K 1.013×, Zen 5, 2026-12-06);
//     the softmax runs in log2 units with the ×d_j pass fused in. Its KV tiles are 512 rows
//     (kT16), so P·d is quantised to u8 per row over 512 rows (the amx kernel's rounding: 1.18e-2
//     of max |O| against f32 P·V on the test grid, where 64-row tiles gave 7.9e-3).
//   - groups of 9..16 rows with q8_0 K and V (TG with 16 heads on a q8_0 cache): flash_rows16_q80, the
//     same layout. q8_0 blocks store no sum, so the sign is moved to the K side: the rows of a group
//     of 8 KV rows are copied once, flipped to u8 (k+128), into an L1 buffer (with their block
//     scales; MQA's V block scales are those of the K rows, read from there), the query stays s8 as [k/4][16 rows][4], and each (KV row, 32-block) gets a fresh
//     int32 accumulator started at −128·Σ_{k in b} q (a per-row vector, the same for every KV row):
//     8 vpdpbusd, then cvt and one FMA with (d_Q per row · d_K). P·V stays with the rows as lanes:
//     per 32-column block P·d_{j,b} is quantised to u8 per row, tile and block (scale max/255),
//     packed as quads of KV rows, and multiplied by the V bytes (quads of rows per column, broadcast)
//     into O transposed (columns × 16 rows, transposed back at the end) — pv_rows16_q80.
//     LATTE_PV=bf16 keeps bf16 P·V there (P transposed to rows, the general path's pv_bf16).
//     Rounding against f32 P·V 7.7e-3 of max |O| (bf16: 2.9e-3), query quantisation as the
//     general q8_0 path (tests/test_kernels.cpp).
//   Both 16-row paths take any superblock whose rows split into groups of 16 with more than 8 in
//   each (16, 32, ..., 128, or 9..16 left over; a superblock with a short last group stays on the
//   general path): they beat the general path's packed-K tiles at every shape measured, so TG with
//   V3's 128 heads and PP run through them too. Zen 5, 2 threads, in one process against the
//   general path (2026-12-06): TG @ 8K 32 / 64 / 128 heads q8_KV 1.19 / 1.10 / 1.085×, q8_0 1.13 /
//   1.05 / 1.03×; PP-512 16 heads @ 4K q8_KV 1.10×, q8_0 1.055×; @ 0 q8_KV 1.10×.
//   A call takes a superblock's groups (up to 8) together: the groups run over each KV tile in turn
//   while it is in L2, and the tile's V (q8_KV: packed for pv_i8; q8_0: quads and block scales) and
//   q8_0's flipped K rows are prepared once for all of them (TG 128 heads @ 8K q8_0 1.15×, PP q8_0
//   1.16×; q8_KV 1.04×). Per group the tiles are those of the group alone: the same bits.
//   LATTE_ROWS16=0 turns both 16-row paths off; LATTE_ROWS16, LATTE_PV and LATTE_FUSEPACK are
//   read on every call.
// Shapes outside Dk % 64 == 0 (q8 types) / Dk % 16 == 0 (float types) and Dv % 32 == 0 go to the
// scalar kernel.
#include "kernels/avx512/flash_attn.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "kernels/avx512/common.h"
#include "kernels/scalar/flash_attn.h"

namespace latte::kernels::avx512 {
namespace {

using namespace simd512;

constexpr int kTile = 64;     // KV rows per tile (4 vectors of 16)
// KV rows per tile of the q8_KV 16-row TG path (flash_rows16_q8kv). Larger than kTile: its per-tile
// work (pv_i8's O update, 4 rows × 64 columns per pass, and the softmax bookkeeping) is then paid
// per 256 KV rows. Zen 5, TG 16 heads @ 32K, latte-attn-ab interleaved (2026-12-05): 1 thread 3.01
// -> 2.62 ms (128 rows: 2.78; 512: no better than 256), 2 threads 1.33 -> 1.24 ms. P·d is then
// quantised to u8 per row over 256 rows, as the amx kernel does (its rounding, tests/test_kernels.cpp).
// 512 since session 17 (2026-12-06), once the V pack had moved into the Q·Kᵀ loop and the tile max
// into its epilogue: old/new alternated 3x, TG 16 heads @ 32K 2 threads 0.712-0.735 -> 0.705-0.716
// ms, TG 128 heads @ 8K 1.350-1.377 -> 1.341-1.359 ms, PP @ 4K 44.7-44.9 -> 44.2-44.5 ms, TG 16
// heads @ 4K 1 thread even; the P·V rounding test 1.18e-2 of max |O| (bound 1.5e-2). The q8_KV V
// tile packed for pv_i8 is then 256 KiB (L2).
constexpr int kT16 = 512;
constexpr int kRowsSB = 128;  // query rows per superblock
constexpr int kRB = 8;        // query rows per softmax / P·V block

// The 16-row paths (rkp .. rs, and kf, kd, ot, vdd, p) have buffers of their own: a call can run
// them for some superblocks and the general path for others, and a shared buffer grown by one
// would leave the other's pointers dangling.
struct Scratch {
    Buf kp, ks, vb, qq, qd, qs, s, p, st, pb, vd, ps, kf, kd, ot, vdd, qbf;
    Buf rkp, rks, rvb, rpb, rvk, rs;
};
Scratch& scratch() {
    static thread_local Scratch s;
    return s;
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

// Converts columns [c0, c0+32) of V rows [0, nt) to f32: vb[j·ldb .. + 32) (8 KiB at ldb 32; the
// float P·V's 64-column chunks convert two halves into rows of 64: 16 KiB, still L1).
void convert_v_chunk(const uint8_t* V, size_t ldv, GGMLType vt, int nt, int c0, float* vb, int ldb = 32) {
    for (int j = 0; j < nt; ++j) {
        const uint8_t* row = V + static_cast<size_t>(j) * ldv;
        float* dst = vb + j * ldb;
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

// Packs columns [c0, c0+32) of q8 V rows [0, nt) as bf16 pairs of rows: vp[j/2][32] (32-bit lanes
// {v[j][c], v[j+1][c]}, v the int8 values, exact in bf16; an odd nt is padded with a zero row) and
// their scales vd[j] (q8_KV: the row's d; q8_0: the chunk's block d), vd[j] = 0 for j >= nt.
void pack_v_bf16(const uint8_t* V, size_t ldv, GGMLType vt, int nt, int c0, __m512i* vp, float* vd) {
    const bool kv = vt == GGMLType::Q8_KV;
    const size_t off = kv ? sizeof(RowQ8KVHeader) + c0 : static_cast<size_t>(c0 / 32) * sizeof(BlockQ8_0) + 2;
    for (int j = 0; j < kTile; ++j) {
        float d = 0.0f;
        if (j < nt) {
            const uint8_t* row = V + static_cast<size_t>(j) * ldv;
            if (kv) {
                std::memcpy(&d, row, sizeof d);
            } else {
                uint16_t h;
                std::memcpy(&h, row + off - 2, sizeof h);
                d = _cvtsh_ss(h);
            }
        }
        vd[j] = d;
    }
    const __m128i zero = _mm_setzero_si128();
    for (int j = 0; j < nt; j += 2) {
        const auto* a = reinterpret_cast<const __m128i*>(V + static_cast<size_t>(j) * ldv + off);
        const auto* b = reinterpret_cast<const __m128i*>(V + static_cast<size_t>(j + 1) * ldv + off);
        for (int h = 0; h < 2; ++h) {
            const __m128i qa = _mm_loadu_si128(a + h), qb = j + 1 < nt ? _mm_loadu_si128(b + h) : zero;
            const __m512i fa = _mm512_castps_si512(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(qa)));
            const __m512i fb = _mm512_castps_si512(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(qb)));
            // low word: bf16(v[j]) = the high half of its f32 (exact); high word: bf16(v[j+1])
            _mm512_store_si512(vp + j + h, _mm512_mask_blend_epi16(0xAAAAAAAAu, _mm512_srli_epi32(fa, 16), fb));
        }
    }
}

// Pb[r][j] = bf16(P[r][j] · vd[j]) for rows [0, rows) (row stride kTile in both).
inline void p_to_bf16(const float* P, int rows, const float* vd, uint16_t* pb) {
    const __m512 d0 = _mm512_load_ps(vd), d1 = _mm512_load_ps(vd + 16), d2 = _mm512_load_ps(vd + 32),
                 d3 = _mm512_load_ps(vd + 48);
    for (int r = 0; r < rows; ++r) {
        const float* p = P + r * kTile;
        __m512i* o = reinterpret_cast<__m512i*>(pb + r * kTile);
        const __m512 x0 = _mm512_mul_ps(_mm512_load_ps(p), d0), x1 = _mm512_mul_ps(_mm512_load_ps(p + 16), d1);
        const __m512 x2 = _mm512_mul_ps(_mm512_load_ps(p + 32), d2), x3 = _mm512_mul_ps(_mm512_load_ps(p + 48), d3);
        _mm512_store_si512(o, (__m512i)_mm512_cvtne2ps_pbh(x1, x0));  // bf16 j = 0..31 in order
        _mm512_store_si512(o + 1, (__m512i)_mm512_cvtne2ps_pbh(x3, x2));
    }
}

// q8_KV V, int8 P·V: packs columns [c0, c0+64) of V rows [0, nt) as quads of rows, vp[j/4][4]: 32-bit
// lane i of vector k, 128-bit lane L, holds {v[j..j+3][c0 + 16L + 4k + i]} (unpacklo/hi_epi8 then
// _epi16 within lanes; pv_i8 undoes the column order); rows >= nt are zero.
void pack_v_i8(const uint8_t* V, size_t ldv, int nt, int c0, __m512i* vp) {
    const size_t off = sizeof(RowQ8KVHeader) + c0;
    for (int j = 0; j < nt; j += 4) {
        __m512i r[4];
        for (int x = 0; x < 4; ++x)
            r[x] = j + x < nt ? _mm512_loadu_si512(V + static_cast<size_t>(j + x) * ldv + off) : _mm512_setzero_si512();
        const __m512i t0 = _mm512_unpacklo_epi8(r[0], r[1]), t1 = _mm512_unpackhi_epi8(r[0], r[1]);
        const __m512i u0 = _mm512_unpacklo_epi8(r[2], r[3]), u1 = _mm512_unpackhi_epi8(r[2], r[3]);
        _mm512_store_si512(vp + j + 0, _mm512_unpacklo_epi16(t0, u0));
        _mm512_store_si512(vp + j + 1, _mm512_unpackhi_epi16(t0, u0));
        _mm512_store_si512(vp + j + 2, _mm512_unpacklo_epi16(t1, u1));
        _mm512_store_si512(vp + j + 3, _mm512_unpackhi_epi16(t1, u1));
    }
}

// q8_KV V, int8 P·V: Pq[r][j] = round(P[r][j]·d_j / ps[r]) in u8 with ps[r] = max_j P[r][j]·d_j / 255
// (per row and tile; d_j >= 0 as the q8_KV writer makes it), for rows [0, rows).
inline void p_to_u8(const float* P, int rows, const float* vd, uint8_t* pq, float* ps) {
    __m512 d[4];
    for (int c = 0; c < 4; ++c) d[c] = _mm512_load_ps(vd + 16 * c);
    for (int r = 0; r < rows; ++r) {
        const float* p = P + r * kTile;
        __m512 x[4], mx = _mm512_setzero_ps();
        for (int c = 0; c < 4; ++c) {
            x[c] = _mm512_mul_ps(_mm512_load_ps(p + 16 * c), d[c]);
            mx = _mm512_max_ps(mx, x[c]);
        }
        const float m = _mm512_reduce_max_ps(mx);
        ps[r] = m / 255.0f;
        const __m512 inv = _mm512_set1_ps(m > 0.0f ? 255.0f / m : 0.0f);
        for (int c = 0; c < 4; ++c)
            _mm_store_si128(reinterpret_cast<__m128i*>(pq + r * kTile + 16 * c),
                            _mm512_cvtusepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(x[c], inv))));
    }
}

// bf16 K for vdpbf16ps: tile rows [0, nt) as pairs of dims, Kb[k/2][kTile] (32 bits: k_j[k] in the
// low half, k_j[k+1] in the high), rows >= nt zero; one 16×16 dword transpose per 16 rows and 32
// dims (the bf16 values as stored: no conversion, half the transposes of pack_k_float).
void pack_k_bf16(const uint8_t* K, size_t ldk, int nt, int Dk, uint32_t* kb) {
    __m512 r[16];
    for (int jg = 0; jg < kTile / 16; ++jg) {
        for (int k0 = 0; k0 < Dk; k0 += 32) {
            for (int x = 0; x < 16; ++x) {
                const int j = jg * 16 + x;
                r[x] = j < nt ? _mm512_loadu_ps(reinterpret_cast<const float*>(K + static_cast<size_t>(j) * ldk + 2 * k0))
                              : _mm512_setzero_ps();
            }
            transpose16(r);
            for (int x = 0; x < 16; ++x)
                _mm512_store_ps(reinterpret_cast<float*>(kb + static_cast<size_t>(k0 / 2 + x) * kTile + jg * 16), r[x]);
        }
    }
}

// S[r][0..16·NC) = scale · Q[r] · K for R query rows of a float K tile: BF16 = false, f32 FMA over
// Kp[k][kTile] with q[r] the f32 rows; BF16 = true, vdpbf16ps over Kb[k/2][kTile] (two products
// per lane, f32 sums) with q[r] the rows as bf16 pairs (round to nearest even). The tile's columns
// past 16·NC (no row of the R sees them: the causal diagonal, the KV end) are neither computed
// nor written.
template <int R, int NC, bool BF16>
void qk_float(const void* const* q, int Dk, const void* kp, float scale, float* S) {
    static_assert(NC >= 1 && NC <= 4, "qk_float takes 1..4 column vectors");
    __m512 acc[R][NC];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < NC; ++c) acc[r][c] = _mm512_setzero_ps();
    for (int k = 0; k < (BF16 ? Dk / 2 : Dk); ++k) {
        const float* kr = static_cast<const float*>(kp) + static_cast<size_t>(k) * kTile;  // 32-bit lanes
        __m512 kv[NC];
        for (int c = 0; c < NC; ++c) kv[c] = _mm512_load_ps(kr + 16 * c);
        for (int r = 0; r < R; ++r) {
            if constexpr (BF16) {
                const __m512bh qv = (__m512bh)_mm512_set1_epi32(static_cast<int>(static_cast<const uint32_t*>(q[r])[k]));
                for (int c = 0; c < NC; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], qv, (__m512bh)kv[c]);
            } else {
                const __m512 qb = _mm512_set1_ps(static_cast<const float*>(q[r])[k]);
                for (int c = 0; c < NC; ++c) acc[r][c] = _mm512_fmadd_ps(qb, kv[c], acc[r][c]);
            }
        }
    }
    const __m512 sc = _mm512_set1_ps(scale);
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < NC; ++c) _mm512_store_ps(S + r * kTile + 16 * c, _mm512_mul_ps(acc[r][c], sc));
}
template <bool BF16, int R>
void qk_float_nc(int nc, const void* const* q, int Dk, const void* kp, float scale, float* S) {
    switch (nc) {
        case 1: qk_float<R, 1, BF16>(q, Dk, kp, scale, S); break;
        case 2: qk_float<R, 2, BF16>(q, Dk, kp, scale, S); break;
        case 3: qk_float<R, 3, BF16>(q, Dk, kp, scale, S); break;
        default: qk_float<R, 4, BF16>(q, Dk, kp, scale, S); break;
    }
}
// qk_float for rr (1..4) rows and nc (1..4) column vectors.
template <bool BF16>
void qk_float_block(int rr, int nc, const void* const* q, int Dk, const void* kp, float scale, float* S) {
    switch (rr) {
        case 4: qk_float_nc<BF16, 4>(nc, q, Dk, kp, scale, S); break;
        case 3: qk_float_nc<BF16, 3>(nc, q, Dk, kp, scale, S); break;
        case 2: qk_float_nc<BF16, 2>(nc, q, Dk, kp, scale, S); break;
        default: qk_float_nc<BF16, 1>(nc, q, Dk, kp, scale, S); break;
    }
}

// q8_KV: S[r][j] = (dq_r·scale) · d_j · Σ_k q_rk k_jk, with Kp = k+128 and the start value −128·Σq.
// (The pragma: GCC 12's false -Wuninitialized in _mm512_cvtepi32_ps, as at pv_i8 below.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
template <int R>
void qk_q8kv(const int8_t* const* q, const float* qd, const int32_t* qsum, int Dk, const uint8_t* kp,
             const float* ks, float* S) {
    static_assert(R >= 1 && R <= 4, "qk_q8kv takes 1..4 rows");
    // named accumulators through an asm vpdpbusd, as pv_i8 (GCC 12 rotates an acc[R][4] array)
    const __m512i s0 = _mm512_set1_epi32(-128 * qsum[0]), s1 = _mm512_set1_epi32(R > 1 ? -128 * qsum[R > 1 ? 1 : 0] : 0),
                  s2 = _mm512_set1_epi32(R > 2 ? -128 * qsum[R > 2 ? 2 : 0] : 0),
                  s3 = _mm512_set1_epi32(R > 3 ? -128 * qsum[R > 3 ? 3 : 0] : 0);
    __m512i a00 = s0, a01 = s0, a02 = s0, a03 = s0, a10 = s1, a11 = s1, a12 = s1, a13 = s1, a20 = s2, a21 = s2,
            a22 = s2, a23 = s2, a30 = s3, a31 = s3, a32 = s3, a33 = s3;
    for (int k4 = 0; k4 < Dk / 4; ++k4) {
        const __m512i* kr = reinterpret_cast<const __m512i*>(kp + static_cast<size_t>(k4) * kTile * 4);
        const __m512i k0 = _mm512_load_si512(kr), k1 = _mm512_load_si512(kr + 1), k2 = _mm512_load_si512(kr + 2),
                      k3 = _mm512_load_si512(kr + 3);
#define LATTE_QK_ROW(r, x0, x1, x2, x3)                                  \
    if constexpr (R > (r)) {                                             \
        int32_t w;                                                       \
        std::memcpy(&w, q[r] + 4 * k4, 4);                               \
        const __m512i qb = _mm512_set1_epi32(w);                         \
        asm("vpdpbusd %2, %1, %0" : "+v"(x0) : "v"(k0), "v"(qb));        \
        asm("vpdpbusd %2, %1, %0" : "+v"(x1) : "v"(k1), "v"(qb));        \
        asm("vpdpbusd %2, %1, %0" : "+v"(x2) : "v"(k2), "v"(qb));        \
        asm("vpdpbusd %2, %1, %0" : "+v"(x3) : "v"(k3), "v"(qb));        \
    }
        LATTE_QK_ROW(0, a00, a01, a02, a03)
        LATTE_QK_ROW(1, a10, a11, a12, a13)
        LATTE_QK_ROW(2, a20, a21, a22, a23)
        LATTE_QK_ROW(3, a30, a31, a32, a33)
#undef LATTE_QK_ROW
    }
    const __m512i acc[4][4] = {{a00, a01, a02, a03}, {a10, a11, a12, a13}, {a20, a21, a22, a23}, {a30, a31, a32, a33}};
    for (int r = 0; r < R; ++r) {
        const __m512 dq = _mm512_set1_ps(qd[r]);
        for (int c = 0; c < 4; ++c)
            _mm512_store_ps(S + r * kTile + 16 * c,
                            _mm512_mul_ps(_mm512_cvtepi32_ps(acc[r][c]), _mm512_mul_ps(dq, _mm512_load_ps(ks + 16 * c))));
    }
}
#pragma GCC diagnostic pop

// q8_0: per 32-block b: S += (dq_rb·scale) · d_jb · Σ_{k in b} q_rk k_jk; KV vectors [c0, c0+2).
template <int R>
void qk_q80(const int8_t* const* q, const float* const* qd, const int32_t* const* qsum, int Dk, const uint8_t* kp,
            const float* ks, int c0, float* S) {
    static_assert(R >= 1 && R <= 4, "qk_q80 takes 1..4 rows");
    __m512 facc[R][2];
    for (int r = 0; r < R; ++r) facc[r][0] = facc[r][1] = _mm512_setzero_ps();
    for (int b = 0; b < Dk / 32; ++b) {
        // named int32 accumulators through an asm vpdpbusd, as pv_i8 (GCC 12 rotates an array)
        __m512i a00 = _mm512_set1_epi32(-128 * qsum[0][b]), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00,
                a30 = a00, a31 = a00;
        if constexpr (R > 1) a10 = a11 = _mm512_set1_epi32(-128 * qsum[R > 1 ? 1 : 0][b]);
        if constexpr (R > 2) a20 = a21 = _mm512_set1_epi32(-128 * qsum[R > 2 ? 2 : 0][b]);
        if constexpr (R > 3) a30 = a31 = _mm512_set1_epi32(-128 * qsum[R > 3 ? 3 : 0][b]);
        for (int k4 = 8 * b; k4 < 8 * b + 8; ++k4) {
            const __m512i* kr = reinterpret_cast<const __m512i*>(kp + static_cast<size_t>(k4) * kTile * 4) + c0;
            const __m512i k0 = _mm512_load_si512(kr), k1 = _mm512_load_si512(kr + 1);
#define LATTE_Q80_ROW(r, x0, x1)                                         \
    if constexpr (R > (r)) {                                             \
        int32_t w;                                                       \
        std::memcpy(&w, q[r] + 4 * k4, 4);                               \
        const __m512i qb = _mm512_set1_epi32(w);                         \
        asm("vpdpbusd %2, %1, %0" : "+v"(x0) : "v"(k0), "v"(qb));        \
        asm("vpdpbusd %2, %1, %0" : "+v"(x1) : "v"(k1), "v"(qb));        \
    }
            LATTE_Q80_ROW(0, a00, a01)
            LATTE_Q80_ROW(1, a10, a11)
            LATTE_Q80_ROW(2, a20, a21)
            LATTE_Q80_ROW(3, a30, a31)
#undef LATTE_Q80_ROW
        }
        const __m512i acc[4][2] = {{a00, a01}, {a10, a11}, {a20, a21}, {a30, a31}};
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

// As pv over 64 columns for R <= 4 rows: O[r][c0..c0+64) = O[r]·corr[r] + Σ_{j < nj} P[r][j] V[j]
// (V rows of stride ldv floats). Per KV row 4 V loads and R broadcasts feed 4·R FMAs (8 rows × 32
// columns took 2 + 8 loads per 16): the f32 P·V of the float caches.
template <int R>
void pv64(const float* P, int nj, const float* V, size_t ldv, int c0, const float* corr, float* const* O) {
    __m512 acc[R][4];
    for (int r = 0; r < R; ++r) {
        const __m512 cr = _mm512_set1_ps(corr[r]);
        for (int c = 0; c < 4; ++c) acc[r][c] = _mm512_mul_ps(cr, _mm512_loadu_ps(O[r] + c0 + 16 * c));
    }
    const float* vr = V;
    for (int j = 0; j < nj; ++j, vr += ldv) {
        __m512 v[4];
        for (int c = 0; c < 4; ++c) v[c] = _mm512_loadu_ps(vr + 16 * c);
        for (int r = 0; r < R; ++r) {
            const __m512 pb = _mm512_set1_ps(P[r * kTile + j]);
            for (int c = 0; c < 4; ++c) acc[r][c] = _mm512_fmadd_ps(pb, v[c], acc[r][c]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < 4; ++c) _mm512_storeu_ps(O[r] + c0 + 16 * c, acc[r][c]);
}

// GCC 12's avx512fintrin.h (its _mm512_undefined_* in the intrinsics' masked builtins) trips
// -Wuninitialized when inlined here, as -Wmaybe-uninitialized elsewhere (CMakeLists.txt): not our code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
// As pv, int8: O[r][c0..c0+64) = O[r]·corr[r] + ps[r] · Σ_{j < 4·nq} Pq[r][j] Vp[j][..] for R rows
// (vpdpbusd, u8 P × s8 V, int32 sums over the tile; the column order of pack_v_i8 is undone here).
// The accumulators are named locals fed to an asm vpdpbusd with a tied operand: with the intrinsic
// on an acc[R][4] array GCC 12 kept them in rotating registers, ~2 vmovdqa per vpdpbusd and a spill
// in pv_i8<4>'s loop (perf annotate), as qk_rows16_8 found for its own.
//
// Perm: O's 64-column chunks are kept in the accumulators' column order (vector k, 128-bit lane L =
// columns 16L + 4k .. +3) and undone once at the end by the caller (unpermute_o64), which saves the
// 8 shuffles per row and chunk of every tile. Row r's bytes 4q..4q+3 are at Pq + r·ldp + q·ldq
// ([r][j] rows: ldp = the tile, ldq = 4; the 16-row path's [j/4][r][4]: ldp = 4, ldq = 64).
// first (with Perm only): O is not read but set (the first tile of a call: no memset before it).
template <int R, bool Perm = false>
void pv_i8(const uint8_t* Pq, int ldp, int ldq, const float* ps, int nq, const __m512i* vp, int c0, const float* corr,
           float* const* O, bool first = false) {
    // named accumulators, each tied to one register by the asm (see dpbusd); those of rows >= R
    // are never touched and vanish. (Binding them to zmm16..31 as local register variables removed
    // the 6 moves GCC 12 still put into pv_i8<4>'s loop for the last row, but measured no faster and
    // produced wrong sums at -O1 under the sanitizers: GCC only promises such bindings at the asm.)
    __m512i a00 = _mm512_setzero_si512(), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00,
            a13 = a00, a20 = a00, a21 = a00, a22 = a00, a23 = a00, a30 = a00, a31 = a00, a32 = a00, a33 = a00;
    for (int q = 0; q < nq; ++q) {
        const __m512i v0 = _mm512_load_si512(vp + 4 * q), v1 = _mm512_load_si512(vp + 4 * q + 1),
                      v2 = _mm512_load_si512(vp + 4 * q + 2), v3 = _mm512_load_si512(vp + 4 * q + 3);
#define LATTE_PV_ROW(r, x0, x1, x2, x3)                                  \
    if constexpr (R > (r)) {                                             \
        int32_t w;                                                       \
        std::memcpy(&w, Pq + (r) * ldp + q * ldq, sizeof w);             \
        const __m512i pb = _mm512_set1_epi32(w);                         \
        asm("vpdpbusd %2, %1, %0" : "+v"(x0) : "v"(pb), "v"(v0));        \
        asm("vpdpbusd %2, %1, %0" : "+v"(x1) : "v"(pb), "v"(v1));        \
        asm("vpdpbusd %2, %1, %0" : "+v"(x2) : "v"(pb), "v"(v2));        \
        asm("vpdpbusd %2, %1, %0" : "+v"(x3) : "v"(pb), "v"(v3));        \
    }
        LATTE_PV_ROW(0, a00, a01, a02, a03)
        LATTE_PV_ROW(1, a10, a11, a12, a13)
        LATTE_PV_ROW(2, a20, a21, a22, a23)
        LATTE_PV_ROW(3, a30, a31, a32, a33)
#undef LATTE_PV_ROW
    }
    static_assert(R >= 1 && R <= 4, "pv_i8 takes 1..4 rows");
    const __m512i acc[4][4] = {{a00, a01, a02, a03}, {a10, a11, a12, a13}, {a20, a21, a22, a23}, {a30, a31, a32, a33}};
    for (int r = 0; r < R; ++r) {
        __m512 f[4];
        for (int k = 0; k < 4; ++k) f[k] = _mm512_cvtepi32_ps(acc[r][k]);
        const __m512 cr = _mm512_set1_ps(corr[r]), sr = _mm512_set1_ps(ps[r]);
        if constexpr (Perm) {
            for (int m = 0; m < 4; ++m) {
                float* op = O[r] + c0 + 16 * m;
                _mm512_storeu_ps(op, first ? _mm512_mul_ps(sr, f[m])
                                           : _mm512_fmadd_ps(sr, f[m], _mm512_mul_ps(cr, _mm512_loadu_ps(op))));
            }
            continue;
        }
        // acc[k] lane L = columns 16L + 4k .. +3: a 4×4 transpose of 128-bit lanes gives 16L .. 16L+15
        transpose_lanes4(f);
        for (int m = 0; m < 4; ++m) {
            float* op = O[r] + c0 + 16 * m;
            _mm512_storeu_ps(op, _mm512_fmadd_ps(sr, f[m], _mm512_mul_ps(cr, _mm512_loadu_ps(op))));
        }
    }
}
#pragma GCC diagnostic pop

// As pv, with bf16 pairs: O[r][c0..c0+32) = O[r]·corr[r] + Σ_{j < 2·np} Pb[r][j] Vp[j][..] (f32 sums).
template <int R>
void pv_bf16(const uint16_t* Pb, int np, const __m512i* vp, int c0, const float* corr, float* const* O) {
    static_assert(R >= 1 && R <= 8, "pv_bf16 takes 1..8 rows");
    // named accumulators through an asm vdpbf16ps, as pv_i8 (GCC 12 rotates an acc[R][2] array)
    __m512 a00 = _mm512_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00,
           a40 = a00, a41 = a00, a50 = a00, a51 = a00, a60 = a00, a61 = a00, a70 = a00, a71 = a00;
#define LATTE_PVB(M)                                                                              \
    M(0, a00, a01) M(1, a10, a11) M(2, a20, a21) M(3, a30, a31) M(4, a40, a41) M(5, a50, a51) \
    M(6, a60, a61) M(7, a70, a71)
#define LATTE_PVB_INIT(r, x0, x1)                                      \
    if constexpr (R > (r)) {                                           \
        const __m512 cr = _mm512_set1_ps(corr[r]);                     \
        x0 = _mm512_mul_ps(cr, _mm512_loadu_ps(O[r] + c0));            \
        x1 = _mm512_mul_ps(cr, _mm512_loadu_ps(O[r] + c0 + 16));       \
    }
    LATTE_PVB(LATTE_PVB_INIT)
    for (int p = 0; p < np; ++p) {
        const __m512i v0 = _mm512_load_si512(vp + 2 * p), v1 = _mm512_load_si512(vp + 2 * p + 1);
#define LATTE_PVB_STEP(r, x0, x1)                                      \
    if constexpr (R > (r)) {                                           \
        int32_t w;                                                     \
        std::memcpy(&w, Pb + (r) * kTile + 2 * p, sizeof w);           \
        const __m512i pb = _mm512_set1_epi32(w);                       \
        asm("vdpbf16ps %2, %1, %0" : "+v"(x0) : "v"(pb), "v"(v0));     \
        asm("vdpbf16ps %2, %1, %0" : "+v"(x1) : "v"(pb), "v"(v1));     \
    }
        LATTE_PVB(LATTE_PVB_STEP)
    }
#define LATTE_PVB_STORE(r, x0, x1)                                     \
    if constexpr (R > (r)) {                                           \
        _mm512_storeu_ps(O[r] + c0, x0);                               \
        _mm512_storeu_ps(O[r] + c0 + 16, x1);                          \
    }
    LATTE_PVB(LATTE_PVB_STORE)
#undef LATTE_PVB_STORE
#undef LATTE_PVB_STEP
#undef LATTE_PVB_INIT
#undef LATTE_PVB
}

template <int R>
void pv_bf16_dispatch(int rows, const uint16_t* Pb, int np, const __m512i* vp, int c0, const float* corr,
                      float* const* O) {
    if constexpr (R > 0) {
        if (rows == R) return pv_bf16<R>(Pb, np, vp, c0, corr, O);
        return pv_bf16_dispatch<R - 1>(rows, Pb, np, vp, c0, corr, O);
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

// Four KV rows' u8 values per lane (int32 0..255 in b0..b3, rows j..j+3) as the quads pv_i8 and
// pv_rows16_q80 broadcast from: lane r holds bytes {b0[r], b1[r], b2[r], b3[r]}. The packs give, per
// 128-bit lane, the 4 lanes' bytes row by row (saturating: values past 255 would give 255, as a min
// would) and one byte shuffle per lane transposes that 4×4: 4 ops where shifts and ors took 6.
inline __m512i quads_u8(__m512i b0, __m512i b1, __m512i b2, __m512i b3) {
    const __m512i tr = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    const __m512i w = _mm512_packus_epi16(_mm512_packus_epi32(b0, b1), _mm512_packus_epi32(b2, b3));
    return _mm512_shuffle_epi8(w, tr);
}

// One KV row's 16 scores from its int32 sum acc of (q + 128)·k: (qd_r · d_j) · (acc − 128 · sum_j),
// d_j and sum_j from the q8_KV row header at `row`; mx takes their max (the tile's max where every
// lane sees the whole tile: no separate max pass then).
inline void score_row16(__m512i acc, const uint8_t* row, __m512 qdv, float* st, __m512& mx) {
    RowQ8KVHeader h;
    std::memcpy(&h, row, sizeof h);
    const __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc, _mm512_set1_epi32(128 * h.sum)));
    const __m512 sv = _mm512_mul_ps(v, _mm512_mul_ps(qdv, _mm512_set1_ps(h.d)));
    _mm512_store_ps(st, sv);
    mx = _mm512_max_ps(mx, sv);
}

// Scores of J KV rows (q8_KV, read in place) for the 16 query rows held as the lanes of a vector:
// St[j][r] = (qd_r · d_j) · (Σ_k (q_rk + 128) k_jk − 128 · sum_j), Qp[k/4][16][4] = q + 128 (u8) and
// sum_j the row's int8 sum from its q8_KV header.
template <int J>
inline void qk_rows16(const uint8_t* qp, int Dk, const uint8_t* K, size_t ldk, __m512 qdv, float* St, __m512& mx) {
    __m512i acc[J];
    for (int x = 0; x < J; ++x) acc[x] = _mm512_setzero_si512();
    const uint8_t* kq = K + sizeof(RowQ8KVHeader);
    for (int k4 = 0; k4 < Dk / 4; ++k4) {
        const __m512i qv = _mm512_load_si512(qp + 64 * k4);
        for (int x = 0; x < J; ++x) {
            int32_t w;
            std::memcpy(&w, kq + x * ldk + 4 * k4, sizeof w);
            acc[x] = _mm512_dpbusd_epi32(acc[x], qv, _mm512_set1_epi32(w));
        }
    }
    for (int x = 0; x < J; ++x) score_row16(acc[x], K + x * ldk, qdv, St + 16 * x, mx);
}

// The 16-row Q·Kᵀ loops' asm pieces: the 16 accumulators zmm16..31 zeroed, and one step's 16
// vpdpbusd of the u8 query (zmm0) with the 4 K bytes of each of the 16 rows (row bases p0, p5, p10,
// p15 and the strides L, L3; displacement d4 bytes into the step's dims) broadcast from memory.
#define LATTE_ZERO16                                                         \
    "vpxord %%zmm16, %%zmm16, %%zmm16\n\t"                                   \
    "vmovdqa64 %%zmm16, %%zmm17\n\t" "vmovdqa64 %%zmm16, %%zmm18\n\t"        \
    "vmovdqa64 %%zmm16, %%zmm19\n\t" "vmovdqa64 %%zmm16, %%zmm20\n\t"        \
    "vmovdqa64 %%zmm16, %%zmm21\n\t" "vmovdqa64 %%zmm16, %%zmm22\n\t"        \
    "vmovdqa64 %%zmm16, %%zmm23\n\t" "vmovdqa64 %%zmm16, %%zmm24\n\t"        \
    "vmovdqa64 %%zmm16, %%zmm25\n\t" "vmovdqa64 %%zmm16, %%zmm26\n\t"        \
    "vmovdqa64 %%zmm16, %%zmm27\n\t" "vmovdqa64 %%zmm16, %%zmm28\n\t"        \
    "vmovdqa64 %%zmm16, %%zmm29\n\t" "vmovdqa64 %%zmm16, %%zmm30\n\t"        \
    "vmovdqa64 %%zmm16, %%zmm31\n\t"
#define LATTE_DPB16(d4)                                                      \
    "vpdpbusd " #d4 "(%[p0])%{1to16%}, %%zmm0, %%zmm16\n\t"                  \
    "vpdpbusd " #d4 "(%[p0],%[L],1)%{1to16%}, %%zmm0, %%zmm17\n\t"           \
    "vpdpbusd " #d4 "(%[p0],%[L],2)%{1to16%}, %%zmm0, %%zmm18\n\t"           \
    "vpdpbusd " #d4 "(%[p0],%[L3],1)%{1to16%}, %%zmm0, %%zmm19\n\t"          \
    "vpdpbusd " #d4 "(%[p0],%[L],4)%{1to16%}, %%zmm0, %%zmm20\n\t"           \
    "vpdpbusd " #d4 "(%[p5])%{1to16%}, %%zmm0, %%zmm21\n\t"                  \
    "vpdpbusd " #d4 "(%[p5],%[L],1)%{1to16%}, %%zmm0, %%zmm22\n\t"           \
    "vpdpbusd " #d4 "(%[p5],%[L],2)%{1to16%}, %%zmm0, %%zmm23\n\t"           \
    "vpdpbusd " #d4 "(%[p5],%[L3],1)%{1to16%}, %%zmm0, %%zmm24\n\t"          \
    "vpdpbusd " #d4 "(%[p5],%[L],4)%{1to16%}, %%zmm0, %%zmm25\n\t"           \
    "vpdpbusd " #d4 "(%[p10])%{1to16%}, %%zmm0, %%zmm26\n\t"                 \
    "vpdpbusd " #d4 "(%[p10],%[L],1)%{1to16%}, %%zmm0, %%zmm27\n\t"          \
    "vpdpbusd " #d4 "(%[p10],%[L],2)%{1to16%}, %%zmm0, %%zmm28\n\t"          \
    "vpdpbusd " #d4 "(%[p10],%[L3],1)%{1to16%}, %%zmm0, %%zmm29\n\t"         \
    "vpdpbusd " #d4 "(%[p10],%[L],4)%{1to16%}, %%zmm0, %%zmm30\n\t"          \
    "vpdpbusd " #d4 "(%[p15])%{1to16%}, %%zmm0, %%zmm31\n\t"

// The 16-row Q·Kᵀ loops' epilogue in asm (score_row16 for accumulator zmm<16+x> of the KV row whose
// header is at A): (qdv · d) · (acc − 128 · sum), the max into mx, stored to St row x — the
// accumulators go straight to scores, no store and reload of the int32 sums (the same operations
// and roundings as score_row16, so the same bits).
#define LATTE_SCORE16(x, A)                                                  \
    "vpbroadcastd 4" A ", %%zmm1\n\t"                                        \
    "vpslld $7, %%zmm1, %%zmm1\n\t"                                          \
    "vpsubd %%zmm1, %%zmm" #x ", %%zmm" #x "\n\t"                            \
    "vcvtdq2ps %%zmm" #x ", %%zmm" #x "\n\t"                                 \
    "vmulps 0" A "%{1to16%}, %[qdv], %%zmm2\n\t"                             \
    "vmulps %%zmm2, %%zmm" #x ", %%zmm" #x "\n\t"                            \
    "vmaxps %%zmm" #x ", %[mx], %[mx]\n\t"                                   \
    "vmovaps %%zmm" #x ", 64*(" #x "-16)(%[out])\n\t"
#define LATTE_SCORE16_ALL                                                    \
    "lea (%[kb],%[L],4), %[p5]\n\t"                                          \
    "add %[L], %[p5]\n\t"                                                    \
    "lea (%[p5],%[L],4), %[p10]\n\t"                                         \
    "add %[L], %[p10]\n\t"                                                   \
    "lea (%[p10],%[L],4), %[p15]\n\t"                                        \
    "add %[L], %[p15]\n\t"                                                   \
    LATTE_SCORE16(16, "(%[kb])") LATTE_SCORE16(17, "(%[kb],%[L],1)")         \
    LATTE_SCORE16(18, "(%[kb],%[L],2)") LATTE_SCORE16(19, "(%[kb],%[L3],1)") \
    LATTE_SCORE16(20, "(%[kb],%[L],4)") LATTE_SCORE16(21, "(%[p5])")         \
    LATTE_SCORE16(22, "(%[p5],%[L],1)") LATTE_SCORE16(23, "(%[p5],%[L],2)")  \
    LATTE_SCORE16(24, "(%[p5],%[L3],1)") LATTE_SCORE16(25, "(%[p5],%[L],4)") \
    LATTE_SCORE16(26, "(%[p10])") LATTE_SCORE16(27, "(%[p10],%[L],1)")       \
    LATTE_SCORE16(28, "(%[p10],%[L],2)") LATTE_SCORE16(29, "(%[p10],%[L3],1)") \
    LATTE_SCORE16(30, "(%[p10],%[L],4)") LATTE_SCORE16(31, "(%[p15])")

// qk_rows16<J> for J = 8 or 16 KV rows with the accumulators as named registers (8: named locals
// tied by the asm vpdpbusd; 16: the asm loop's own zmm16..31): GCC 12 keeps an array of them in
// rotating registers (a move per vpdpbusd) or on the stack. 16 rows
// per pass: vpdpbusd has a latency of 4 cycles and 2 issue per cycle on Zen 5, so 8 chains reach
// ~86% of its rate and 16 ~93% (a loop of only these vpdpbusd with the broadcast K loads, /tmp
// microbenchmark, 2026-12-04).
// J = 16 also prefetches: pf0_bytes from pf0 into L1 and pf1_bytes from pf1 into L2 (null: none),
// one line of each per step of its loop and the rest after it.
template <int J>
inline void qk_rows16_n(const uint8_t* qp, int Dk, const uint8_t* K, size_t ldk, __m512 qdv, float* St, __m512& mx,
                        const uint8_t* pf0 = nullptr, size_t pf0_bytes = 0, const uint8_t* pf1 = nullptr,
                        size_t pf1_bytes = 0) {
    static_assert(J == 8 || J == 16, "qk_rows16_n takes 8 or 16 KV rows");
    const uint8_t* kq = K + sizeof(RowQ8KVHeader);
#define LATTE_DPB(x, acc)                                                              \
    do {                                                                               \
        int32_t w;                                                                     \
        std::memcpy(&w, kq + (x) * ldk + 4 * k4, sizeof w);                            \
        const __m512i bw = _mm512_set1_epi32(w);                                       \
        asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(qv), "v"(bw));                     \
    } while (0)
    if constexpr (J == 16) {
        // The whole loop in asm: in C GCC 12 needs 16 row addresses and spilled some of them (a
        // stack load per two vpdpbusd). Here 4 row pointers (rows 0, 5, 10, 15) and the index
        // registers ldk and 3·ldk reach all 16 rows (b, b+L, b+2L, b+3L, b+4L), each vpdpbusd
        // broadcasts its 4 K bytes from memory ({1to16}), and the accumulators zmm16..31 (asm
        // operands count twice towards GCC's limit of 30, so they are the asm's own) are stored to
        // St as int32 at the end.
        const uint8_t* p0 = kq;
        const uint8_t* p5 = kq + 5 * ldk;
        const uint8_t* p10 = kq + 10 * ldk;
        const uint8_t* p15 = kq + 15 * ldk;
        const size_t L = ldk, L3 = 3 * ldk;
        const uint8_t* q = qp;
        long n = Dk / 4;
        // (without a prefetch address the loop's prefetch touches the query lines it reads anyway)
        const uint8_t* pfp0 = pf0 ? pf0 : qp;
        const uint8_t* pfp1 = pf1 ? pf1 : qp;
        asm volatile(
            LATTE_ZERO16
            "1:\n\t"
            "vmovdqa64 (%[q]), %%zmm0\n\t"
            LATTE_DPB16(0)
            "prefetcht0 (%[pf0])\n\t"
            "prefetcht1 (%[pf1])\n\t"
            "add $64, %[pf0]\n\t"
            "add $64, %[pf1]\n\t"
            "add $64, %[q]\n\t"
            "add $4, %[p0]\n\t"
            "add $4, %[p5]\n\t"
            "add $4, %[p10]\n\t"
            "add $4, %[p15]\n\t"
            "dec %[n]\n\t"
            "jnz 1b\n\t"
            LATTE_SCORE16_ALL
            : [q] "+r"(q), [p0] "+r"(p0), [p5] "+r"(p5), [p10] "+r"(p10), [p15] "+r"(p15), [n] "+r"(n), [pf0] "+r"(pfp0), [pf1] "+r"(pfp1)
              , [mx] "+v"(mx)
            : [L] "r"(L), [L3] "r"(L3), [out] "r"(St), [kb] "r"(K), [qdv] "v"(qdv)
            : "zmm0", "zmm1", "zmm2", "zmm16", "zmm17", "zmm18", "zmm19", "zmm20", "zmm21", "zmm22", "zmm23", "zmm24", "zmm25",
              "zmm26", "zmm27", "zmm28", "zmm29", "zmm30", "zmm31", "memory", "cc");
        // the lines the loop's one prefetch per step did not reach (pfp0/pfp1 are where it stopped)
        if (pf0)
            for (; pfp0 < pf0 + pf0_bytes; pfp0 += 64) _mm_prefetch(reinterpret_cast<const char*>(pfp0), _MM_HINT_T0);
        if (pf1)
            for (; pfp1 < pf1 + pf1_bytes; pfp1 += 64) _mm_prefetch(reinterpret_cast<const char*>(pfp1), _MM_HINT_T1);
        return;
    }
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (int k4 = 0; k4 < Dk / 4; ++k4) {
        const __m512i qv = _mm512_load_si512(qp + 64 * k4);
        LATTE_DPB(0, a0);
        LATTE_DPB(1, a1);
        LATTE_DPB(2, a2);
        LATTE_DPB(3, a3);
        LATTE_DPB(4, a4);
        LATTE_DPB(5, a5);
        LATTE_DPB(6, a6);
        LATTE_DPB(7, a7);
    }
#undef LATTE_DPB
    const __m512i acc[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
    for (int x = 0; x < 8; ++x) score_row16(acc[x], K + x * ldk, qdv, St + 16 * x, mx);
}

// qk_rows16_n<16> for MQA (V = the K rows' first Dv bytes) with the 16 rows' V packed for pv_i8 in
// the same loop: the loop takes 4 of its steps per pass and, in the first Dv/16 passes, one pack
// unit (4 rows × 64 columns: 4 loads, 8 unpacks, 4 stores, pack_v_i8's layout) of these rows,
// which are in L1 already (the previous group's loop prefetched them). The unpacks and stores run
// beside the vpdpbusd instead of after them. vp0: the tile's first chunk at this group's first
// row (chunk c at vp0 + c·T, T = kT16). Needs Dk % 16 == 0, Dv % 64 == 0, Dv <= Dk. Prefetches
// pf_bytes from pf into L1 as qk_rows16_n's pf0 (null: none).
inline void qk_rows16_pack(const uint8_t* qp, int Dk, int Dv, const uint8_t* K, size_t ldk, __m512 qdv, float* St,
                           __m512& mx, __m512i* vp0, const uint8_t* pf, size_t pf_bytes) {
    const uint8_t* kq = K + sizeof(RowQ8KVHeader);
    const uint8_t* p0 = kq;
    const uint8_t* p5 = kq + 5 * ldk;
    const uint8_t* p10 = kq + 10 * ldk;
    const uint8_t* p15 = kq + 15 * ldk;
    const size_t L = ldk, L3 = 3 * ldk;
    const long adj = 64 - 16 * static_cast<long>(ldk);  // the next chunk's first quad from the last one's
    const uint8_t* q = qp;
    const uint8_t* vr = kq;                           // the pack unit's 4 rows, at its chunk's columns
    uint8_t* ob = reinterpret_cast<uint8_t*>(vp0);    // its 4 vectors
    long n = Dk / 16;
    const long units = Dv / 16;
    const long stop = n - units;  // passes with n (after its decrement) >= stop pack
    const uint8_t* pfp = pf ? pf : qp;
    static_assert(kT16 * 64 - 1024 == 31744, "the pack's chunk step below");
#define LATTE_QK16(d4, d64)                                                    \
    "vmovdqa64 " #d64 "(%[q]), %%zmm0\n\t"                                     \
    LATTE_DPB16(d4)                                                            \
    "prefetcht0 " #d64 "(%[pf])\n\t"
    asm volatile(
        LATTE_ZERO16
        "1:\n\t"
        LATTE_QK16(0, 0)
        LATTE_QK16(4, 64)
        LATTE_QK16(8, 128)
        LATTE_QK16(12, 192)
        "add $256, %[q]\n\t"
        "add $256, %[pf]\n\t"
        "add $16, %[p0]\n\t"
        "add $16, %[p5]\n\t"
        "add $16, %[p10]\n\t"
        "add $16, %[p15]\n\t"
        "dec %[n]\n\t"
        "cmp %[stop], %[n]\n\t"
        "jl 2f\n\t"
        // one pack unit: rows vr + {0, L, 2L, 3L}, 64 columns (pack_v_i8's unpacks)
        "vmovdqu64 (%[vr]), %%zmm1\n\t"
        "vmovdqu64 (%[vr],%[L],1), %%zmm2\n\t"
        "vmovdqu64 (%[vr],%[L],2), %%zmm3\n\t"
        "vmovdqu64 (%[vr],%[L3],1), %%zmm4\n\t"
        "vpunpcklbw %%zmm2, %%zmm1, %%zmm5\n\t"
        "vpunpckhbw %%zmm2, %%zmm1, %%zmm6\n\t"
        "vpunpcklbw %%zmm4, %%zmm3, %%zmm7\n\t"
        "vpunpckhbw %%zmm4, %%zmm3, %%zmm8\n\t"
        "vpunpcklwd %%zmm7, %%zmm5, %%zmm1\n\t"
        "vpunpckhwd %%zmm7, %%zmm5, %%zmm2\n\t"
        "vpunpcklwd %%zmm8, %%zmm6, %%zmm3\n\t"
        "vpunpckhwd %%zmm8, %%zmm6, %%zmm4\n\t"
        "vmovdqa64 %%zmm1, 0(%[ob])\n\t"
        "vmovdqa64 %%zmm2, 64(%[ob])\n\t"
        "vmovdqa64 %%zmm3, 128(%[ob])\n\t"
        "vmovdqa64 %%zmm4, 192(%[ob])\n\t"
        "lea (%[vr],%[L],4), %[vr]\n\t"
        "add $256, %[ob]\n\t"
        "test $3, %[n]\n\t"
        "jnz 2f\n\t"
        "add %[adj], %[vr]\n\t"
        "add $31744, %[ob]\n\t"
        "2:\n\t"
        "test %[n], %[n]\n\t"
        "jnz 1b\n\t"
        LATTE_SCORE16_ALL
        : [q] "+r"(q), [p0] "+r"(p0), [p5] "+r"(p5), [p10] "+r"(p10), [p15] "+r"(p15), [n] "+r"(n), [pf] "+r"(pfp),
          [vr] "+r"(vr), [ob] "+r"(ob), [mx] "+v"(mx)
        : [L] "r"(L), [L3] "r"(L3), [out] "r"(St), [adj] "m"(adj), [stop] "m"(stop), [kb] "r"(K), [qdv] "v"(qdv)
        : "zmm0", "zmm1", "zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7", "zmm8", "zmm16", "zmm17", "zmm18", "zmm19",
          "zmm20", "zmm21", "zmm22", "zmm23", "zmm24", "zmm25", "zmm26", "zmm27", "zmm28", "zmm29", "zmm30", "zmm31",
          "memory", "cc");
#undef LATTE_QK16
    if (pf)
        for (; pfp < pf + pf_bytes; pfp += 64) _mm_prefetch(reinterpret_cast<const char*>(pfp), _MM_HINT_T0);
}

// One 16-row group of a 16-row path's superblock: its rows [r0, r0 + mb), their visible KV lengths
// (lenv, max nmax), the online softmax's running max and sum (log2 units at q8_KV), the query
// scales as lanes (q8_KV).
struct Group16 {
    int r0, mb, nmax;
    __m512 qdv, mv, lv;
    __m512i lenv;
};
inline void group16_init(Group16& gr, int g, int mb_all, const int* kv_len, int N) {
    alignas(64) int32_t len[16];
    gr.r0 = 16 * g;
    gr.mb = std::min(16, mb_all - gr.r0);
    gr.nmax = 0;
    for (int r = 0; r < 16; ++r) {
        len[r] = r < gr.mb ? std::min(kv_len[gr.r0 + r], N) : 0;
        gr.nmax = std::max(gr.nmax, len[r]);
    }
    gr.lenv = _mm512_load_si512(len);
    gr.qdv = _mm512_setzero_ps();
    gr.mv = _mm512_set1_ps(kNegInf);
    gr.lv = _mm512_setzero_ps();
}

// Flash attention for up to kRowsSB query rows in groups of 16 (each group more than 8 rows) over
// a q8_KV K and V (TG with 16 heads; V3's 128 heads and PP in groups): each group's rows are the
// lanes of one vector, so Q·Kᵀ reads the K rows in place (vpdpbusd of the broadcast K bytes with
// the u8 query, no packed K tile) and the online softmax runs across the tile's KV rows on whole
// vectors; P·d is quantised to u8 with the rows still as lanes, in the layout the general path's
// int8 P·V (pv_i8) broadcasts from, and O stays in pv_i8's column order until the end of the call.
// The groups take each KV tile in turn while it is in L2, and its V is packed once for all of
// them (as far as the longest group's rows reach; causal groups see more rows later). Per group
// the tiles, and so the results, are those of a call with that group alone.
// qq/qd: the rows' quantised query (quantize_q); O, m_out, l_out, kv_len: these rows.
void flash_rows16_q8kv(int mb, int N, int Dk, int Dv, const int8_t* qq, const float* qd, const uint8_t* K,
                       size_t ldk, const uint8_t* V, size_t ldv, const int* kv_len, float* O, int64_t ldo,
                       float* m_out, float* l_out, Scratch& sc) {
    constexpr int T = kT16;
    constexpr int kG = kRowsSB / 16;  // groups at most
    const int G = (mb + 15) / 16;
    uint8_t* qpa = sc.rkp.get<uint8_t>(static_cast<size_t>(Dk) * 16 * kG);
    float* St = sc.p.get<float>(static_cast<size_t>(T) * 16);   // scores, then P, as [j][r]
    // the tile's V packed for pv_i8 as Q·Kᵀ goes: 64-column chunk c at vp + c·T (T rows × 64 bytes)
    auto* vp = reinterpret_cast<__m512i*>(sc.rvb.get<float>(static_cast<size_t>(T) * 16 * (Dv / 64)));
    uint8_t* pq = sc.rpb.get<uint8_t>(static_cast<size_t>(16) * T);  // u8 P·d as [j/4][r][4]
    Group16 grp[kG];
    alignas(64) float ps[16], corr[16], mrow[16], lrow[16], qdr[16];
    int nmax = 0;
    for (int g = 0; g < G; ++g) {
        Group16& gr = grp[g];
        group16_init(gr, g, mb, kv_len, N);
        for (int r = 0; r < 16; ++r) qdr[r] = r < gr.mb ? qd[gr.r0 + r] : 0.0f;
        nmax = std::max(nmax, gr.nmax);
        pack_q_rows16(qq + static_cast<size_t>(gr.r0) * Dk, gr.mb, Dk, true, qpa + static_cast<size_t>(g) * Dk * 16);
        // the scores in log2 units (log2 e folded into the query scales): the softmax's exp is exp2
        gr.qdv = _mm512_mul_ps(_mm512_load_ps(qdr), _mm512_set1_ps(kLog2e));
        // O is set by the group's first tile's P·V (every row and column: nq > 0 there), so only a
        // group that sees no row needs the zeros
        if (gr.nmax == 0)
            for (int r = 0; r < gr.mb; ++r)
                std::memset(O + (gr.r0 + r) * ldo, 0, static_cast<size_t>(Dv) * sizeof(float));
    }
    const bool v_in_k = V == K && ldv == ldk;
    // MQA: the V rows are packed inside the Q·Kᵀ loop (qk_rows16_pack) by the first group reaching
    // them in whole 16-row steps; LATTE_FUSEPACK=0 packs after the loop (the same bytes), to compare
    const bool fuse_pack = v_in_k && Dk % 16 == 0 && Dv <= Dk && [] {
        const char* e = std::getenv("LATTE_FUSEPACK");
        return !(e && *e == '0');
    }();
    for (int j0 = 0; j0 < nmax; j0 += T) {
        const bool first = j0 == 0;
        const uint8_t* Kt = K + static_cast<size_t>(j0) * ldk;
        // Each 16-row step prefetches the next 16 K rows into L1, one line per step of its loop
        // (and, where V is not the K rows' prefix, the next 16 V rows into L2). The 16 rows are 16
        // streams 4 bytes a step apart, which the hardware prefetchers follow too late: Zen 5, TG
        // 16 heads @ 32K, latte-attn-ab interleaved (2026-12-06): 1 thread 2.67-2.82 -> 2.11-2.22
        // ms, 2 threads 1.33-1.46 -> 1.14-1.28 ms, against the earlier prefetch of the next tile's
        // rows into L2 in four bursts (as good as none at all); 32 or 64 rows ahead were slower.
        //
        // V rows of the tile (all Dv columns) are packed for pv_i8 right after their Q·Kᵀ, while
        // those rows are in L1 (MQA: V is the K rows' prefix), by the first group that reaches
        // them. Packing each 64-column chunk before its P·V instead read every row back from L2
        // once per chunk (12% of the kernel's samples at 4K): Zen 5, latte-attn-ab interleaved, 11
        // rounds twice (2026-12-06): 1.01-1.06x at 1K, 1.03-1.06x at 32K, 1 and 2 threads.
        const uint8_t* Vtile = V + static_cast<size_t>(j0) * ldv;
        int packed = 0;  // rows [0, packed) of the tile's V are packed (whole quads from 4·(packed/4))
        auto pack_v = [&](int b) {
            if (b <= packed) return;
            const int a = packed & ~3;  // a partly packed quad is packed again, now with its rows
            for (int c0 = 0; c0 < Dv; c0 += 64)
                pack_v_i8(Vtile + static_cast<size_t>(a) * ldv, ldv, b - a, c0, vp + static_cast<size_t>(c0 / 64) * T + a);
            packed = b;
        };
        for (int g = 0; g < G; ++g) {
            Group16& gr = grp[g];
            if (gr.nmax <= j0) continue;
            const int nt = std::min(T, gr.nmax - j0);
            const uint8_t* qp = qpa + static_cast<size_t>(g) * Dk * 16;
            int j = 0;
            __m512 mxs = _mm512_set1_ps(kNegInf);  // the max of every score computed (all lanes, all rows)
            for (; j + 16 <= nt; j += 16) {
                const bool more = j0 + j + 32 <= gr.nmax;
                if (fuse_pack && packed == j) {  // the first group to reach these rows packs their V
                    qk_rows16_pack(qp, Dk, Dv, Kt + static_cast<size_t>(j) * ldk, ldk, gr.qdv, St + 16 * j, mxs, vp + j,
                                   more ? Kt + static_cast<size_t>(j + 16) * ldk : nullptr, 16 * ldk);
                    packed = j + 16;
                    continue;
                }
                qk_rows16_n<16>(qp, Dk, Kt + static_cast<size_t>(j) * ldk, ldk, gr.qdv, St + 16 * j, mxs,
                                more ? Kt + static_cast<size_t>(j + 16) * ldk : nullptr, 16 * ldk,
                                more && !v_in_k ? V + static_cast<size_t>(j0 + j + 16) * ldv : nullptr, 16 * ldv);
                pack_v(j + 16);
            }
            for (; j + 8 <= nt; j += 8) {
                qk_rows16_n<8>(qp, Dk, Kt + static_cast<size_t>(j) * ldk, ldk, gr.qdv, St + 16 * j, mxs);
                pack_v(j + 8);
            }
            if (j < nt) {
                for (; j < nt; ++j)
                    qk_rows16<1>(qp, Dk, Kt + static_cast<size_t>(j) * ldk, ldk, gr.qdv, St + 16 * j, mxs);
                pack_v(nt);
            }
            // online softmax across the tile, 16 rows at once, in log2 units (log2 e is in qdv) and
            // with the ×d_j pass fused into the exp pass (softmax_tile16's max and exp passes, a
            // d_j gather and a P·d pass before: two passes over St fewer, and exp2 without the
            // clamp is 8 vector instructions where exp_ps takes 12)
            const __m512i visv = tile_visible16(gr.lenv, j0, nt);
            const bool full = _mm512_cmplt_epi32_mask(visv, _mm512_set1_epi32(nt)) == 0;
            // (every lane sees all nt rows: the max the Q·Kᵀ steps took; else over what each lane sees)
            const __m512 mx = full ? mxs : tile_max16(St, nt, visv, false);
            // P·d_j (d_j from the V row's header), then quantised to u8 per row over the tile
            // (p_to_u8's rounding: scale max/255), here with the rows as lanes: no transpose of P to
            // rows. The u8 values of 4 consecutive KV rows are shifted into the 4 bytes of each
            // row's 32-bit lane, which is the [j/4][r][4] layout pv_i8 broadcasts from (Pq + 4r +
            // 64·(j/4)).
            {
                const __m512 pmax = softmax_pd_log2(St, nt, visv, full, mx, gr.mv, gr.lv, corr, [&](int jj) {
                    float d;
                    std::memcpy(&d, Vtile + static_cast<size_t>(jj) * ldv, sizeof d);
                    return d;
                });
                const __mmask16 pos = _mm512_cmp_ps_mask(pmax, _mm512_setzero_ps(), _CMP_GT_OQ);
                _mm512_store_ps(ps, _mm512_div_ps(pmax, _mm512_set1_ps(255.0f)));
                const __m512 inv = _mm512_maskz_div_ps(pos, _mm512_set1_ps(255.0f), pmax);
                auto q8 = [&](int jj) {
                    if (jj >= nt) return _mm512_setzero_si512();
                    return _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_load_ps(St + 16 * jj), inv));
                };
                for (int k = 0; k < (nt + 3) / 4; ++k)
                    _mm512_store_si512(pq + 64 * k, quads_u8(q8(4 * k), q8(4 * k + 1), q8(4 * k + 2), q8(4 * k + 3)));
            }
            int nj = 0;
            for (int r = 0; r < gr.mb; ++r) nj = std::max(nj, std::clamp(kv_len[gr.r0 + r] - j0, 0, nt));
            const int nq = (nj + 3) / 4;
            for (int c0 = 0; c0 < Dv; c0 += 64) {
                const __m512i* vpc = vp + static_cast<size_t>(c0 / 64) * T;
                for (int r = 0; r < gr.mb; r += 4) {
                    float* Op[4];
                    const int rr = std::min(4, gr.mb - r);
                    for (int x = 0; x < rr; ++x) Op[x] = O + (gr.r0 + r + x) * ldo;
                    const uint8_t* P = pq + 4 * r;
                    switch (rr) {
                        case 4: pv_i8<4, true>(P, 4, 64, ps + r, nq, vpc, c0, corr + r, Op, first); break;
                        case 3: pv_i8<3, true>(P, 4, 64, ps + r, nq, vpc, c0, corr + r, Op, first); break;
                        case 2: pv_i8<2, true>(P, 4, 64, ps + r, nq, vpc, c0, corr + r, Op, first); break;
                        default: pv_i8<1, true>(P, 4, 64, ps + r, nq, vpc, c0, corr + r, Op, first); break;
                    }
                }
            }
        }
    }
    for (int g = 0; g < G; ++g) {
        const Group16& gr = grp[g];
        _mm512_store_ps(mrow, gr.mv);
        _mm512_store_ps(lrow, gr.lv);
        for (int r = 0; r < gr.mb; ++r) {
            if (m_out) {
                m_out[gr.r0 + r] = mrow[r] * kLn2;  // the max back in natural-log units
                l_out[gr.r0 + r] = lrow[r];
            }
            unpermute_o64(O + (gr.r0 + r) * ldo, Dv, m_out ? 1.0f : (lrow[r] > 0.0f ? 1.0f / lrow[r] : 0.0f));
        }
    }
}

// q8_0 K, 16 query rows as the lanes: scores of 8 KV rows (x < 8; J of them valid, J = 8 or 1) from
// their K bytes flipped to u8 (kf[x][Dk] = k + 128, contiguous) and block scales kd[x][nb]:
//   St[j][r] = Σ_b (dq_rb · d_jb) · (Σ_{k in b} (k_jk + 128) q_rk − 128 · Σ_{k in b} q_rk),
// the query s8 as qp[k/4][16][4], qc[b][16] = −128 · Σ_{k in b} q_rk and qdb[b][16] = dq_rb·scale.
// One fresh int32 accumulator per KV row and block (8 vpdpbusd), then cvt and one FMA.
template <int J>
inline void qk_rows16_q80(const int8_t* qp, int nb, const uint8_t* kf, int Dk, const float* kd,
                          const int32_t* qc, const float* qdb, float* St) {
    __m512 f0 = _mm512_setzero_ps(), f1 = f0, f2 = f0, f3 = f0, f4 = f0, f5 = f0, f6 = f0, f7 = f0;
    for (int b = 0; b < nb; ++b) {
        const __m512i c = _mm512_load_si512(qc + 16 * b);
        __m512i a0 = c, a1 = c, a2 = c, a3 = c, a4 = c, a5 = c, a6 = c, a7 = c;
        const uint8_t* kb = kf + 32 * b;
        const int8_t* qb = qp + 16 * 32 * b;
#define LATTE_DPB(x, acc)                                                        \
    do {                                                                         \
        int32_t w;                                                               \
        std::memcpy(&w, kb + (x) * Dk + 4 * kk, sizeof w);                       \
        const __m512i bw = _mm512_set1_epi32(w);                                 \
        asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(bw), "v"(qv));               \
    } while (0)
        for (int kk = 0; kk < 8; ++kk) {
            const __m512i qv = _mm512_load_si512(qb + 64 * kk);
            LATTE_DPB(0, a0);
            if constexpr (J > 1) {
                LATTE_DPB(1, a1);
                LATTE_DPB(2, a2);
                LATTE_DPB(3, a3);
                LATTE_DPB(4, a4);
                LATTE_DPB(5, a5);
                LATTE_DPB(6, a6);
                LATTE_DPB(7, a7);
            }
        }
#undef LATTE_DPB
        const __m512 qd = _mm512_load_ps(qdb + 16 * b);
#define LATTE_FMA(x, acc, f) \
    f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_mul_ps(qd, _mm512_set1_ps(kd[(x) * nb + b])), f)
        LATTE_FMA(0, a0, f0);
        if constexpr (J > 1) {
            LATTE_FMA(1, a1, f1);
            LATTE_FMA(2, a2, f2);
            LATTE_FMA(3, a3, f3);
            LATTE_FMA(4, a4, f4);
            LATTE_FMA(5, a5, f5);
            LATTE_FMA(6, a6, f6);
            LATTE_FMA(7, a7, f7);
        }
#undef LATTE_FMA
    }
    _mm512_store_ps(St, f0);
    if constexpr (J > 1) {
        _mm512_store_ps(St + 16, f1);
        _mm512_store_ps(St + 32, f2);
        _mm512_store_ps(St + 48, f3);
        _mm512_store_ps(St + 64, f4);
        _mm512_store_ps(St + 80, f5);
        _mm512_store_ps(St + 96, f6);
        _mm512_store_ps(St + 112, f7);
    }
}

// n f16 values (n <= 64, h readable to a multiple of 16) to f32, 16 at a time.
inline void h16_to_f32(const uint16_t* h, int n, float* f) {
    for (int i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(f + i, m, _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(h + i))));
    }
}

// Copies n q8_0 rows' int8 values flipped to u8 (k + 128) into kf[x][Dk] and their scales to kd[x][nb].
// The f16 scales are gathered as 16-bit words (plain scalar moves) and converted 16 at a time
// (one scalar load, insert, convert and store per block was 5% of TG 16 heads @ 4K's samples).
inline void flip_rows_q80(const uint8_t* K, size_t ldk, int n, int Dk, uint8_t* kf, float* kd) {
    const int nb = Dk / 32;
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    alignas(64) uint16_t hs[64];
    for (int x = 0; x < n; ++x) {
        const uint8_t* row = K + static_cast<size_t>(x) * ldk;
        for (int b = 0; b < nb; ++b) {
            const uint8_t* blk = row + static_cast<size_t>(b) * sizeof(BlockQ8_0);
            std::memcpy(&hs[b], blk, sizeof(uint16_t));
            _mm256_store_si256(reinterpret_cast<__m256i*>(kf + x * Dk + 32 * b),
                               _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2)), flip));
        }
        h16_to_f32(hs, nb, kd + x * nb);
    }
}

bool pv_force_bf16();

// q8_0 V, int8 P·V with the 16 query rows as the lanes (the 16-row path): for each 32-column block cb
//   Pq[j][r] = round(P[j][r]·d_{j,cb} / ps[r]) in u8, ps[r] = max_j P[j][r]·d_{j,cb} / 255 (per row,
//   tile and block; d >= 0 as the q8_0 writer makes it), packed as quads of KV rows per lane;
//   V packed as quads of rows per column (vk[q][p]: 4 int8 {v[4q..4q+3][c(p)]}, the column order of
//   the unpack_epi8/epi16 interleave: position p = 8k + 4L + i holds column 16L + 4k + i);
//   OT[c][r] = OT[c][r]·corr[r] + ps[r] · Σ_q vpdpbusd(Pq[q][r], v[q][c]), 8 columns per pass.
// prep_v_q80 fills quads [q0, q1) of a tile's V (rows >= nt zero, d 0): dd[j][cb] = d_{j,cb} (dd
// non-null) and blocks [cb0, cb1)'s quads at vk + cb·cbs (cbs = 4·nqcap: the tile's V for the
// groups of a superblock; 0: each block over the last); pv_rows16_q80 runs
// one group over quads [0, nq) with St its P as [j][r] (0 past its visible rows and its tile end)
// and d_{j,cb} at dd[j·dds + cb].
void prep_v_q80(const uint8_t* Vt, size_t ldv, int nt, int Dv, int q0, int q1, size_t cbs, float* dd, __m256i* vk,
                int cb0 = 0, int cb1 = -1) {
    const int nbv = Dv / 32;
    if (cb1 < 0) cb1 = nbv;
    alignas(64) uint16_t hs[64] = {};
    for (int j = 4 * q0; dd && j < 4 * q1; ++j) {
        const uint8_t* row = Vt + static_cast<size_t>(j) * ldv;
        for (int cb = 0; cb < nbv; ++cb) {
            uint16_t h = 0;
            if (j < nt) std::memcpy(&h, row + static_cast<size_t>(cb) * sizeof(BlockQ8_0), sizeof h);
            hs[cb] = h;
        }
        h16_to_f32(hs, nbv, dd + j * nbv);
    }
    const __m256i z = _mm256_setzero_si256();
    for (int cb = cb0; cb < cb1; ++cb) {
        const size_t off = static_cast<size_t>(cb) * sizeof(BlockQ8_0) + 2;
        __m256i* vkb = vk + cb * cbs;
        for (int q = q0; q < q1; ++q) {
            __m256i r[4];
            for (int x = 0; x < 4; ++x) {
                const int j = 4 * q + x;
                r[x] = j < nt ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(Vt + static_cast<size_t>(j) * ldv + off))
                              : z;
            }
            const __m256i t0 = _mm256_unpacklo_epi8(r[0], r[1]), t1 = _mm256_unpackhi_epi8(r[0], r[1]);
            const __m256i u0 = _mm256_unpacklo_epi8(r[2], r[3]), u1 = _mm256_unpackhi_epi8(r[2], r[3]);
            _mm256_store_si256(vkb + 4 * q + 0, _mm256_unpacklo_epi16(t0, u0));
            _mm256_store_si256(vkb + 4 * q + 1, _mm256_unpackhi_epi16(t0, u0));
            _mm256_store_si256(vkb + 4 * q + 2, _mm256_unpacklo_epi16(t1, u1));
            _mm256_store_si256(vkb + 4 * q + 3, _mm256_unpackhi_epi16(t1, u1));
        }
    }
}

// (Vt non-null: vk is only this call's buffer and block cb's quads are packed into it right
// before its products, from Vt (nt rows), while they are in L1: one group alone, TG with 16 heads.)
void pv_rows16_q80(const float* St, int nq, const float* dd, int dds, __m256i* vk, int nqcap, int Dv, __m512 corr,
                   float* OT, Scratch& sc, const uint8_t* Vt = nullptr, size_t ldv = 0, int nt = 0) {
    const int nbv = Dv / 32;
    auto* pq = reinterpret_cast<__m512i*>(sc.rpb.get<uint16_t>(static_cast<size_t>(16) * kTile));
    float* xs = sc.rs.get<float>(static_cast<size_t>(16) * kTile);  // P·d of one block, [j][r]
    for (int cb = 0; cb < nbv; ++cb) {
        // P·d to u8 quads
        __m512 mx = _mm512_setzero_ps();
        for (int j = 0; j < 4 * nq; ++j) {
            const __m512 x = _mm512_mul_ps(_mm512_load_ps(St + 16 * j), _mm512_set1_ps(dd[j * dds + cb]));
            _mm512_store_ps(xs + 16 * j, x);
            mx = _mm512_max_ps(mx, x);
        }
        const __m512 ps = _mm512_mul_ps(mx, _mm512_set1_ps(1.0f / 255.0f));
        const __m512 inv =
            _mm512_maskz_div_ps(_mm512_cmp_ps_mask(mx, _mm512_setzero_ps(), _CMP_GT_OQ), _mm512_set1_ps(255.0f), mx);
        for (int q = 0; q < nq; ++q) {
            __m512i u[4];
            for (int i = 0; i < 4; ++i) {
                const int j = 4 * q + i;
                u[i] = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_load_ps(xs + 16 * j), inv));
            }
            _mm512_store_si512(pq + q, quads_u8(u[0], u[1], u[2], u[3]));
        }
        // (inline: every block's quads in block 0's slot, which stays in L1)
        if (Vt) prep_v_q80(Vt, ldv, nt, Dv, 0, nq, 0, nullptr, vk, cb, cb + 1);
        const auto* vb = reinterpret_cast<const int32_t*>(vk + (Vt ? 0 : static_cast<size_t>(cb) * 4 * nqcap));
        for (int k = 0; k < 4; ++k) {  // positions 8k .. 8k+7: columns 4k + {0..3} and 16 + 4k + {0..3}
            __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
#define LATTE_DPV(x, acc)                                                    \
    do {                                                                     \
        const __m512i bw = _mm512_set1_epi32(vb[32 * q + 8 * k + (x)]);      \
        asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(pv), "v"(bw));           \
    } while (0)
            for (int q = 0; q < nq; ++q) {
                const __m512i pv = _mm512_load_si512(pq + q);
                LATTE_DPV(0, a0);
                LATTE_DPV(1, a1);
                LATTE_DPV(2, a2);
                LATTE_DPV(3, a3);
                LATTE_DPV(4, a4);
                LATTE_DPV(5, a5);
                LATTE_DPV(6, a6);
                LATTE_DPV(7, a7);
            }
#undef LATTE_DPV
            const __m512i acc[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
            for (int x = 0; x < 8; ++x) {
                float* o = OT + 16 * (32 * cb + 16 * (x / 4) + 4 * k + x % 4);
                _mm512_store_ps(o, _mm512_fmadd_ps(ps, _mm512_cvtepi32_ps(acc[x]), _mm512_mul_ps(corr, _mm512_load_ps(o))));
            }
        }
    }
}

// As flash_rows16_q8kv for a q8_0 K and V (up to kRowsSB rows in groups of 16, each more than 8;
// TG with 16 heads on a q8_0 cache, V3's 128 heads and PP in groups): each group's rows are the
// lanes of one vector, the tile's K rows are copied once for all groups (flipped to u8, with their
// block scales, into an L1/L2 buffer: flip_rows_q80) and read by each group's Q·Kᵀ
// (qk_rows16_q80), the online softmax runs on whole vectors, and the int8 P·V (pv_rows16_q80)
// takes the tile's V quads and block scales prepared once for all groups (prep_v_q80, as far as
// the longest group's visible rows reach). Per group the results are those of a call with the
// group alone (its P is 0 past its own rows). LATTE_PV=bf16: P transposed to rows for the bf16
// P·V of the general path (pack_v_bf16 / p_to_bf16 / pv_bf16, per 32-column block), per group.
// qq/qd/qs: the rows' query quantised per 32-block (quantize_q: qd includes the softmax scale).
void flash_rows16_q80(int mb, int N, int Dk, int Dv, const int8_t* qq, const float* qd, const int32_t* qs,
                      const uint8_t* K, size_t ldk, const uint8_t* V, size_t ldv, const int* kv_len, float* O,
                      int64_t ldo, float* m_out, float* l_out, Scratch& sc) {
    constexpr int kG = kRowsSB / 16;  // groups at most
    const int G = (mb + 15) / 16;
    const int nb = Dk / 32, nbv = Dv / 32;
    auto* qpa = reinterpret_cast<int8_t*>(sc.rkp.get<uint8_t>(static_cast<size_t>(Dk) * 16 * kG));
    // per group and block: qc = −128·Σq (the u8 excess of the flipped K), qdb = dq·scale; 0 for
    // padded rows
    float* qdba = sc.rks.get<float>(static_cast<size_t>(2) * nb * 16 * kG);
    uint8_t* kf = sc.kf.get<uint8_t>(static_cast<size_t>(kTile) * Dk);  // the tile's K rows, flipped
    float* kd = sc.kd.get<float>(static_cast<size_t>(kTile) * nb);
    float* St = sc.p.get<float>(static_cast<size_t>(kTile) * 16);   // scores, then P, as [j][r]
    float* S = sc.rs.get<float>(static_cast<size_t>(16) * kTile);    // P as [r][j] (bf16 P·V)
    const bool pv_i8 = Dv % 32 == 0 && !pv_force_bf16();
    constexpr int nqcap = kTile / 4;
    float* dd = pv_i8 ? sc.vdd.get<float>(static_cast<size_t>(kTile) * nbv) : nullptr;  // d_{j,cb} as dd[j][cb]
    auto* vk = pv_i8 ? reinterpret_cast<__m256i*>(sc.rvk.get<float>(static_cast<size_t>(kTile) * Dv / 4)) : nullptr;
    auto* vp = pv_i8 ? nullptr : reinterpret_cast<__m512i*>(sc.rvb.get<float>(static_cast<size_t>(kTile) * 32));
    uint16_t* pb = pv_i8 ? nullptr : sc.rpb.get<uint16_t>(static_cast<size_t>(16) * kTile);
    float* vd = pv_i8 ? nullptr : sc.vd.get<float>(kTile);
    float* OTa = pv_i8 ? sc.ot.get<float>(static_cast<size_t>(Dv) * 16 * kG) : nullptr;  // O^T[c][r] per group
    Group16 grp[kG];
    alignas(64) float corr[16], mrow[16], lrow[16];
    int nmax = 0;
    for (int g = 0; g < G; ++g) {
        Group16& gr = grp[g];
        group16_init(gr, g, mb, kv_len, N);
        nmax = std::max(nmax, gr.nmax);
        pack_q_rows16(qq + static_cast<size_t>(gr.r0) * Dk, gr.mb, Dk, false,
                      reinterpret_cast<uint8_t*>(qpa + static_cast<size_t>(g) * Dk * 16));
        float* qdb = qdba + static_cast<size_t>(g) * 2 * nb * 16;
        auto* qc = reinterpret_cast<int32_t*>(qdb + 16 * nb);
        for (int b = 0; b < nb; ++b)
            for (int r = 0; r < 16; ++r) {
                qdb[16 * b + r] = r < gr.mb ? qd[(gr.r0 + r) * nb + b] : 0.0f;
                qc[16 * b + r] = r < gr.mb ? -128 * qs[(gr.r0 + r) * nb + b] : 0;
            }
        // (the int8 P·V writes O from OT at the end; the bf16 one accumulates into O)
        if (pv_i8) std::memset(OTa + static_cast<size_t>(g) * Dv * 16, 0, static_cast<size_t>(Dv) * 16 * sizeof(float));
        else
            for (int r = 0; r < gr.mb; ++r)
                std::memset(O + (gr.r0 + r) * ldo, 0, static_cast<size_t>(Dv) * sizeof(float));
    }
    const bool v_in_k = V == K && ldv == ldk;
    const bool dd_in_kd = v_in_k && Dv <= Dk;
    const size_t krow_bytes = row_bytes(GGMLType::Q8_0, Dk), vrow_bytes = row_bytes(GGMLType::Q8_0, Dv);
    for (int j0 = 0; j0 < nmax; j0 += kTile) {
        const int nt_all = std::min(kTile, nmax - j0);
        const uint8_t* Kt = K + static_cast<size_t>(j0) * ldk;
        const int nn = j0 + kTile < nmax ? std::min(kTile, nmax - j0 - kTile) : 0;
        auto prefetch_next = [&](int half) {
            const int a = half * nn / 2, b = (half + 1) * nn / 2;
            if (b <= a) return;
            prefetch_rows(Kt + static_cast<size_t>(kTile + a) * ldk, ldk, b - a, krow_bytes);
            if (!v_in_k) prefetch_rows(V + static_cast<size_t>(j0 + kTile + a) * ldv, ldv, b - a, vrow_bytes);
        };
        // K rows flipped as the first group that reaches them needs them (8 at a time: still in L1
        // for its Q·Kᵀ), read back by the later groups
        // (one group: every step's K rows go to the buffer's start, which stays in L1; the scales
        // kd[j][b] are kept for the whole tile: MQA's V block scales are the K rows' first ones)
        int flipped = 0;
        const int fs = G > 1 ? 1 : 0;
        auto flip = [&](int b) {
            if (b <= flipped) return;
            flip_rows_q80(Kt + static_cast<size_t>(flipped) * ldk, ldk, b - flipped, Dk,
                          kf + static_cast<size_t>(fs * flipped) * Dk, kd + flipped * nb);
            flipped = b;
        };
        const uint8_t* Vtile = V + static_cast<size_t>(j0) * ldv;
        int prepped = 0;  // V quads [0, prepped) of the tile are in dd / vk
        for (int g = 0; g < G; ++g) {
            Group16& gr = grp[g];
            if (gr.nmax <= j0) continue;
            const int nt = std::min(kTile, gr.nmax - j0);
            const int8_t* qp = qpa + static_cast<size_t>(g) * Dk * 16;
            const float* qdb = qdba + static_cast<size_t>(g) * 2 * nb * 16;
            const auto* qc = reinterpret_cast<const int32_t*>(qdb + 16 * nb);
            int j = 0;
            for (; j + 8 <= nt; j += 8) {
                flip(j + 8);
                qk_rows16_q80<8>(qp, nb, kf + static_cast<size_t>(fs * j) * Dk, Dk, kd + j * nb, qc, qdb,
                                 St + 16 * j);
            }
            for (; j < nt; ++j) {
                flip(j + 1);
                qk_rows16_q80<1>(qp, nb, kf + static_cast<size_t>(fs * j) * Dk, Dk, kd + j * nb, qc, qdb,
                                 St + 16 * j);
            }
            if (g == 0) prefetch_next(0);
            // online softmax across the tile, 16 rows at once
            softmax_tile16(St, nt, j0, gr.lenv, gr.mv, gr.lv, corr);
            if (g == 0) prefetch_next(1);
            int nj = 0;
            for (int r = 0; r < gr.mb; ++r) nj = std::max(nj, std::clamp(kv_len[gr.r0 + r] - j0, 0, nt));
            if (pv_i8) {
                // O^T += P V in int8, per 32-column block cb (P·d_{j,cb} to u8 per row, tile and block)
                // one group: V packed block by block inside pv_rows16_q80 (in L1 for its products);
                // more: the tile's quads prepared once, as far as the groups so far need them
                // MQA (V = the K rows' prefix): d_{j,cb} are the K rows' scales kd, rows the
                // group's Q·Kᵀ did not reach (past nt, up to the quad) set to 0 (P is 0 there)
                const int nq = (nj + 3) / 4;
                if (dd_in_kd)
                    for (int jj = flipped; jj < 4 * nq; ++jj) std::fill(kd + jj * nb, kd + (jj + 1) * nb, 0.0f);
                if (nq > prepped) {
                    prep_v_q80(Vtile, ldv, nt_all, Dv, prepped, nq, 4 * nqcap, dd_in_kd ? nullptr : dd,
                               G > 1 ? vk : nullptr, 0, G > 1 ? -1 : 0);
                    prepped = nq;
                }
                if (nj > 0)
                    pv_rows16_q80(St, nq, dd_in_kd ? kd : dd, dd_in_kd ? nb : nbv, vk, nqcap, Dv,
                                  _mm512_load_ps(corr), OTa + static_cast<size_t>(g) * Dv * 16, sc,
                                  G > 1 ? nullptr : Vtile, ldv, nt_all);
                continue;
            }
            // LATTE_PV=bf16: P transposed to rows, O += P V in bf16 pairs per 32-column block (P·d_jb)
            for (int jb = 0; jb < kTile / 16; ++jb) {
                __m512 t[16];
                for (int x = 0; x < 16; ++x) t[x] = _mm512_load_ps(St + 16 * (16 * jb + x));
                transpose16(t);
                for (int x = 0; x < 16; ++x) _mm512_store_ps(S + x * kTile + 16 * jb, t[x]);
            }
            const int np = (nj + 1) / 2;
            float* Op[16];
            for (int r = 0; r < gr.mb; ++r) Op[r] = O + (gr.r0 + r) * ldo;
            for (int c0 = 0; c0 < Dv; c0 += 32) {
                pack_v_bf16(Vtile, ldv, GGMLType::Q8_0, nt, c0, vp, vd);
                p_to_bf16(S, gr.mb, vd, pb);
                pv_bf16<kRB>(pb, np, vp, c0, corr, Op);
                pv_bf16_dispatch<kRB>(gr.mb - kRB, pb + kRB * kTile, np, vp, c0, corr + kRB, Op + kRB);
            }
        }
    }
    for (int g = 0; g < G; ++g) {
        const Group16& gr = grp[g];
        float* Og = O + gr.r0 * ldo;
        if (pv_i8) {  // O^T (columns × 16 rows) back to the rows
            const float* OT = OTa + static_cast<size_t>(g) * Dv * 16;
            for (int c0 = 0; c0 < Dv; c0 += 16) {
                __m512 t[16];
                for (int x = 0; x < 16; ++x) t[x] = _mm512_load_ps(OT + 16 * (c0 + x));
                transpose16(t);
                for (int r = 0; r < gr.mb; ++r) _mm512_storeu_ps(Og + r * ldo + c0, t[r]);
            }
        }
        _mm512_store_ps(mrow, gr.mv);
        _mm512_store_ps(lrow, gr.lv);
        for (int r = 0; r < gr.mb; ++r) {
            if (m_out) {
                m_out[gr.r0 + r] = mrow[r];
                l_out[gr.r0 + r] = lrow[r];
                continue;
            }
            float* o = Og + r * ldo;
            const __m512 inv = _mm512_set1_ps(lrow[r] > 0.0f ? 1.0f / lrow[r] : 0.0f);
            for (int d = 0; d < Dv; d += 16) _mm512_storeu_ps(o + d, _mm512_mul_ps(inv, _mm512_loadu_ps(o + d)));
        }
    }
}

// LATTE_PV=bf16 keeps q8_KV V (and q8_0 V in the 16-row path) on the bf16 P·V path, to compare the
// two. Read on every call (a getenv per call, not per tile), so a test can cover both in one process.
bool pv_force_bf16() {
    const char* e = std::getenv("LATTE_PV");
    return e && std::strcmp(e, "bf16") == 0;
}

// LATTE_ROWS16=0 turns the 16-row paths (q8_KV and q8_0) off, to compare. Read on every call that
// could take one (a getenv per superblock, not per tile), so a test can cover both in one process.
bool rows16_off() {
    const char* e = std::getenv("LATTE_ROWS16");
    return e && std::strcmp(e, "0") == 0;
}

// pre: the call's query rows already quantised (attn_flash_part_q; used where kt is q8), or null.
void flash(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* Kv, size_t ldk, GGMLType kt,
           const void* Vv, size_t ldv, GGMLType vt, const int* kv_len, float scale, float* O, int64_t ldo,
           float* m_out, float* l_out, const QuantQuery* pre = nullptr) {
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
    // bf16 K: Q·Kᵀ by vdpbf16ps with the query rounded to bf16 (the cache's own precision; as the
    // amx level's bf16 tiles), K packed as bf16 pairs; LATTE_BF16DOT=0 keeps the f32 FMA path
    const bool k_bf16 = kt == GGMLType::BF16 && Dk % 32 == 0 && [] {
        const char* e = std::getenv("LATTE_BF16DOT");
        return !(e && *e == '0');
    }();
    float* kpf = kq8 ? nullptr : sc.kp.get<float>(static_cast<size_t>(Dk) * kTile);
    auto* kpb = reinterpret_cast<uint32_t*>(kpf);  // k_bf16: the same buffer (half of it) as pairs
    uint32_t* qbf = k_bf16 ? sc.qbf.get<uint32_t>(static_cast<size_t>(kRowsSB) * Dk / 2) : nullptr;
    uint8_t* kpq = kq8 ? sc.kp.get<uint8_t>(static_cast<size_t>(Dk) * kTile) : nullptr;
    float* ks = sc.ks.get<float>(static_cast<size_t>(nb + 1) * kTile);
    float* vb = sc.vb.get<float>(static_cast<size_t>(kTile) * 64);
    // float V: 64-column P·V passes unless LATTE_PV64=0 (read only for float V: a getenv per call)
    const bool vfloat = vt == GGMLType::F32 || vt == GGMLType::F16 || vt == GGMLType::BF16;
    const bool pv64_on = vfloat && [] {
        const char* e = std::getenv("LATTE_PV64");
        return !(e && *e == '0');
    }();
    // q8 V: P·V in bf16 pairs (vb then holds the packed chunk, pb the bf16 P, vd the V scales)
    const bool v_bf16 = vt == GGMLType::Q8_0 || vt == GGMLType::Q8_KV;
    uint16_t* pb = v_bf16 ? sc.pb.get<uint16_t>(static_cast<size_t>(kRowsSB) * kTile) : nullptr;
    float* vd = v_bf16 ? sc.vd.get<float>(kTile) : nullptr;
    // q8_KV V with Dv % 64 == 0: P·V in int8 instead (P quantised to u8 per row and tile; pb holds it)
    const bool v_i8 = vt == GGMLType::Q8_KV && Dv % 64 == 0 && !pv_force_bf16();
    float* ps = v_i8 ? sc.ps.get<float>(kRowsSB) : nullptr;
    int8_t* qq = kq8 ? sc.qq.get<int8_t>(static_cast<size_t>(kRowsSB) * Dk) : nullptr;
    float* qd = kq8 ? sc.qd.get<float>(static_cast<size_t>(kRowsSB) * qblocks) : nullptr;
    int32_t* qs = kq8 ? sc.qs.get<int32_t>(static_cast<size_t>(kRowsSB) * qblocks) : nullptr;
    float* S = sc.s.get<float>(static_cast<size_t>(kRowsSB) * kTile);  // scores, then P, of the superblock
    float* st = sc.st.get<float>(3 * kRowsSB);  // m, l, corr
    float *mrow = st, *lrow = st + kRowsSB, *corr = st + 2 * kRowsSB;

    for (int r0 = 0; r0 < M; r0 += kRowsSB) {
        const int mb = std::min(kRowsSB, M - r0);
        if (k_bf16)  // the superblock's query rows as bf16 pairs, once for all its tiles
            for (int i = 0; i < mb; ++i) {
                const float* q = Q + (r0 + i) * ldq;
                for (int k = 0; k < Dk; k += 32)
                    _mm512_storeu_si512(qbf + static_cast<size_t>(i) * (Dk / 2) + k / 2,
                                        (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(q + k + 16), _mm512_loadu_ps(q + k)));
            }
        int nmax = 0;
        for (int i = 0; i < mb; ++i) nmax = std::max(nmax, std::min(kv_len[r0 + i], N));
        // the superblock's quantised query: the call's own (pre) or quantised here
        const int8_t* qqv = qq;
        const float* qdv = qd;
        const int32_t* qsv = qs;
        if (kq8 && pre) {
            qqv = pre->q + static_cast<size_t>(r0) * Dk;
            qdv = pre->d + static_cast<size_t>(r0) * qblocks;
            qsv = pre->s + static_cast<size_t>(r0) * qblocks;
        } else if (kq8) {
            for (int i = 0; i < mb; ++i)
                quantize_q(kt, Q + (r0 + i) * ldq, Dk, scale, qq + static_cast<size_t>(i) * Dk, qd + i * qblocks,
                           qs + i * qblocks);
        }
        // the 16-row paths in groups of 16 rows where every group has more than 8 (the header)
        const bool r16 = mb > 8 && (mb % 16 == 0 || mb % 16 > 8);
        if (v_i8 && kt == GGMLType::Q8_KV && r16 && !rows16_off()) {
            flash_rows16_q8kv(mb, N, Dk, Dv, qqv, qdv, K, ldk, V, ldv, kv_len + r0, O + r0 * ldo, ldo,
                              m_out ? m_out + r0 : nullptr, m_out ? l_out + r0 : nullptr, sc);
            continue;
        }
        if (kt == GGMLType::Q8_0 && vt == GGMLType::Q8_0 && r16 && !rows16_off()) {
            flash_rows16_q80(mb, N, Dk, Dv, qqv, qdv, qsv, K, ldk, V, ldv, kv_len + r0, O + r0 * ldo, ldo,
                             m_out ? m_out + r0 : nullptr, m_out ? l_out + r0 : nullptr, sc);
            continue;
        }
        // the general path: O accumulates from zero (the 16-row paths above write their own O; the
        // zero-fill here was 5.5% of TG 128 heads @ 8K's samples once they took those shapes)
        for (int i = 0; i < mb; ++i) {
            mrow[i] = kNegInf;
            lrow[i] = 0.0f;
            std::memset(O + (r0 + i) * ldo, 0, static_cast<size_t>(Dv) * sizeof(float));
        }
        for (int j0 = 0; j0 < nmax; j0 += kTile) {
            const int nt = std::min(kTile, nmax - j0);
            const uint8_t* Kt = K + static_cast<size_t>(j0) * ldk;
            if (kq8) pack_k_q8(Kt, ldk, kt, nt, Dk, kpq, ks);
            else if (k_bf16) pack_k_bf16(Kt, ldk, nt, Dk, kpb);
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
                            qp[x] = qqv + static_cast<size_t>(i) * Dk;
                            qdp[x] = qdv + i * qblocks;
                            qsp[x] = qsv + i * qblocks;
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
                        // the f32 query rows, or their bf16 pairs (k_bf16)
                        const void* qp[4];
                        int vmax = 0;  // the 16-column vectors these rows see (the softmax masks the rest)
                        for (int x = 0; x < rr; ++x) {
                            const int i = i0 + r + x;
                            qp[x] = k_bf16 ? static_cast<const void*>(qbf + static_cast<size_t>(i) * (Dk / 2))
                                           : static_cast<const void*>(Q + (r0 + i) * ldq);
                            vmax = std::max(vmax, vis[r + x]);
                        }
                        const int nc = (vmax + 15) / 16;
                        if (nc == 0) continue;
                        if (k_bf16) qk_float_block<true>(rr, nc, qp, Dk, kpb, scale, Sr);
                        else qk_float_block<false>(rr, nc, qp, Dk, kpf, scale, Sr);
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
                        // (masked: the f32 scores past the rows' visible vectors are not written)
                        sv[c] = _mm512_maskz_load_ps(mk[c], Sr + 16 * c);
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
            if (v_i8) {
                auto* vp = reinterpret_cast<__m512i*>(vb);
                auto* pq = reinterpret_cast<uint8_t*>(pb);
                for (int j = 0; j < kTile; ++j) {
                    float d = 0.0f;
                    if (j < nt) std::memcpy(&d, Vtile + static_cast<size_t>(j) * ldv, sizeof d);
                    vd[j] = d;
                }
                for (int i0 = 0; i0 < mb; i0 += kRB)
                    if (nj_blk[i0 / kRB] > 0)
                        p_to_u8(S + i0 * kTile, std::min(kRB, mb - i0), vd, pq + i0 * kTile, ps + i0);
                for (int c0 = 0; c0 < Dv; c0 += 64) {
                    pack_v_i8(Vtile, ldv, nt, c0, vp);
                    for (int i0 = 0; i0 < mb; i0 += kRB) {
                        const int nj = nj_blk[i0 / kRB];
                        if (nj == 0) continue;
                        const int rb = std::min(kRB, mb - i0), nq = (nj + 3) / 4;
                        for (int r = 0; r < rb; r += 4) {
                            float* Op[4];
                            const int rr = std::min(4, rb - r), i = i0 + r;
                            for (int x = 0; x < rr; ++x) Op[x] = O + (r0 + i + x) * ldo;
                            const uint8_t* P = pq + i * kTile;
                            switch (rr) {
                                case 4: pv_i8<4>(P, kTile, 4, ps + i, nq, vp, c0, corr + i, Op); break;
                                case 3: pv_i8<3>(P, kTile, 4, ps + i, nq, vp, c0, corr + i, Op); break;
                                case 2: pv_i8<2>(P, kTile, 4, ps + i, nq, vp, c0, corr + i, Op); break;
                                default: pv_i8<1>(P, kTile, 4, ps + i, nq, vp, c0, corr + i, Op); break;
                            }
                        }
                    }
                }
            } else if (v_bf16) {
                auto* vp = reinterpret_cast<__m512i*>(vb);
                for (int c0 = 0; c0 < Dv; c0 += 32) {
                    pack_v_bf16(Vtile, ldv, vt, nt, c0, vp, vd);
                    // P·d in bf16: q8_KV once per tile (d per row), q8_0 per chunk (d per block)
                    if (c0 == 0 || vt == GGMLType::Q8_0)
                        for (int i0 = 0; i0 < mb; i0 += kRB)
                            if (nj_blk[i0 / kRB] > 0)
                                p_to_bf16(S + i0 * kTile, std::min(kRB, mb - i0), vd, pb + i0 * kTile);
                    for (int i0 = 0; i0 < mb; i0 += kRB) {
                        if (nj_blk[i0 / kRB] == 0) continue;
                        const int rb = std::min(kRB, mb - i0);
                        float* Op[kRB];
                        for (int r = 0; r < rb; ++r) Op[r] = O + (r0 + i0 + r) * ldo;
                        pv_bf16_dispatch<kRB>(rb, pb + i0 * kTile, (nj_blk[i0 / kRB] + 1) / 2, vp, c0, corr + i0, Op);
                    }
                }
            }
            // f32 P·V: 64-column chunks (4 rows × 64 columns per pass) where Dv allows, else 32
            const int cw = Dv % 64 == 0 && pv64_on ? 64 : 32;
            for (int c0 = 0; c0 < Dv && !v_bf16; c0 += cw) {
                const float* Vc;
                size_t ldvf;
                if (vt == GGMLType::F32) {
                    Vc = reinterpret_cast<const float*>(Vtile) + c0;
                    ldvf = ldv / sizeof(float);
                } else {
                    for (int h = 0; h < cw; h += 32) convert_v_chunk(Vtile, ldv, vt, nt, c0 + h, vb + h, cw);
                    Vc = vb;
                    ldvf = static_cast<size_t>(cw);
                }
                for (int i0 = 0; i0 < mb; i0 += kRB) {
                    if (nj_blk[i0 / kRB] == 0) continue;
                    const int rb = std::min(kRB, mb - i0);
                    float* Op[kRB];
                    for (int r = 0; r < rb; ++r) Op[r] = O + (r0 + i0 + r) * ldo;
                    if (cw == 32) {
                        pv_dispatch<kRB>(rb, S + i0 * kTile, nj_blk[i0 / kRB], Vc, ldvf, c0, corr + i0, Op);
                        continue;
                    }
                    for (int r = 0; r < rb; r += 4) {
                        const float* Pr = S + (i0 + r) * kTile;
                        const int nj = nj_blk[i0 / kRB];
                        switch (std::min(4, rb - r)) {
                            case 4: pv64<4>(Pr, nj, Vc, ldvf, c0, corr + i0 + r, Op + r); break;
                            case 3: pv64<3>(Pr, nj, Vc, ldvf, c0, corr + i0 + r, Op + r); break;
                            case 2: pv64<2>(Pr, nj, Vc, ldvf, c0, corr + i0 + r, Op + r); break;
                            default: pv64<1>(Pr, nj, Vc, ldvf, c0, corr + i0 + r, Op + r); break;
                        }
                    }
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

bool attn_quant_q(GGMLType kt, GGMLType vt, int Dk, int Dv, int M, const float* Q, int64_t ldq, float scale, int8_t* q,
                  float* d, int32_t* s) {
    // flash()'s int8 query: a q8 K with Dk % 64 == 0 and a V it runs (else it hands the call to scalar)
    const bool vok = vt == GGMLType::F32 || vt == GGMLType::F16 || vt == GGMLType::BF16 || vt == GGMLType::Q8_0 ||
                     vt == GGMLType::Q8_KV;
    if (!(kt == GGMLType::Q8_0 || kt == GGMLType::Q8_KV) || !vok || Dk % 64 != 0 || Dv % 32 != 0 || M <= 0)
        return false;
    const int blocks = kt == GGMLType::Q8_KV ? 1 : Dk / 32;
    for (int r = 0; r < M; ++r)
        quantize_q(kt, Q + r * ldq, Dk, scale, q + static_cast<size_t>(r) * Dk, d + static_cast<size_t>(r) * blocks,
                   s + static_cast<size_t>(r) * blocks);
    return true;
}

void attn_flash_part_q(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                       GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale, float* O,
                       int64_t ldo, float* m_out, float* l_out, const QuantQuery& qq) {
    flash(M, N, Dk, Dv, Q, ldq, K, ldk, kt, V, ldv, vt, kv_len, scale, O, ldo, m_out, l_out, &qq);
}

// "-fa off" on this level is the flash kernel: the same softmax, without materialising the score
// row (exact up to float rounding; the two-pass scalar kernel stays the reference).
void attn_plain(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk, GGMLType kt,
                const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale, float* O, int64_t ldo) {
    flash(M, N, Dk, Dv, Q, ldq, K, ldk, kt, V, ldv, vt, kv_len, scale, O, ldo, nullptr, nullptr);
}

// The merge of the TG split, one row: 128 columns (8 accumulators) at a time over all chunks, so
// O is written once and each chunk's partial is read as 512 contiguous bytes per pass.
void attn_combine(int chunks, int Dv, const float* w, const float* part, size_t stride, float* o) {
    for (int d0 = 0; d0 < Dv; d0 += 128) {
        const int n = std::min(128, Dv - d0);
        __m512 acc[8];
        __mmask16 mk[8];
        for (int k = 0; k < 8; ++k) {
            acc[k] = _mm512_setzero_ps();
            const int left = std::clamp(n - 16 * k, 0, 16);
            mk[k] = static_cast<__mmask16>((1u << left) - 1u);
        }
        for (int c = 0; c < chunks; ++c) {
            if (w[c] == 0.0f) continue;
            const __m512 wv = _mm512_set1_ps(w[c]);
            const float* p = part + static_cast<size_t>(c) * stride + d0;
            if (n == 128) {
                for (int k = 0; k < 8; ++k) acc[k] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(p + 16 * k), acc[k]);
            } else {
                for (int k = 0; k < 8; ++k)
                    acc[k] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(mk[k], p + 16 * k), acc[k]);
            }
        }
        for (int k = 0; k < 8; ++k) _mm512_mask_storeu_ps(o + d0 + 16 * k, mk[k], acc[k]);
    }
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

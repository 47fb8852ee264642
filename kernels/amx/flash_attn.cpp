// AMX attention kernels (AMX-TILE + AMX-INT8 + AMX-BF16 on top of the avx512 level; compiled with
// the avx512 flags plus -mamx-tile/-mamx-int8/-mamx-bf16). Two kernels: int8 tiles for q8_KV K and
// V (this first part), bf16 tiles for bf16, q8_0 and f16 caches (namespace bf16t below); V may be the
// prefix view of the K rows (-mla 1's MQA); Dk and Dv multiples of 64 ((576, 512) and (192, 128);
// bf16t: Dk % 32). Every other type or shape goes to the avx512 kernels, so the amx level is the
// avx512 level plus these.
//
// Layout of the int8 kernel's work, per call:
//   - the query rows are quantised to int8 (one scale per row, as the avx512 q8_KV path) and taken
//     in blocks of 16 (padded with zero rows); up to 8 blocks form a superblock that shares the V
//     tile packed once;
//   - KV in tiles of kT = 512 rows (one online-softmax step), 8 sub-tiles of 64;
//   - Sᵀ = K · Qᵀ with tdpbssd (s8 × s8, no u8 offset or row-sum correction): the A operand is
//     16 K rows × 64 bytes loaded in place from the cache (tileloadd with the cache's row stride —
//     no K repacking) when the call has one query block; with more, the tile's K values are first
//     copied once to 64-byte aligned rows that all blocks load (no line-straddling tile rows); the
//     B operand Qᵀ in the VNNI layout (built once per call: a 16×16 transpose of 32-bit lanes per
//     64 dims). Four C tiles = 64 KV rows × 16 query rows per pass;
//     each pass runs Dk/64 steps. Sᵀ's rows are KV rows and its lanes the 16 query rows, so the
//     online softmax is avx512's rows-as-lanes step (softmax_tile16's, fused with the ×d_j pass
//     in to_p, in log2 units) on whole vectors;
//   - P·d_j (d_j the V row's scale) is quantised to u8 per query row and tile (scale max/255, as
//     the avx512 int8 P·V), packed to bytes per quad of KV rows (vpackusdw/vpackuswb, a 4×4 byte
//     transpose per 128-bit lane) and transposed to rows (one 16×16 dword transpose per 64 KV rows)
//     into A tiles of 16 query rows × 64 KV bytes;
//   - O += P V with tdpbusd (u8 P × s8 V): V's B operand needs quads of KV rows interleaved per
//     32-bit lane; the tile's V rows are packed so once per superblock (of 4 rows, 8 shuffles per
//     64 columns: byte permutes pair the rows and join the pairs, pack_quad), in column order:
//     lane n of quarter kk holds column 16·kk + n. (Until 2026-12-07 unpacks within 128-bit lanes,
//     as many shuffles, permuted the columns inside each 64-column block, and O was put back in
//     order by a 4×4 transpose of 128-bit lanes per row and 64 columns as it was written out; the
//     device found the two the same speed, docs/PERFORMANCE.md session 22.) C tiles (16 rows × 16 columns,
//     int32, summed over the tile's 4 sub-tiles) are scaled into the f32 O (O·corr + ps·C) once per
//     tile; the last tile's update also applies the rows' 1/l (LATTE_AMX_FUSEO=0: a pass of its own).
//   - MQA with the K copy on (2+ query blocks): the K copy and the V pack are one pass over the
//     tile's rows (copy_k_pack_v; LATTE_AMX_FUSEKV=0: two). A TG split hands each chunk's call the
//     query quantised and its Qᵀ tiles packed once (attn_quant_q, attn_pack_q).
//   - the query blocks that see a tile are taken in pairs (qk_pair, pv_pair: C tiles for 2 K groups
//     × 2 blocks, resp. 2 V quarters × 2 blocks; each K or V tile load feeds two products, so the
//     tile's K and V stream from L2 half as often), an odd last block alone. Device, 16 threads,
//     medians of 3 rounds alternated: PP 16 heads @ 4K 10.1 -> 9.4 ms, TG 128 heads @ 8K 0.469 ->
//     0.434 ms; 2 threads TG 128 2.11 -> 1.82 ms, PP within the noise (56 / 60 ms). The K copy
//     below still pays with pairs (16 threads, in place: 10.1 / 0.463 ms). LATTE_AMX_PAIR=0 and
//     LATTE_AMX_KCOPY=0|1 switch both for measuring (the same bits either way, tested).
//   - per tile and block pair each phase runs whole: Sᵀ tiles, softmax/P (vector), P·V tiles, O
//     update (vector). Tried and removed (device, interleaved A/B runs, docs/PERFORMANCE.md sessions
//     11-12): the tile steps paced between the vector pieces (slower: TG 128 heads @ 8K 1.73 vs
//     1.87x avx512 at 2 threads, PP 16 heads @ 4K 2.24 vs 2.42x at 16), loading a pair step's
//     operands during the step before, a tile-major K copy, 16-block superblocks, the O update per
//     column block right after its P·V (none faster). Session 22 (device, 2 and 16 threads, and the
//     per-phase ticks at 1 thread) also removed: four query blocks per K or V tile load (half the
//     L2 operand traffic of the pairs: TG 128 heads slower, PP faster at 2 threads and slower at
//     16), prefetching the next chunk's K groups or V quarters into L1 (0.96-0.98x), non-temporal
//     stores of write-once O rows and 16-block superblocks (both within the noise). On real tiles
//     at 1 thread (TG 128 heads @ 8K, a quiet host) the Sᵀ and P·V tile loops take 49% of a chunk
//     call (32 ticks of the 2.0 GHz TSC per product; 16 cycles is the tile unit's rate) and the
//     vector phases 51%: with free tiles the kernel would be 3.9x avx512, and 3x asks the tiles
//     for their peak rate (docs/PERFORMANCE.md, session 22).
//   Tile registers, one block: Q·Kᵀ uses tmm0-3 (C: 4 groups of 16 KV rows), tmm4 (Qᵀ), tmm5-7 (K, rotating);
//   P·V tmm0-3 (C: the 4 quarters of a 64-column block), tmm4 (P of one sub-tile), tmm5-7 (V,
//   rotating): four independent accumulation chains in both. The tile configuration (all 8 tiles 16 rows × 64 bytes) is loaded at
//   the start of every call and released at its end (no AMX state is left on the thread between
//   calls); the OS permission (arch_prctl ARCH_REQ_XCOMP_PERM) is requested once by the dispatch.
// Rounding: Q·Kᵀ is exact int8 (the avx512 q8_KV path's query quantisation); the P rounding is
// the avx512 int8 P·V's, over 512-row tiles instead of 64 (tests/test_kernels.cpp states both).
// kT = 512 because the per-tile costs (the f32 O update from the C tiles: 6 vector ops per 16
// columns of a row, and the softmax bookkeeping) are then paid once per 512 KV rows. It was 256
// until 2026-12-06; a perf profile of TG 128 heads @ 8K on Sapphire Rapids (2 threads) put the O
// update at 20% of the kernel. Against 256, alternated 3x: TG 128 heads @ 8K 1.12-1.16 vs 1.23-1.26
// ms, PP 16 heads @ 4K 26.8-27.5 vs 30.5-31.3 ms, TG 16 heads @ 8K 0.25-0.27 vs 0.28 ms. 1024
// was slower for PP (29-35 ms: kbuf + vp past L2). The u8 P rounding is coarser by a little (the
// P·V rounding test: 1.38e-2 of max |O|, 1.18-1.29e-2 with 256; tolerance 1.5e-2).
#include "kernels/amx/flash_attn.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

// (The pragma: GCC 12's false -Wuninitialized inside its own avx512fintrin.h (_mm512_undefined_*)
// where common.h's softmax step is compiled out of line, as in kernels/avx512/: not our code.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/avx512/common.h"
#pragma GCC diagnostic pop
#include "kernels/avx512/flash_attn.h"
#include "kernels/amx/tile.h"

// With LATTE_AMX_EMULATE (tests/test_amx_attn_emulated.cpp) the tile operations run on
// kernels/amx/tile.h's scalar model and the kernels land in namespace amx_emu, so their layouts are
// tested on AVX-512 CPUs without AMX (the CI machine among them).

// Phase marks for tools/amx_phases.cpp (which defines LATTE_AMX_PHASE before including this file):
// LATTE_AMX_PHASE(p) ends phase p of the int8 kernel's run() at this point (the time since the
// previous mark is p's); -1 starts a call. Nothing in the library's build.
#if !defined(LATTE_AMX_PHASE)
#define LATTE_AMX_PHASE(p) ((void)0)
#endif

namespace latte::kernels::LATTE_AMX_NS {
namespace {

using namespace simd512;

constexpr int kT = 512;    // KV rows per tile (softmax step)
constexpr int kSub = 64;   // KV rows per P sub-tile (one A tile of 16 rows × 64 u8)
constexpr int kQB = 16;    // query rows per AMX block
constexpr int kSBmax = 8;  // query blocks per superblock (sharing one packed V tile)
constexpr size_t kHdr = sizeof(RowQ8KVHeader);
// Bytes from one quarter of a packed 64-column V block (pack_v) to the next: its (kT / 4) · 64 bytes
// and one 64-byte line of padding. Unpadded, the 32 stores per row quad that pack_v makes for
// Dv = 512 (8 blocks × 4 quarters) were 4 KiB apart: one L1 set (12 ways) for 32 lines, every
// store a conflict miss. Zen 5 dev box, the kernel with its tile operations made no-ops (a
// profiling build, docs/PERFORMANCE.md), 128 query rows over 4K: pack_v 4.8-6.0K -> 2.1-2.6K TSC
// ticks per (query block, tile).
constexpr size_t kVQ = (kT / 4) * 64 + 64;

// One 16-row group of K rows for the A operand: where it starts and its row stride.
struct KGroup {
    const uint8_t* p = nullptr;  // the group's first row's int8 values (null: no visible row)
    size_t ld = 0;
};

// The four C tiles (tmm0-3; int32 or f32): zeroed, and stored as 16 rows × 16 lanes each.
inline void zero_c4() {
    LATTE_TILE_ZERO(0);
    LATTE_TILE_ZERO(1);
    LATTE_TILE_ZERO(2);
    LATTE_TILE_ZERO(3);
}
inline void store_c4(void* c0, void* c1, void* c2, void* c3) {
    LATTE_TILE_STORE(0, c0, 64);
    LATTE_TILE_STORE(1, c1, 64);
    LATTE_TILE_STORE(2, c2, 64);
    LATTE_TILE_STORE(3, c3, 64);
}

// The tile products below are written as steps (one step: up to four tile products and their
// loads over 64 dims or one 64-row sub-tile), run in chunks (run_chunk: C zeroed, the steps, C
// stored).

// Sᵀ for KV rows [64s, 64s + 64) of the tile and one query block, 64 dims (step c): the four groups
// kg[0..3] into tmm0-3 (groups without a visible row are skipped: their C stays zero). The K
// groups rotate over tmm5-7 so that a load does not wait for the product that read the same
// register just before.
inline void qk_sub_step(const KGroup* kg, int c, const uint8_t* bq) {
    LATTE_TILE_LOAD(4, bq + c * 1024, 64);
    // group g into C tile g through K register kt (tile registers are immediates: no loop)
#define LATTE_QK_GROUP(g, kt)                                 \
    if (kg[g].p) {                                            \
        LATTE_TILE_LOAD(kt, kg[g].p + 64 * c, kg[g].ld);      \
        LATTE_TDPBSSD(g, kt, 4);                              \
    }
    LATTE_QK_GROUP(0, 5)
    LATTE_QK_GROUP(1, 6)
    LATTE_QK_GROUP(2, 7)
    LATTE_QK_GROUP(3, 5)
#undef LATTE_QK_GROUP
}

// Sᵀ for two 16-row K groups (32 KV rows) and two query blocks, 64 dims (step c): C tiles tmm0 =
// (g0, b0), tmm1 = (g1, b0), tmm2 = (g0, b1), tmm3 = (g1, b1); A = the K groups (tmm4, tmm5), B =
// the blocks' Qᵀ (tmm6, tmm7). Each loaded tile feeds two products, so a query block pair reads the
// tile's K once where two single blocks read it twice (the K tile streams from L2: 295 KiB per 512
// rows of (576, 512)). kg1.p may be null (the tile's tail): its C tiles stay zero.
inline void qk_pair_step(const KGroup& kg0, const KGroup& kg1, int c, const uint8_t* bq0, const uint8_t* bq1) {
    LATTE_TILE_LOAD(4, kg0.p + 64 * c, kg0.ld);
    LATTE_TILE_LOAD(6, bq0 + c * 1024, 64);
    LATTE_TDPBSSD(0, 4, 6);
    if (kg1.p) {
        LATTE_TILE_LOAD(5, kg1.p + 64 * c, kg1.ld);
        LATTE_TDPBSSD(1, 5, 6);
    }
    LATTE_TILE_LOAD(7, bq1 + c * 1024, 64);
    LATTE_TDPBSSD(2, 4, 7);
    if (kg1.p) LATTE_TDPBSSD(3, 5, 7);
}

// P·V for one 64-column block and one query block, sub-tile s: C_kk (tmm0-3, kk the quarter) +=
// P_s · V(cb, kk, s); P_s in tmm4 (1 KiB from L1), V rotating over tmm5-7: four independent
// accumulation chains.
inline void pv_block_step(int s, const uint8_t* pa, const uint8_t* vb) {
    constexpr size_t q = kVQ;
    const uint8_t* v = vb + s * 1024;
    LATTE_TILE_LOAD(4, pa + s * 1024, 64);
    LATTE_TILE_LOAD(5, v, 64);
    LATTE_TDPBUSD(0, 4, 5);
    LATTE_TILE_LOAD(6, v + q, 64);
    LATTE_TDPBUSD(1, 4, 6);
    LATTE_TILE_LOAD(7, v + 2 * q, 64);
    LATTE_TDPBUSD(2, 4, 7);
    LATTE_TILE_LOAD(5, v + 3 * q, 64);
    LATTE_TDPBUSD(3, 4, 5);
}

// Two quarters (kk, kk + 1) of a 64-column block for two query blocks, sub-tile s: C tiles tmm0 =
// (kk, b0), tmm1 = (kk + 1, b0), tmm2 = (kk, b1), tmm3 = (kk + 1, b1); A = the blocks' P sub-tiles
// (tmm4, tmm5), B = the two V quarters (tmm6, tmm7): each V tile load feeds both blocks (vb points
// at quarter kk).
inline void pv_pair_step(int s, const uint8_t* pa0, const uint8_t* pa1, const uint8_t* vb) {
    constexpr size_t q = kVQ;
    const uint8_t* v = vb + s * 1024;
    LATTE_TILE_LOAD(4, pa0 + s * 1024, 64);
    LATTE_TILE_LOAD(6, v, 64);
    LATTE_TDPBUSD(0, 4, 6);
    LATTE_TILE_LOAD(7, v + q, 64);
    LATTE_TDPBUSD(1, 4, 7);
    LATTE_TILE_LOAD(5, pa1 + s * 1024, 64);
    LATTE_TDPBUSD(2, 5, 6);
    LATTE_TDPBUSD(3, 5, 7);
}

// One chunk of tile work: C tiles zeroed, n steps, C tiles stored (int32, 16 rows × 16 lanes each,
// tile i at c[i]).
//   QK1: Sᵀ of one query block over a 64-row sub-tile (kg: its 4 groups; a[0]: Qᵀ);
//   QK2: Sᵀ of two blocks over two groups (kg[0..1]; a[0..1]: Qᵀ);
//   PV1: one block's P·V for a 64-column block (a[0]: P; v: the packed block);
//   PV2: two blocks, two quarters (a[0..1]: P; v: quarter kk).
struct Chunk {
    enum Kind : uint8_t { QK1, QK2, PV1, PV2 } kind;
    int n;
    const KGroup* kg;
    const uint8_t* a[2];
    const uint8_t* v;
    int32_t* c[4];
};

// Runs one chunk: its C tiles zeroed, its n steps, its C tiles stored.
inline void run_chunk(const Chunk& c) {
    zero_c4();
    for (int s = 0; s < c.n; ++s) {
        switch (c.kind) {
            case Chunk::QK1: qk_sub_step(c.kg, s, c.a[0]); break;
            case Chunk::QK2: qk_pair_step(c.kg[0], c.kg[1], s, c.a[0], c.a[1]); break;
            case Chunk::PV1: pv_block_step(s, c.a[0], c.v); break;
            case Chunk::PV2: pv_pair_step(s, c.a[0], c.a[1], c.v); break;
        }
    }
    store_c4(c.c[0], c.c[1], c.c[2], c.c[3]);
}

// Four KV rows' 64 bytes (one 64-column block) as the four quarters of the tdpbusd B layout with the
// columns in order: 32-bit lane n of quarter kk holds the 4 rows' bytes of column 16·kk + n. Two
// byte permutes (vpermt2b) pair rows 0, 1 and rows 2, 3 per column for 32 columns each, four more
// join the pairs (as word moves: bytes 2W, 2W + 1 of the two sources): 8 shuffles, as many as the
// unpacks of the permuted layout below, and O then needs no 4×4 lane transpose per row and 64
// columns at its update or write-out. (vpermt2b, not vpermt2w, for the joins: the published
// instruction tables give Intel's cores since Ice Lake one port-5 µop for the byte form and
// several for the word form; not measured here, neutral on Zen 5.)
struct NatIdx {
    alignas(64) uint8_t b[2][64];  // [half]: bytes 2c, 2c + 1 = row a, row b of column 32·half + c
    alignas(64) uint8_t w[2][64];  // [kk % 2]: words 2n, 2n + 1 = the pairs (0,1), (2,3) of column 16·(kk % 2) + n
    constexpr NatIdx() : b{}, w{} {
        for (int h = 0; h < 2; ++h)
            for (int c = 0; c < 32; ++c) {
                b[h][2 * c] = static_cast<uint8_t>(32 * h + c);
                b[h][2 * c + 1] = static_cast<uint8_t>(64 + 32 * h + c);
            }
        for (int p = 0; p < 2; ++p)
            for (int n = 0; n < 16; ++n) {
                const int wa = 16 * p + n, wb = 32 + 16 * p + n;  // source words: of a (0..31), of b (32..63)
                w[p][4 * n] = static_cast<uint8_t>(2 * wa);
                w[p][4 * n + 1] = static_cast<uint8_t>(2 * wa + 1);
                w[p][4 * n + 2] = static_cast<uint8_t>(2 * wb);
                w[p][4 * n + 3] = static_cast<uint8_t>(2 * wb + 1);
            }
    }
};
constexpr NatIdx kNatIdx;
inline void pack_quad(const __m512i r[4], uint8_t* dst, size_t qstride) {
    const __m512i b0 = _mm512_load_si512(kNatIdx.b[0]), b1 = _mm512_load_si512(kNatIdx.b[1]);
    const __m512i w0 = _mm512_load_si512(kNatIdx.w[0]), w1 = _mm512_load_si512(kNatIdx.w[1]);
    const __m512i alo = _mm512_permutex2var_epi8(r[0], b0, r[1]), ahi = _mm512_permutex2var_epi8(r[0], b1, r[1]);
    const __m512i blo = _mm512_permutex2var_epi8(r[2], b0, r[3]), bhi = _mm512_permutex2var_epi8(r[2], b1, r[3]);
    _mm512_store_si512(dst + 0 * qstride, _mm512_permutex2var_epi8(alo, w0, blo));
    _mm512_store_si512(dst + 1 * qstride, _mm512_permutex2var_epi8(alo, w1, blo));
    _mm512_store_si512(dst + 2 * qstride, _mm512_permutex2var_epi8(ahi, w0, bhi));
    _mm512_store_si512(dst + 3 * qstride, _mm512_permutex2var_epi8(ahi, w1, bhi));
}
// Packs V rows [0, nt) of a tile (q8_KV rows, int8 values after the header) as tdpbusd B tiles:
// vp[cb][kk][g][64], g the quad of rows 4g..4g+3, 32-bit lane n of quarter kk = the quad's 4 bytes
// of column 64·cb + 16·kk + n. Rows nt..ceil(nt/64)·64
// are zero; vd[j] = row scales (0 past nt). Meanwhile the next tile's rows are prefetched, 4 per
// quad: pf rows of pf_bytes (stride pf_ld; pf_n of them), and as many of pf2 (the V rows when V is
// not inside the K rows).
void pack_v(const uint8_t* V, size_t ldv, int nt, int Dv, uint8_t* vp, float* vd, const uint8_t* pf, size_t pf_ld,
            int pf_n, size_t pf_bytes, const uint8_t* pf2, size_t pf2_ld, size_t pf2_bytes) {
    const int ng = (nt + kSub - 1) / kSub * (kSub / 4);
    for (int j = 0; j < kT; ++j) {
        float d = 0.0f;
        if (j < nt) std::memcpy(&d, V + static_cast<size_t>(j) * ldv, sizeof d);
        vd[j] = d;
    }
    for (int g = 0; g < ng; ++g) {
        const uint8_t* row[4];
        for (int i = 0; i < 4; ++i)
            row[i] = 4 * g + i < nt ? V + static_cast<size_t>(4 * g + i) * ldv + kHdr : nullptr;
        for (int i = 4 * g; i < std::min(4 * g + 4, pf_n); ++i) {
            prefetch_rows(pf + static_cast<size_t>(i) * pf_ld, pf_ld, 1, pf_bytes);
            if (pf2) prefetch_rows(pf2 + static_cast<size_t>(i) * pf2_ld, pf2_ld, 1, pf2_bytes);
        }
        for (int cb = 0; cb < Dv / 64; ++cb) {
            __m512i r[4];
            for (int i = 0; i < 4; ++i) r[i] = row[i] ? _mm512_loadu_si512(row[i] + 64 * cb) : _mm512_setzero_si512();
            uint8_t* dst = vp + static_cast<size_t>(cb) * 4 * kVQ + static_cast<size_t>(g) * 64;
            pack_quad(r, dst, kVQ);
        }
    }
}

// MQA (V the K rows' prefix) with the K copy on: one pass over the tile's rows does both the copy of
// the K rows to kbuf (64-byte aligned rows of Dk bytes; the row groups [0, ceil(nt/16)) of the
// tile, rows at or past the cache's end n_left zero) and pack_v's V layout and row scales, each 64
// bytes loaded once for both (the two passes read every K row twice: on Sapphire Rapids 9.6% and
// 7.4% of TG 128 heads @ 8K). The same bytes as the K copy loop in run and pack_v. kd, vd: the K
// and V row scales (the same header here), 0 past nt. Meanwhile the next tile's pf_n rows (pf, row
// stride ldk) are prefetched, 4 per quad, as pack_v does.
void copy_k_pack_v(const uint8_t* K, size_t ldk, int n_left, int nt, int Dk, int Dv, uint8_t* kbuf, uint8_t* vp,
                   float* kd, float* vd, const uint8_t* pf, int pf_n) {
    const int nk = (nt + 15) / 16 * 16;               // K rows copied (whole groups)
    const int nv = (nt + kSub - 1) / kSub * kSub;     // V rows packed (whole sub-tiles)
    for (int j = 0; j < kT; ++j) {
        float d = 0.0f;
        if (j < nt) std::memcpy(&d, K + static_cast<size_t>(j) * ldk, sizeof d);
        kd[j] = vd[j] = d;
    }
    for (int g = 0; g < std::max(nk, nv) / 4; ++g) {
        const uint8_t* row[4];
        bool kst[4];
        for (int i = 0; i < 4; ++i) {
            const int j = 4 * g + i;
            row[i] = j < nk && j < n_left ? K + static_cast<size_t>(j) * ldk + kHdr : nullptr;
            kst[i] = j < nk;
            if (j < pf_n) prefetch_rows(pf + static_cast<size_t>(j) * ldk, ldk, 1, kHdr + Dk);
        }
        for (int cb = 0; cb < Dk / 64; ++cb) {
            __m512i r[4];
            for (int i = 0; i < 4; ++i) {
                r[i] = row[i] ? _mm512_loadu_si512(row[i] + 64 * cb) : _mm512_setzero_si512();
                if (kst[i]) _mm512_store_si512(kbuf + static_cast<size_t>(4 * g + i) * Dk + 64 * cb, r[i]);
                if (4 * g + i >= nt) r[i] = _mm512_setzero_si512();
            }
            if (cb >= Dv / 64 || 4 * g >= nv) continue;
            uint8_t* dst = vp + static_cast<size_t>(cb) * 4 * kVQ + static_cast<size_t>(g) * 64;
            pack_quad(r, dst, kVQ);
        }
    }
}

// The caller's next rows (QuantQuery::next_k / next_v) prefetched into L2 a slice at a time, one
// slice after each tile chunk of the call: a TG chunk call has one 512-row tile, so its own
// prefetch of the next tile's rows (pack_v) has nothing to fetch, and the next call's K copy and V
// pack would read its 292 KiB of rows cold from memory. Hints only: nothing is read.
struct NextRows {
    const char* p[2] = {nullptr, nullptr};
    const char* end[2] = {nullptr, nullptr};
    int per = 0;  // lines per slice, per range
    NextRows(const QuantQuery* pre, size_t slices) {
        if (!pre || slices == 0) return;
        const uint8_t* b[2] = {pre->next_k, pre->next_v};
        const size_t n[2] = {pre->next_k_bytes, pre->next_v_bytes};
        size_t lines = 0;
        for (int r = 0; r < 2; ++r)
            if (b[r] && n[r]) {
                p[r] = reinterpret_cast<const char*>(b[r]);
                end[r] = p[r] + n[r];
                lines = std::max(lines, (n[r] + 63) / 64);
            }
        per = static_cast<int>((lines + slices - 1) / slices);
    }
    void slice() {
        for (int r = 0; r < 2; ++r)
            for (int i = 0; i < per && p[r] < end[r]; ++i, p[r] += 64) _mm_prefetch(p[r], _MM_HINT_T1);
    }
};

struct Scratch {
    Buf qq, qd, qs, bq, vp, vd, kd, sint, st, pa, ktail, cb, kbuf;
};
Scratch& scratch() {
    static thread_local Scratch s;
    return s;
}

// Tuning switches for measuring (read once per call): LATTE_AMX_PAIR=0 runs every query block
// alone (no QK2/PV2 chunks); LATTE_AMX_KCOPY=0|1 forces the K tile copy off/on (default: with 2+
// blocks); LATTE_AMX_QPACK=0 quantises P to the A tiles through a 16×16 transpose and vpmovusdb
// per 16 KV rows instead of packs and one transpose per 64.
inline bool env_on(const char* name) {
    const char* e = std::getenv(name);
    return !(e && e[0] == '0');
}
inline int k_copy_mode() {
    const char* e = std::getenv("LATTE_AMX_KCOPY");
    return e && (e[0] == '0' || e[0] == '1') ? e[0] - '0' : -1;
}

// Per query block state across the KV tiles.
struct Block {
    int r0 = 0, mb = 0, nmax = 0;
    __m512 mv, lv, qdv;
    __m512i lenv;
};

// Flash attention over q8_KV K and V for query rows [0, M) (as attn_flash_part; normalise: as
// attn_flash, m_out/l_out may be null). (The pragma: as at the include of common.h above, for the
// softmax step inlined in to_p.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
void run(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const uint8_t* K, size_t ldk,
         const uint8_t* V, size_t ldv, const int* kv_len, float scale, float* O, int64_t ldo, float* m_out,
         float* l_out, bool normalise, const QuantQuery* pre = nullptr) {
    Scratch& sc = scratch();
    constexpr size_t kS = static_cast<size_t>(kT) * 16;  // one block's Sᵀ (int32) or P (u8) elements
    const int ncb = Dv / 64;
    int8_t* qq = sc.qq.get<int8_t>(static_cast<size_t>(kQB) * kSBmax * Dk);
    float* qd = sc.qd.get<float>(static_cast<size_t>(kQB) * kSBmax);
    int32_t* qs = sc.qs.get<int32_t>(static_cast<size_t>(kQB) * kSBmax);
    uint8_t* bq = sc.bq.get<uint8_t>(static_cast<size_t>(kSBmax) * Dk * 16);
    uint8_t* vp = sc.vp.get<uint8_t>(static_cast<size_t>(ncb) * 4 * kVQ);  // [cb][quarter]
    float* vd = sc.vd.get<float>(kT);
    float* kd = sc.kd.get<float>(kT);
    int32_t* sint = sc.sint.get<int32_t>(2 * kS);  // [block of the unit]
    float* St = sc.st.get<float>(kS);
    uint8_t* pa = sc.pa.get<uint8_t>(2 * kS);  // [block of the unit]
    uint8_t* ktail = sc.ktail.get<uint8_t>(static_cast<size_t>(16) * Dk);
    uint8_t* kbuf = sc.kbuf.get<uint8_t>(static_cast<size_t>(kT) * Dk);
    int32_t* cbuf = sc.cb.get<int32_t>(static_cast<size_t>(ncb) * 2 * 1024);  // [cb][block of the unit][4][256]
    const __m512 ninf = _mm512_set1_ps(kNegInf);
    const bool pair = env_on("LATTE_AMX_PAIR");
    const int kcopy = k_copy_mode();
    const bool qpack = env_on("LATTE_AMX_QPACK");
    const bool fuse_kv = env_on("LATTE_AMX_FUSEKV");
    const bool fuse_o = env_on("LATTE_AMX_FUSEO");

    // Sᵀ (int32, sintb[kT][16]) scaled (× the query and K row scales) and its masked max; the
    // online softmax step's exp with the row sums, times d_j (the V row's scale) and its max; P·d_j
    // quantised to u8 per query row (lanes), then to rows: A tiles pab[s][16][64]. corr and ps: the
    // rows' O factors for this tile. The tile: rows [j0, j0 + nt) of the cache, nsub 64-row
    // sub-tiles. Rows a query row does not see are masked only on tiles where some row stops
    // short. The softmax and ×d_j pass are common.h's softmax_pd_log2 (shared with avx512's 16-row
    // q8_KV path): two passes over St instead of four, scores in log2 units (log2 e in B.qdv).
    const auto to_p = [&](int j0, int nt, int nsub, Block& B, const int32_t* sintb, uint8_t* pab, const float* kd,
                          const float* vd, float* corr, float* ps) {
        const __m512i visv = tile_visible16(B.lenv, j0, nt);
        const bool full = _mm512_cmplt_epi32_mask(visv, _mm512_set1_epi32(nt)) == 0;
        // the max in four chains (common.h's in_four_chains; max is exact in any order)
        const __m512 qdv = B.qdv;
        __m512 mc[4] = {ninf, ninf, ninf, ninf};
        in_four_chains(nt, [&](int j, int u) {
            const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(sintb + 16 * j)),
                                           _mm512_mul_ps(qdv, _mm512_set1_ps(kd[j])));
            _mm512_store_ps(St + 16 * j, v);
            mc[u] = max_if_seen(mc[u], v, j, visv, full);
        });
        const __m512 mx = max_of4(mc);
        const __m512 pmax = softmax_pd_log2(St, nt, visv, full, mx, B.mv, B.lv, corr, [&](int j) { return vd[j]; });
        for (int j = nt; j < nsub * kSub; ++j) _mm512_store_ps(St + 16 * j, _mm512_setzero_ps());
        const __mmask16 pos = _mm512_cmp_ps_mask(pmax, _mm512_setzero_ps(), _CMP_GT_OQ);
        const __m512 ips = _mm512_maskz_div_ps(pos, _mm512_set1_ps(255.0f), pmax);
        _mm512_store_ps(ps, _mm512_mul_ps(pmax, _mm512_set1_ps(1.0f / 255.0f)));
        if (qpack) {
            // per 64-row sub-tile: each quad of KV rows packed to bytes in place (two vpackusdw, one
            // vpackuswb: 128-bit lane L holds queries 4L..4L+3 × the quad's 4 rows), a 4×4 byte
            // transpose per lane (vpshufb) makes each query's 4 bytes one dword, and one 16×16
            // dword transpose gives the A tile's rows: 64 KV bytes per query row, whole stores
            const __m512i tr4 = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
            for (int s = 0; s < nsub; ++s) {
                __m512 t[16];
                for (int q = 0; q < 16; ++q) {
                    const float* src = St + 16 * (kSub * s + 4 * q);
                    const __m512i v0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_load_ps(src), ips));
                    const __m512i v1 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_load_ps(src + 16), ips));
                    const __m512i v2 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_load_ps(src + 32), ips));
                    const __m512i v3 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_load_ps(src + 48), ips));
                    const __m512i z = _mm512_packus_epi16(_mm512_packus_epi32(v0, v1), _mm512_packus_epi32(v2, v3));
                    t[q] = _mm512_castsi512_ps(_mm512_shuffle_epi8(z, tr4));
                }
                transpose16(t);
                for (int r = 0; r < 16; ++r) _mm512_store_ps(reinterpret_cast<float*>(pab + s * 1024 + r * 64), t[r]);
            }
        } else {
            for (int jb = 0; jb < nsub * 4; ++jb) {
                __m512 t[16];
                for (int x = 0; x < 16; ++x)
                    t[x] = _mm512_castsi512_ps(
                        _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_load_ps(St + 16 * (16 * jb + x)), ips)));
                transpose16(t);
                uint8_t* dst = pab + (jb / 4) * 1024 + (jb % 4) * 16;
                for (int r = 0; r < 16; ++r)
                    _mm_store_si128(reinterpret_cast<__m128i*>(dst + r * 64),
                                    _mm512_cvtusepi32_epi8(_mm512_castps_si512(t[r])));
            }
        }
    };
    // O = O·corr + ps · C for one 64-column block of a query block (C: cbufb[kk][16][16]); where no
    // row's max moved (corr all 1) the O·corr product is left out (the same bits: O·1 = O). On the
    // block's first tile (first) O = ps · C: O is not zero-filled first and read back (TG 128 heads
    // splits 8K into 16 chunks: 256 KiB of O per chunk call). On its last tile (fin: the rows'
    // final factors, 1/l or 1) O is scaled here, as the write-out did in a pass of its own over O
    // (the same operations on the same values: the same bits); a
    // TG chunk's call has one tile, so its O is written once instead of written, read and written.
    const auto o_update = [&](const Block& B, int cb, const int32_t* cbufb, const float* corr, const float* ps,
                              bool first, const float* fin) {
        const bool moved = _mm512_cmp_ps_mask(_mm512_load_ps(corr), _mm512_set1_ps(1.0f), _CMP_NEQ_UQ) != 0;
        for (int r = 0; r < B.mb; ++r) {
            float* o = O + (B.r0 + r) * ldo + 64 * cb;
            const __m512 cr = _mm512_set1_ps(corr[r]), pr = _mm512_set1_ps(ps[r]);
            __m512 f[4];
            for (int kk = 0; kk < 4; ++kk) {
                const __m512 c = _mm512_cvtepi32_ps(_mm512_load_si512(cbufb + 256 * kk + 16 * r));
                if (first) {
                    f[kk] = _mm512_mul_ps(c, pr);
                } else {
                    const __m512 ov = _mm512_loadu_ps(o + 16 * kk);
                    f[kk] = _mm512_fmadd_ps(c, pr, moved ? _mm512_mul_ps(ov, cr) : ov);
                }
            }
            if (fin && normalise) {  // (partials: the factor is 1)
                const __m512 sv = _mm512_set1_ps(fin[r]);
                for (int kk = 0; kk < 4; ++kk) f[kk] = _mm512_mul_ps(sv, f[kk]);
            }
            for (int kk = 0; kk < 4; ++kk) _mm512_storeu_ps(o + 16 * kk, f[kk]);
        }
    };
    // A row's final factor from its sum l: 1/l (0 where l is 0), or 1 for partials; a block's
    // rows' into fin.
    const auto final_factor = [&](float l) { return normalise ? (l > 0.0f ? 1.0f / l : 0.0f) : 1.0f; };
    const auto final_factors = [&](const Block& B, float* fin) {
        alignas(64) float lrow[16];
        _mm512_store_ps(lrow, B.lv);
        for (int r = 0; r < 16; ++r) fin[r] = final_factor(lrow[r]);
    };

    // the caller's next rows: one slice per tile chunk, sized so that all are asked for within
    // about the first half of the call's chunks (their number estimated as block pairs × tiles ×
    // (2·kT/64 Sᵀ + 2·Dv/64 P·V chunks)) and have landed by its end
    NextRows next(pre, static_cast<size_t>((M + 2 * kQB - 1) / (2 * kQB)) * ((N + kT - 1) / kT) * (2 * kT / 64 + 2 * ncb) / 2);
    LATTE_AMX_PHASE(-1);
    amx_tile_begin();
    for (int sb0 = 0; sb0 < M; sb0 += kQB * kSBmax) {
        const int rows = std::min(kQB * kSBmax, M - sb0);
        const int nb = (rows + kQB - 1) / kQB;
        Block blk[kSBmax];
        int nmax = 0;
        // the superblock's int8 query: the call's own (pre, attn_flash_part_q) or quantised here
        const int8_t* qsb = pre ? pre->q + static_cast<size_t>(sb0) * Dk : qq;
        const float* qdsb = pre ? pre->d + sb0 : qd;
        // the superblock's Qᵀ tiles: packed once for the call's caller (attn_pack_q) or here into bq
        const uint8_t* const bqsb = pre && pre->qp ? pre->qp + static_cast<size_t>(sb0) * Dk : bq;
        for (int b = 0; b < nb; ++b) {
            Block& B = blk[b];
            B.r0 = sb0 + b * kQB;
            B.mb = std::min(kQB, M - B.r0);
            alignas(64) int32_t len[16];
            alignas(64) float qdr[16];
            B.nmax = 0;
            for (int r = 0; r < 16; ++r) {
                len[r] = 0;
                qdr[r] = 0.0f;
                if (r < B.mb) {
                    len[r] = std::max(0, std::min(kv_len[B.r0 + r], N));
                    const size_t i = static_cast<size_t>(b) * kQB + r;
                    if (!pre)
                        quantize_q(GGMLType::Q8_KV, Q + (B.r0 + r) * ldq, Dk, scale, qq + i * Dk, qd + i, qs + i);
                    qdr[r] = qdsb[i];
                }
                B.nmax = std::max(B.nmax, len[r]);
            }
            nmax = std::max(nmax, B.nmax);
            B.lenv = _mm512_load_si512(len);
            B.qdv = _mm512_mul_ps(_mm512_load_ps(qdr), _mm512_set1_ps(kLog2e));  // scores in log2 units
            B.mv = ninf;
            B.lv = _mm512_setzero_ps();
            // Qᵀ of the block as tdpbssd B tiles: bq[c][k4][n][4] = q[n][64c + 4·k4 + 0..3]
            if (bqsb == bq)
                pack_q_rows16(qsb + static_cast<size_t>(b) * kQB * Dk, B.mb, Dk, false, bq + static_cast<size_t>(b) * Dk * 16);
            if (B.nmax == 0)  // sees no KV row: no tile writes its O (the others' first tile does)
                for (int r = 0; r < B.mb; ++r)
                    std::memset(O + (B.r0 + r) * ldo, 0, static_cast<size_t>(Dv) * sizeof(float));
        }
        // Per tile t (KV rows [j0, j0 + nt)): its K rows prepared and its V packed once for every
        // block, then the blocks that see it in pairs (QK2 / PV2 chunks: each K and V tile load
        // feeds two blocks) and an odd one alone: Sᵀ tiles, to_p (vector), P·V tiles, O update
        // (vector), each phase whole. (Session 11 paced the tile steps between the vector pieces so
        // that the two could overlap; interleaved A/B runs on the device found that slower than this
        // plain order at 2 and 16 threads and it was removed: docs/PERFORMANCE.md, session 12.)
        //
        // With 2+ query blocks the tile's K rows are first copied to 64-byte aligned rows of Dk
        // bytes (kbuf, L2) that every block's tile loads then read: in place, each 64-byte row of a
        // tile load straddles two cache lines (cache rows are 8 + Dk bytes apart). Device, 16
        // threads, PP 16 heads @ 4K: 11.9 -> 10.8 ms (medians of 5, alternated); TG 128 heads @ 8K
        // unchanged (0.510 / 0.513); with one block the copy costs more than it saves (TG 16 heads @
        // 8K: 0.49-0.57 -> 0.56-0.65 ms at 2 threads).
        LATTE_AMX_PHASE(7);  // setup: the blocks, the query (quantised / packed)
        const bool copy_k = kcopy < 0 ? nb >= 2 : kcopy == 1;
        KGroup kg[kT / 16];
        const bool v_in_k = V == K && ldv == ldk;
        for (int t = 0; t * kT < nmax; ++t) {
            const int j0 = t * kT, nt = std::min(kT, nmax - j0), nsub = (nt + kSub - 1) / kSub;
            if (copy_k && v_in_k && fuse_kv) {  // the K copy and the V pack in one pass (MQA)
                copy_k_pack_v(K + static_cast<size_t>(j0) * ldk, ldk, N - j0, nt, Dk, Dv, kbuf, vp, kd, vd,
                              K + static_cast<size_t>(j0 + kT) * ldk, std::max(0, std::min(kT, nmax - j0 - kT)));
                for (int g = 0; g < kT / 16; ++g)
                    kg[g] = 16 * g < nt ? KGroup{kbuf + static_cast<size_t>(g) * 16 * Dk, static_cast<size_t>(Dk)}
                                        : KGroup{};
            } else {
                // the tile's K row groups (a group crossing N is copied, zero-padded, so nothing past
                // the cache is read) and row scales
                for (int g = 0; g < nsub * 4; ++g) {
                    const int j = j0 + 16 * g;
                    if (16 * g >= nt) {
                        kg[g] = KGroup{};
                    } else if (copy_k) {
                        uint8_t* dst = kbuf + static_cast<size_t>(g) * 16 * Dk;
                        for (int x = 0; x < 16; ++x) {
                            const uint8_t* src = K + static_cast<size_t>(j + x) * ldk + kHdr;
                            for (int c = 0; c < Dk; c += 64)
                                _mm512_store_si512(dst + static_cast<size_t>(x) * Dk + c,
                                                   j + x < N ? _mm512_loadu_si512(src + c) : _mm512_setzero_si512());
                        }
                        kg[g] = KGroup{dst, static_cast<size_t>(Dk)};
                    } else if (j + 16 <= N) {
                        kg[g] = KGroup{K + static_cast<size_t>(j) * ldk + kHdr, ldk};
                    } else {
                        std::memset(ktail, 0, static_cast<size_t>(16) * Dk);
                        for (int x = 0; j + x < N; ++x)
                            std::memcpy(ktail + static_cast<size_t>(x) * Dk, K + static_cast<size_t>(j + x) * ldk + kHdr,
                                        static_cast<size_t>(Dk));
                        kg[g] = KGroup{ktail, static_cast<size_t>(Dk)};
                    }
                }
                for (int j = 0; j < kT; ++j) {
                    float d = 0.0f;
                    if (j < nt) std::memcpy(&d, K + static_cast<size_t>(j0 + j) * ldk, sizeof d);
                    kd[j] = d;
                }
                // the tile's V packed once for every block (and the next tile's rows prefetched)
                const int nn = std::max(0, std::min(kT, nmax - j0 - kT));
                pack_v(V + static_cast<size_t>(j0) * ldv, ldv, nt, Dv, vp, vd, K + static_cast<size_t>(j0 + kT) * ldk, ldk, nn,
                       row_bytes(GGMLType::Q8_KV, Dk), v_in_k ? nullptr : V + static_cast<size_t>(j0 + kT) * ldv, ldv,
                       row_bytes(GGMLType::Q8_KV, Dv));
            }
            LATTE_AMX_PHASE(1);  // the tile's K copy, V pack, row scales
            int act[kSBmax], na = 0;
            for (int b = 0; b < nb; ++b)
                if (blk[b].nmax > j0) act[na++] = b;
            for (int i = 0; i < na;) {
                // the unit: two blocks (pair) or one
                const int per = pair && i + 1 < na ? 2 : 1;
                const int ub[2] = {act[i], act[i + per - 1]};
                const uint8_t* bqu[2] = {bqsb + static_cast<size_t>(ub[0]) * Dk * 16, bqsb + static_cast<size_t>(ub[1]) * Dk * 16};
                i += per;
                if (per == 2) {
                    for (int g = 0; g < nsub * 4 && kg[g].p; g += 2) {
                        run_chunk({Chunk::QK2, Dk / 64, kg + g, {bqu[0], bqu[1]}, nullptr,
                                   {sint + g * 256, sint + g * 256 + 256, sint + kS + g * 256, sint + kS + g * 256 + 256}});
                        next.slice();
                    }
                } else {
                    for (int s = 0; s < nsub; ++s) {
                        int32_t* c = sint + s * kSub * 16;
                        run_chunk({Chunk::QK1, Dk / 64, kg + 4 * s, {bqu[0], nullptr}, nullptr, {c, c + 256, c + 512, c + 768}});
                        next.slice();
                    }
                }
                LATTE_AMX_PHASE(2);  // Sᵀ tiles
                alignas(64) float corr[2][16], ps[2][16];  // [block of the unit]
                for (int h = 0; h < per; ++h)
                    to_p(j0, nt, nsub, blk[ub[h]], sint + h * kS, pa + h * kS, kd, vd, corr[h], ps[h]);
                LATTE_AMX_PHASE(3);  // to_p
                // C tiles: cbuf[cb][block of the unit][quarter][256]
                for (int cb = 0; cb < ncb; ++cb) {
                    const uint8_t* vb = vp + static_cast<size_t>(cb) * 4 * kVQ;
                    int32_t* c0 = cbuf + static_cast<size_t>(cb) * 2048;
                    if (per == 2) {
                        for (int kk = 0; kk < 4; kk += 2) {
                            run_chunk({Chunk::PV2, nsub, nullptr, {pa, pa + kS}, vb + kk * kVQ,
                                       {c0 + 256 * kk, c0 + 256 * kk + 256, c0 + 1024 + 256 * kk, c0 + 1024 + 256 * kk + 256}});
                            next.slice();
                        }
                    } else {
                        run_chunk({Chunk::PV1, nsub, nullptr, {pa, nullptr}, vb, {c0, c0 + 256, c0 + 512, c0 + 768}});
                        next.slice();
                    }
                }
                LATTE_AMX_PHASE(4);  // P·V tiles
                alignas(64) float fin[2][16];  // [block of the unit]: final factors on the block's last tile
                const float* finp[2] = {nullptr, nullptr};
                for (int h = 0; h < per; ++h) {
                    const Block& B = blk[ub[h]];
                    if (fuse_o && (B.nmax - 1) / kT == t) {
                        final_factors(B, fin[h]);
                        finp[h] = fin[h];
                    }
                }
                for (int cb = 0; cb < ncb; ++cb)
                    for (int h = 0; h < per; ++h)
                        o_update(blk[ub[h]], cb, cbuf + static_cast<size_t>(cb) * 2048 + h * 1024, corr[h], ps[h], t == 0,
                                 finp[h]);
                LATTE_AMX_PHASE(5);  // O update
            }
        }
        LATTE_AMX_PHASE(0);  // (between phases)
        // write out: the rows' 1/l (done by the last tile's O update unless LATTE_AMX_FUSEO=0), and
        // the row's max and sum (partials)
        for (int b = 0; b < nb; ++b) {
            const Block& B = blk[b];
            alignas(64) float mrow[16], lrow[16];
            _mm512_store_ps(mrow, B.mv);
            _mm512_store_ps(lrow, B.lv);
            for (int r = 0; r < B.mb; ++r) {
                float* o = O + (B.r0 + r) * ldo;
                const float l = lrow[r];
                if (!fuse_o && normalise) {
                    const __m512 sc = _mm512_set1_ps(final_factor(l));
                    for (int c = 0; c < Dv; c += 16) _mm512_storeu_ps(o + c, _mm512_mul_ps(sc, _mm512_loadu_ps(o + c)));
                }
                if (m_out) m_out[B.r0 + r] = mrow[r] * kLn2;  // the max back in natural-log units
                if (l_out) l_out[B.r0 + r] = l;
            }
        }
    }
    LATTE_AMX_PHASE(6);  // write-out
    amx_tile_end();
}
#pragma GCC diagnostic pop

// ---- bf16 tiles: bf16 / q8_0 / f16 caches ---------------------------------------------------
// Per call: query rows (times the softmax scale) rounded to bf16 and laid out as Qᵀ B tiles (pairs
// of dims per 32-bit lane, a 16×16 transpose per 32 dims); per KV tile of kT rows, K rows
// dequantised once to bf16 rows (kb, the A operand: 16 KV rows × 32 dims per tile load) and V rows
// to bf16 pairs of KV rows (vp, the B operand of P·V: tile n16·(kT/32) + c32 holds columns
// [16·n16, 16·n16 + 16) of KV rows [32·c32, 32·c32 + 32), interleaved so that 32-bit lane n of row
// k2 is {v[2k2][n], v[2k2 + 1][n]} — column order kept, nothing to undo at the end). Both are shared
// by the superblock's 8 query blocks. Sᵀ = K Qᵀ (tdpbf16ps, f32 C: no scales to apply), the rows-as-
// lanes online softmax of the q8_KV kernel, P rounded to bf16 and transposed to A tiles (16 query
// rows × 32 KV rows), O += P V a 64-column block (four C tiles) at a time.
// For -mla 1's MQA the V rows are the K rows' prefix: one dequantisation per row serves both (the
// V pairs are permuted out of the two rows' bf16 K vectors).
// Rounding: Q, K, V and P to bf16 (8-bit mantissa), f32 sums; tests/test_kernels.cpp states the
// tolerances. q8_0 values are dequantised as d·q in f32 then rounded once. f16 caches run the
// split form (run<true>): each operand also as the bf16 rounding of its remainder, in a second
// plane of every buffer, and three products per tile pair — f16's accuracy at 3× the tile work.
// Per-tile costs (the O update, the softmax bookkeeping) are paid once per 256 KV rows (the int8
// kernel: 512); kb and vp for (576, 512) take 295 + 262 KiB (twice that split): L2, not L1.
namespace bf16t {

// KV rows per tile here: 256 (the int8 kernel's 512 would put kb + vp at 1.1 MiB, 2.2 MiB for the
// split f16 form: past L2).
constexpr int kT = 256;

// f32 of elements [k, k + 32) of a row of type t (f16, bf16 or q8_0: covered(); k a multiple of
// 32); row null: zeros.
inline void load32(GGMLType t, const uint8_t* row, int k, __m512& lo, __m512& hi) {
    if (!row) {
        lo = hi = _mm512_setzero_ps();
        return;
    }
    switch (t) {
        case GGMLType::F16: {
            const uint8_t* h = row + 2 * static_cast<size_t>(k);
            lo = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)));
            hi = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + 32)));
            break;
        }
        case GGMLType::BF16: {
            const uint8_t* h = row + 2 * static_cast<size_t>(k);
            lo = _mm512_castsi512_ps(_mm512_slli_epi32(
                _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h))), 16));
            hi = _mm512_castsi512_ps(_mm512_slli_epi32(
                _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + 32))), 16));
            break;
        }
        default: {  // Q8_0: 2-byte f16 scale + 32 int8 per block
            const uint8_t* b = row + static_cast<size_t>(k / 32) * 34;
            uint16_t dh;
            std::memcpy(&dh, b, 2);
            const __m512 d = _mm512_set1_ps(_cvtsh_ss(dh));
            lo = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2)))));
            hi = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 18)))));
            break;
        }
    }
}

inline __m512i to_bf16(__m512 lo, __m512 hi) { return (__m512i)_mm512_cvtne2ps_pbh(hi, lo); }

// 32 values (lo: the first 16, hi: the next 16) as bf16 h and, with S (split), the bf16 rounding
// l of the remainder x − h: h + l is x exactly where x has at most 16 significant bits (f16, bf16,
// int8) and to 2^-17 of |x| otherwise (f32: the query, P).
template <bool S>
inline void split_bf16(__m512 lo, __m512 hi, __m512i& h, __m512i& l) {
    h = to_bf16(lo, hi);
    if constexpr (S) {
        const __m512 hl = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(h)), 16));
        const __m512 hh =
            _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h, 1)), 16));
        l = to_bf16(_mm512_sub_ps(lo, hl), _mm512_sub_ps(hi, hh));
    }
}

// Stores the V pairs of KV rows (j, j + 1) (j even) for columns [k, k + 32) from the two rows' bf16
// vectors a, b (32 columns each) into vp (see the layout above).
inline void store_v_pairs(uint8_t* vp, int j, int k, __m512i a, __m512i b) {
    const __m512i ilo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                                         37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i ihi = _mm512_add_epi16(ilo, _mm512_set1_epi16(16));
    const int n16 = k / 16;
    uint8_t* t0 = vp + (static_cast<size_t>(n16) * (kT / 32) + j / 32) * 1024 + ((j / 2) % 16) * 64;
    _mm512_store_si512(t0, _mm512_permutex2var_epi16(a, ilo, b));
    _mm512_store_si512(t0 + (kT / 32) * 1024, _mm512_permutex2var_epi16(a, ihi, b));
}

// Dequantises KV rows [0, ntp) of a tile (rows >= nt are zero): K to bf16 rows kb[j][Dk], V to the
// pairs vp. v_in_k: V is the K rows' prefix (read once). S: the remainders too, K's in
// kb + kT·Dk, V's in vp + kT·Dv·2 bytes.
template <bool S>
void pack_tile(const uint8_t* K, size_t ldk, GGMLType kt, int Dk, const uint8_t* V, size_t ldv, GGMLType vt, int Dv,
               bool v_in_k, int nt, int ntp, uint16_t* kb, uint8_t* vp) {
    const size_t klo = static_cast<size_t>(kT) * Dk, vlo = static_cast<size_t>(kT) * Dv * 2;
    for (int j = 0; j < ntp; j += 2) {
        const uint8_t* ra = j < nt ? K + static_cast<size_t>(j) * ldk : nullptr;
        const uint8_t* rb = j + 1 < nt ? K + static_cast<size_t>(j + 1) * ldk : nullptr;
        uint16_t* ka = kb + static_cast<size_t>(j) * Dk;
        for (int k = 0; k < Dk; k += 32) {
            __m512 a0, a1, b0, b1;
            load32(kt, ra, k, a0, a1);
            load32(kt, rb, k, b0, b1);
            __m512i a, b, al, bl;
            split_bf16<S>(a0, a1, a, al);
            split_bf16<S>(b0, b1, b, bl);
            _mm512_store_si512(ka + k, a);
            _mm512_store_si512(ka + Dk + k, b);
            if constexpr (S) {
                _mm512_store_si512(ka + klo + k, al);
                _mm512_store_si512(ka + klo + Dk + k, bl);
            }
            if (v_in_k && k < Dv) {
                store_v_pairs(vp, j, k, a, b);
                if constexpr (S) store_v_pairs(vp + vlo, j, k, al, bl);
            }
        }
        if (!v_in_k) {
            const uint8_t* va = j < nt ? V + static_cast<size_t>(j) * ldv : nullptr;
            const uint8_t* vb = j + 1 < nt ? V + static_cast<size_t>(j + 1) * ldv : nullptr;
            for (int k = 0; k < Dv; k += 32) {
                __m512 a0, a1, b0, b1;
                load32(vt, va, k, a0, a1);
                load32(vt, vb, k, b0, b1);
                __m512i a, b, al, bl;
                split_bf16<S>(a0, a1, a, al);
                split_bf16<S>(b0, b1, b, bl);
                store_v_pairs(vp, j, k, a, b);
                if constexpr (S) store_v_pairs(vp + vlo, j, k, al, bl);
            }
        }
    }
}

// Qᵀ of one block of mb <= 16 query rows (times scale) as tdpbf16ps B tiles: bq[c][k2][n][2] =
// bf16(scale·q[n][32c + 2k2 + 0..1]) (rows n >= mb are zero), one 1 KiB tile per 32 dims; S: the
// remainders' tiles after them (bq + Dk·32 bytes).
template <bool S>
void pack_q_t(const float* Q, int64_t ldq, int mb, int Dk, float scale, uint8_t* bq) {
    const __m512 sv = _mm512_set1_ps(scale);
    for (int c = 0; c < Dk / 32; ++c) {
        __m512 r[16], rl[16];
        for (int n = 0; n < 16; ++n) {
            __m512i h = _mm512_setzero_si512(), l = _mm512_setzero_si512();
            if (n < mb) {
                const float* q = Q + n * ldq + 32 * c;
                split_bf16<S>(_mm512_mul_ps(_mm512_loadu_ps(q), sv), _mm512_mul_ps(_mm512_loadu_ps(q + 16), sv), h, l);
            }
            r[n] = _mm512_castsi512_ps(h);
            rl[n] = _mm512_castsi512_ps(l);
        }
        transpose16(r);
        for (int k2 = 0; k2 < 16; ++k2) _mm512_store_ps(bq + (c * 16 + k2) * 64, r[k2]);
        if constexpr (S) {
            transpose16(rl);
            for (int k2 = 0; k2 < 16; ++k2) _mm512_store_ps(bq + static_cast<size_t>(Dk) * 32 + (c * 16 + k2) * 64, rl[k2]);
        }
    }
}

// Sᵀ (f32) for KV rows [64s, 64s + 64) of the tile and one query block: St[j][16]. kb points at
// the sub-tile's first K row (bf16, row stride 2·Dk bytes). S: Kh·Qh + Kh·Ql + Kl·Qh (the remainders'
// product, below 2^-16 of each term, is left out), Ql in tmm5 and Kl from kb + kT·Dk.
template <bool S>
inline void qk_sub(const uint16_t* kb, int Dk, const uint8_t* bq, float* St) {
    const size_t ld = 2 * static_cast<size_t>(Dk);
    const uint8_t* k0 = reinterpret_cast<const uint8_t*>(kb);
    const uint8_t* k1 = reinterpret_cast<const uint8_t*>(kb + static_cast<size_t>(kT) * Dk);
    const uint8_t* bql = bq + static_cast<size_t>(Dk) * 32;
    zero_c4();
    for (int c = 0; c < Dk / 32; ++c) {
        LATTE_TILE_LOAD(4, bq + c * 1024, 64);
        if constexpr (S) {
            LATTE_TILE_LOAD(5, bql + c * 1024, 64);
#define LATTE_QK_SPLIT_GROUP(cg, g)                                  \
    LATTE_TILE_LOAD(6, k0 + (g) * 16 * ld + 64 * c, ld);             \
    LATTE_TDPBF16PS(cg, 6, 4);                                       \
    LATTE_TDPBF16PS(cg, 6, 5);                                       \
    LATTE_TILE_LOAD(7, k1 + (g) * 16 * ld + 64 * c, ld);             \
    LATTE_TDPBF16PS(cg, 7, 4)
            LATTE_QK_SPLIT_GROUP(0, 0);
            LATTE_QK_SPLIT_GROUP(1, 1);
            LATTE_QK_SPLIT_GROUP(2, 2);
            LATTE_QK_SPLIT_GROUP(3, 3);
#undef LATTE_QK_SPLIT_GROUP
        } else {
            LATTE_TILE_LOAD(5, k0 + 64 * c, ld);
            LATTE_TDPBF16PS(0, 5, 4);
            LATTE_TILE_LOAD(6, k0 + 16 * ld + 64 * c, ld);
            LATTE_TDPBF16PS(1, 6, 4);
            LATTE_TILE_LOAD(7, k0 + 32 * ld + 64 * c, ld);
            LATTE_TDPBF16PS(2, 7, 4);
            LATTE_TILE_LOAD(5, k0 + 48 * ld + 64 * c, ld);
            LATTE_TDPBF16PS(3, 5, 4);
        }
    }
    LATTE_TILE_STORE(0, St + 0 * 256, 64);
    LATTE_TILE_STORE(1, St + 1 * 256, 64);
    LATTE_TILE_STORE(2, St + 2 * 256, 64);
    LATTE_TILE_STORE(3, St + 3 * 256, 64);
}

// C_q (tmm0-3, q the 16-column quarter of 64-column block cb) = Σ_c P_c · V(4cb + q, c) over the
// tile's nc 32-row chunks; stored to cbuf[q][16][16] (f32). S: Ph·Vh + Pl·Vh + Ph·Vl, Pl from
// pa + (kT/32) KiB, Vl from vp + kT·Dv·2 bytes.
template <bool S>
inline void pv_block(int nc, const uint8_t* pa, const uint8_t* vp, int Dv, int cb, float* cbuf) {
    constexpr size_t step = (kT / 32) * 1024;  // bytes between the tiles of adjacent 16-column groups
    const uint8_t* v = vp + static_cast<size_t>(4 * cb) * step;
    const uint8_t* vl = v + static_cast<size_t>(kT) * Dv * 2;
    const uint8_t* pl = pa + step;
    zero_c4();
    for (int c = 0; c < nc; ++c) {
        LATTE_TILE_LOAD(4, pa + c * 1024, 64);
        if constexpr (S) {
            LATTE_TILE_LOAD(5, pl + c * 1024, 64);
#define LATTE_PV_SPLIT_QUARTER(q)                                    \
    LATTE_TILE_LOAD(6, v + (q) * step + c * 1024, 64);               \
    LATTE_TDPBF16PS(q, 4, 6);                                        \
    LATTE_TDPBF16PS(q, 5, 6);                                        \
    LATTE_TILE_LOAD(7, vl + (q) * step + c * 1024, 64);              \
    LATTE_TDPBF16PS(q, 4, 7)
            LATTE_PV_SPLIT_QUARTER(0);
            LATTE_PV_SPLIT_QUARTER(1);
            LATTE_PV_SPLIT_QUARTER(2);
            LATTE_PV_SPLIT_QUARTER(3);
#undef LATTE_PV_SPLIT_QUARTER
        } else {
            LATTE_TILE_LOAD(5, v + c * 1024, 64);
            LATTE_TDPBF16PS(0, 4, 5);
            LATTE_TILE_LOAD(6, v + step + c * 1024, 64);
            LATTE_TDPBF16PS(1, 4, 6);
            LATTE_TILE_LOAD(7, v + 2 * step + c * 1024, 64);
            LATTE_TDPBF16PS(2, 4, 7);
            LATTE_TILE_LOAD(5, v + 3 * step + c * 1024, 64);
            LATTE_TDPBF16PS(3, 4, 5);
        }
    }
    store_c4(cbuf, cbuf + 256, cbuf + 512, cbuf + 768);
}

struct Scratch {
    Buf bq, kb, vp, st, pa, cb;
};
Scratch& scratch() {
    static thread_local Scratch s;
    return s;
}

struct Block {
    int r0 = 0, mb = 0, nmax = 0;
    __m512 mv, lv;
    __m512i lenv;
};

// S (split): every operand as bf16 + bf16 remainder and three products per tile pair (qk_sub,
// pv_block): for f16 caches, whose values are exact in two bf16, so the result keeps f16's accuracy
// (the query and P to 2^-17) at three times the tile work.
template <bool S>
void run(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const uint8_t* K, size_t ldk, GGMLType kt,
         const uint8_t* V, size_t ldv, GGMLType vt, const int* kv_len, float scale, float* O, int64_t ldo,
         float* m_out, float* l_out, bool normalise) {
    constexpr int np = S ? 2 : 1;  // planes: bf16, and the remainders
    Scratch& sc = scratch();
    const size_t qblk = static_cast<size_t>(np) * Dk * 32;  // bytes of one query block's Qᵀ tiles
    uint8_t* bq = sc.bq.get<uint8_t>(kSBmax * qblk);
    uint16_t* kb = sc.kb.get<uint16_t>(static_cast<size_t>(np) * kT * Dk);
    uint8_t* vp = sc.vp.get<uint8_t>(static_cast<size_t>(np) * Dv * kT * 2);
    float* St = sc.st.get<float>(static_cast<size_t>(kT) * 16);
    uint8_t* pa = sc.pa.get<uint8_t>(static_cast<size_t>(np) * (kT / 32) * 1024);
    float* cbuf = sc.cb.get<float>(4 * 256);
    const __m512 ninf = _mm512_set1_ps(kNegInf);
    const bool v_in_k = V == K && ldv == ldk && vt == kt;

    amx_tile_begin();
    for (int sb0 = 0; sb0 < M; sb0 += kQB * kSBmax) {
        const int rows = std::min(kQB * kSBmax, M - sb0);
        const int nb = (rows + kQB - 1) / kQB;
        Block blk[kSBmax];
        int nmax = 0;
        for (int b = 0; b < nb; ++b) {
            Block& B = blk[b];
            B.r0 = sb0 + b * kQB;
            B.mb = std::min(kQB, M - B.r0);
            alignas(64) int32_t len[16];
            B.nmax = 0;
            for (int r = 0; r < 16; ++r) {
                len[r] = r < B.mb ? std::max(0, std::min(kv_len[B.r0 + r], N)) : 0;
                B.nmax = std::max(B.nmax, len[r]);
            }
            nmax = std::max(nmax, B.nmax);
            B.lenv = _mm512_load_si512(len);
            B.mv = ninf;
            B.lv = _mm512_setzero_ps();
            pack_q_t<S>(Q + B.r0 * ldq, ldq, B.mb, Dk, scale, bq + b * qblk);
            for (int r = 0; r < B.mb; ++r)
                std::memset(O + (B.r0 + r) * ldo, 0, static_cast<size_t>(Dv) * sizeof(float));
        }
        for (int j0 = 0; j0 < nmax; j0 += kT) {
            const int nt = std::min(kT, nmax - j0);
            const int nsub = (nt + kSub - 1) / kSub;
            pack_tile<S>(K + static_cast<size_t>(j0) * ldk, ldk, kt, Dk, V + static_cast<size_t>(j0) * ldv, ldv, vt, Dv,
                      v_in_k, nt, nsub * kSub, kb, vp);
            // the next tile's rows into the cache meanwhile the tiles run
            const int nn = std::max(0, std::min(kT, nmax - j0 - kT));
            prefetch_rows(K + static_cast<size_t>(j0 + kT) * ldk, ldk, nn, row_bytes(kt, Dk));
            if (!v_in_k) prefetch_rows(V + static_cast<size_t>(j0 + kT) * ldv, ldv, nn, row_bytes(vt, Dv));
            for (int b = 0; b < nb; ++b) {
                Block& B = blk[b];
                if (B.nmax <= j0) continue;
                const uint8_t* bqb = bq + b * qblk;
                const int bn = std::min(nt, B.nmax - j0);  // KV rows any of the block's rows sees
                const int bsub = (bn + kSub - 1) / kSub;
                for (int s = 0; s < bsub; ++s)
                    qk_sub<S>(kb + static_cast<size_t>(s) * kSub * Dk, Dk, bqb, St + s * kSub * 16);
                alignas(64) float corr[16];
                softmax_tile16(St, bn, j0, B.lenv, B.mv, B.lv, corr, bsub * kSub);
                // P to bf16 A tiles pa[c][16 rows][32 KV rows] (S: the remainders' after them)
                for (int c = 0; c < bsub * 2; ++c) {
                    __m512 lo[16], hi[16];
                    for (int x = 0; x < 16; ++x) {
                        lo[x] = _mm512_load_ps(St + 16 * (32 * c + x));
                        hi[x] = _mm512_load_ps(St + 16 * (32 * c + 16 + x));
                    }
                    transpose16(lo);
                    transpose16(hi);
                    for (int r = 0; r < 16; ++r) {
                        __m512i h, l;
                        split_bf16<S>(lo[r], hi[r], h, l);
                        _mm512_store_si512(pa + c * 1024 + r * 64, h);
                        if constexpr (S) _mm512_store_si512(pa + (kT / 32) * 1024 + c * 1024 + r * 64, l);
                    }
                }
                // O = O·corr + P V, one 64-column block (four C tiles) at a time
                for (int cb = 0; cb < Dv / 64; ++cb) {
                    pv_block<S>(bsub * 2, pa, vp, Dv, cb, cbuf);
                    for (int r = 0; r < B.mb; ++r) {
                        float* o = O + (B.r0 + r) * ldo + 64 * cb;
                        const __m512 cr = _mm512_set1_ps(corr[r]);
                        for (int q = 0; q < 4; ++q)
                            _mm512_storeu_ps(o + 16 * q, _mm512_fmadd_ps(_mm512_loadu_ps(o + 16 * q), cr,
                                                                         _mm512_load_ps(cbuf + 256 * q + 16 * r)));
                    }
                }
            }
        }
        for (int b = 0; b < nb; ++b) {
            const Block& B = blk[b];
            alignas(64) float mrow[16], lrow[16];
            _mm512_store_ps(mrow, B.mv);
            _mm512_store_ps(lrow, B.lv);
            for (int r = 0; r < B.mb; ++r) {
                const float l = lrow[r];
                if (normalise) {
                    const __m512 f = _mm512_set1_ps(l > 0.0f ? 1.0f / l : 0.0f);
                    float* o = O + (B.r0 + r) * ldo;
                    for (int c = 0; c < Dv; c += 16) _mm512_storeu_ps(o + c, _mm512_mul_ps(_mm512_loadu_ps(o + c), f));
                }
                if (m_out) m_out[B.r0 + r] = mrow[r];
                if (l_out) l_out[B.r0 + r] = l;
            }
        }
    }
    amx_tile_end();
}

// bf16, q8_0 and f16 caches (f16 split: run<true>). f32 caches and -mla 2's f32 K/V stay on the
// avx512 kernel's f32 arithmetic. Through the plain bf16 tiles f32 and f16 results moved by ~3e-3
// of max |O| (1e-2 on tests/test_kernels.cpp's sharp grid), which failed the host suite's f16/f32
// bounds (oracle medians, the 1e-4 agreement between modes; docs/PERFORMANCE.md 2026-12-03);
// split, f16 is exact in two bf16. bf16 K is exact in bf16; q8_0 values d·q round once (the
// avx512 q8_0 path quantises the query to int8 instead: 1.93e-2 vs 7.95e-3 of max |O|).
bool covered(int Dk, int Dv, GGMLType kt, GGMLType vt) {
    auto ok = [](GGMLType t) { return t == GGMLType::BF16 || t == GGMLType::Q8_0 || t == GGMLType::F16; };
    return ok(kt) && ok(vt) && Dk % 32 == 0 && Dv % 64 == 0 && Dk > 0 && Dv > 0;
}

void attend(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk, GGMLType kt,
            const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale, float* O, int64_t ldo,
            float* m_out, float* l_out, bool normalise) {
    const auto* k = static_cast<const uint8_t*>(K);
    const auto* v = static_cast<const uint8_t*>(V);
    if (kt == GGMLType::F16 || vt == GGMLType::F16)
        run<true>(M, N, Dk, Dv, Q, ldq, k, ldk, kt, v, ldv, vt, kv_len, scale, O, ldo, m_out, l_out, normalise);
    else
        run<false>(M, N, Dk, Dv, Q, ldq, k, ldk, kt, v, ldv, vt, kv_len, scale, O, ldo, m_out, l_out, normalise);
}

}  // namespace bf16t

bool covered(int Dk, int Dv, GGMLType kt, GGMLType vt) {
    return kt == GGMLType::Q8_KV && vt == GGMLType::Q8_KV && Dk % 64 == 0 && Dv % 64 == 0 && Dk > 0 && Dv > 0;
}
// The int8 kernel takes a covered call of more than one query block. One block (up to 16 rows: TG
// with 16 heads, V2-Lite's) goes to avx512's 16-row q8_KV path, which is faster there: device
// Xeon, latte-attn-ab 21 rounds, TG 16 heads @ 8K q8_KV, amx / avx512 time 1.15x at 2 threads
// (0.331 vs 0.291 ms) and 1.18x at 16 (2026-12-07; one block shares no K copy or V pack and
// pairs no tile loads, and avx512's path improved in session 17). 128 heads: amx 2.3x faster.
bool int8_takes(int M, int Dk, int Dv, GGMLType kt, GGMLType vt) { return covered(Dk, Dv, kt, vt) && M > kQB; }

}  // namespace

void attn_flash(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale,
                float* O, int64_t ldo) {
    if (bf16t::covered(Dk, Dv, kt, vt))
        return bf16t::attend(M, N, Dk, Dv, Q, ldq, K, ldk, kt, V, ldv, vt, kv_len, scale, O, ldo, nullptr, nullptr, true);
    if (!int8_takes(M, Dk, Dv, kt, vt))
        return avx512::attn_flash(M, N, Dk, Dv, Q, ldq, K, ldk, kt, V, ldv, vt, kv_len, scale, O, ldo);
    run(M, N, Dk, Dv, Q, ldq, static_cast<const uint8_t*>(K), ldk, static_cast<const uint8_t*>(V), ldv, kv_len,
        scale, O, ldo, nullptr, nullptr, true);
}

void attn_plain(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale,
                float* O, int64_t ldo) {
    if (!covered(Dk, Dv, kt, vt) && !bf16t::covered(Dk, Dv, kt, vt))
        return avx512::attn_plain(M, N, Dk, Dv, Q, ldq, K, ldk, kt, V, ldv, vt, kv_len, scale, O, ldo);
    attn_flash(M, N, Dk, Dv, Q, ldq, K, ldk, kt, V, ldv, vt, kv_len, scale, O, ldo);
}

void attn_flash_part(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                     GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale,
                     float* O, int64_t ldo, float* m_out, float* l_out) {
    if (bf16t::covered(Dk, Dv, kt, vt))
        return bf16t::attend(M, N, Dk, Dv, Q, ldq, K, ldk, kt, V, ldv, vt, kv_len, scale, O, ldo, m_out, l_out, false);
    if (!int8_takes(M, Dk, Dv, kt, vt))
        return avx512::attn_flash_part(M, N, Dk, Dv, Q, ldq, K, ldk, kt, V, ldv, vt, kv_len, scale, O, ldo, m_out,
                                       l_out);
    run(M, N, Dk, Dv, Q, ldq, static_cast<const uint8_t*>(K), ldk, static_cast<const uint8_t*>(V), ldv, kv_len,
        scale, O, ldo, m_out, l_out, false);
}

// The query quantised once per TG split (dispatch.h's AttnQuantQFn): avx512's rows, which are
// also run's (the same quantize_q per q8_KV row) where the int8 kernel takes the call; none for the
// bf16-tile kernel (its query is bf16, packed per call).
bool attn_quant_q(GGMLType kt, GGMLType vt, int Dk, int Dv, int M, const float* Q, int64_t ldq, float scale, int8_t* q,
                  float* d, int32_t* s) {
    if (bf16t::covered(Dk, Dv, kt, vt)) return false;
    return avx512::attn_quant_q(kt, vt, Dk, Dv, M, Q, ldq, scale, q, d, s);
}

// The int8 kernel's Qᵀ B tiles of M quantised rows, 16 rows per block (run's pack_q_rows16 per
// block), for every KV chunk of a TG split (8 blocks at 128 heads: 72 16×16 transposes per chunk
// call otherwise, 4.5% of the kernel's vector work on Zen 5 with the tile operations made no-ops).
bool attn_pack_q(GGMLType kt, GGMLType vt, int Dk, int Dv, int M, const int8_t* q, uint8_t* qp) {
    if (!int8_takes(M, Dk, Dv, kt, vt)) return false;
    for (int r = 0; r < M; r += kQB)
        pack_q_rows16(q + static_cast<size_t>(r) * Dk, std::min(kQB, M - r), Dk, false, qp + static_cast<size_t>(r) * Dk);
    return true;
}

void attn_flash_part_q(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                       GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale, float* O,
                       int64_t ldo, float* m_out, float* l_out, const QuantQuery& qq) {
    if (bf16t::covered(Dk, Dv, kt, vt))
        return bf16t::attend(M, N, Dk, Dv, Q, ldq, K, ldk, kt, V, ldv, vt, kv_len, scale, O, ldo, m_out, l_out, false);
    if (!int8_takes(M, Dk, Dv, kt, vt))
        return avx512::attn_flash_part_q(M, N, Dk, Dv, Q, ldq, K, ldk, kt, V, ldv, vt, kv_len, scale, O, ldo, m_out,
                                         l_out, qq);
    run(M, N, Dk, Dv, Q, ldq, static_cast<const uint8_t*>(K), ldk, static_cast<const uint8_t*>(V), ldv, kv_len,
        scale, O, ldo, m_out, l_out, false, &qq);
}

}  // namespace latte::kernels::LATTE_AMX_NS

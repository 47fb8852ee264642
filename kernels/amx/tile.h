// AMX tile plumbing shared by the kernels/amx/ files: the tile configuration and the tile
// load/store/zero/dot operations as macros over tile register numbers (tile registers are named
// by immediates, so these cannot be functions).
//
// GCC 12's _tile_loadconfig tells the compiler it reads only 8 bytes of the configuration, its
// _tile_loadd that it reads no memory at all and its _tile_stored that it writes none (no operand,
// no clobber): stores to a buffer a tile is then loaded from, or loads from a buffer a tile was
// just stored to, could be moved across them. The asm here says what it reads and writes.
//
// With LATTE_AMX_EMULATE defined the same macros run on a scalar model of the eight tile
// registers (row-major bytes, 16 rows × 64 bytes each, the configuration below being the only one
// the kernels use), so the kernels' data layouts are tested on CPUs without AMX
// (tests/test_amx_emulated.cpp). The model follows the instruction definitions (Intel SDM,
// TDPBF16PS: C[m][n] += Σ_k A[m][2k]·B[k][2n] + A[m][2k+1]·B[k][2n+1], products exact in f32;
// TDPBSSD/TDPBUSD: C[m][n] += Σ_k Σ_i A[m][4k+i]·B[k][4n+i] in int32) but not the hardware's
// rounding order of the f32 sums, so emulated results match up to f32 summation order.
#pragma once
#include <cstdint>
#include <cstring>

// The namespace of the including kernel file's functions: amx, or amx_emu for the emulated build
// that the tests compile a second time (tests/test_amx_emulated.cpp, test_amx_attn_emulated.cpp).
// (A tool that compiles the file again, tools/amx_phases.cpp, names its own.)
#if !defined(LATTE_AMX_NS)
#if defined(LATTE_AMX_EMULATE)
#define LATTE_AMX_NS amx_emu
#else
#define LATTE_AMX_NS amx
#endif
#endif

#if !defined(LATTE_AMX_EMULATE)
#include <immintrin.h>
#endif

namespace latte::kernels {
namespace {

struct alignas(64) AmxTileConfig {
    uint8_t palette_id = 1;
    uint8_t start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
};

#if defined(LATTE_AMX_EMULATE)

struct EmuTiles {
    alignas(64) uint8_t reg[8][16][64];
};
inline EmuTiles& emu_tiles() {
    static thread_local EmuTiles e;
    return e;
}
inline void emu_load(int t, const void* base, long stride) {
    for (int r = 0; r < 16; ++r) std::memcpy(emu_tiles().reg[t][r], static_cast<const uint8_t*>(base) + r * stride, 64);
}
inline void emu_store(int t, void* base, long stride) {
    for (int r = 0; r < 16; ++r) std::memcpy(static_cast<uint8_t*>(base) + r * stride, emu_tiles().reg[t][r], 64);
}
inline float emu_bf16(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline void emu_dpbf16ps(int c, int a, int b) {
    EmuTiles& e = emu_tiles();
    for (int m = 0; m < 16; ++m)
        for (int n = 0; n < 16; ++n) {
            float acc;
            std::memcpy(&acc, &e.reg[c][m][4 * n], 4);
            for (int k = 0; k < 16; ++k)
                acc += emu_bf16(&e.reg[a][m][4 * k]) * emu_bf16(&e.reg[b][k][4 * n]) +
                       emu_bf16(&e.reg[a][m][4 * k + 2]) * emu_bf16(&e.reg[b][k][4 * n + 2]);
            std::memcpy(&e.reg[c][m][4 * n], &acc, 4);
        }
}
template <bool AU, bool BU>
inline void emu_dpb(int c, int a, int b) {
    EmuTiles& e = emu_tiles();
    for (int m = 0; m < 16; ++m)
        for (int n = 0; n < 16; ++n) {
            int32_t acc;
            std::memcpy(&acc, &e.reg[c][m][4 * n], 4);
            for (int k = 0; k < 16; ++k)
                for (int i = 0; i < 4; ++i) {
                    const uint8_t x = e.reg[a][m][4 * k + i], y = e.reg[b][k][4 * n + i];
                    acc += (AU ? int32_t{x} : int32_t{static_cast<int8_t>(x)}) *
                           (BU ? int32_t{y} : int32_t{static_cast<int8_t>(y)});
                }
            std::memcpy(&e.reg[c][m][4 * n], &acc, 4);
        }
}
inline void amx_tile_begin() {}
inline void amx_tile_end() {}
#define LATTE_TILE_LOAD(t, base, stride) emu_load(t, base, static_cast<long>(stride))
#define LATTE_TILE_STORE(t, base, stride) emu_store(t, base, static_cast<long>(stride))
#define LATTE_TILE_ZERO(t) std::memset(emu_tiles().reg[t], 0, 1024)
#define LATTE_TDPBF16PS(c, a, b) emu_dpbf16ps(c, a, b)
#define LATTE_TDPBSSD(c, a, b) emu_dpb<false, false>(c, a, b)
#define LATTE_TDPBUSD(c, a, b) emu_dpb<true, false>(c, a, b)

#else

// All eight tiles 16 rows × 64 bytes: the only configuration the kernels use.
inline void amx_tile_config_all16x64() {
    AmxTileConfig c;
    for (int t = 0; t < 8; ++t) {
        c.colsb[t] = 64;
        c.rows[t] = 16;
    }
    __asm__ volatile("ldtilecfg %0" ::"m"(c) : "memory");
}
inline void amx_tile_release() { _tile_release(); }
// A kernel call configures the tiles at its start and releases them at its end, so no AMX state
// is left on a thread between calls (context switches then save no tile data). Keeping the
// configuration across calls instead was measured on the 16-core Xeon (2026-12-03, whole model,
// pp512 16 threads): 4094 vs 4074 t/s, within noise, so the simpler per-call form stays.
inline void amx_tile_begin() { amx_tile_config_all16x64(); }
inline void amx_tile_end() { amx_tile_release(); }
#define LATTE_TILE_LOAD(t, base, stride)                                                            \
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"(static_cast<const void*>(base)), \
                     "r"(static_cast<long>(stride))                                                  \
                     : "memory")
#define LATTE_TILE_STORE(t, base, stride)                                                        \
    __asm__ volatile("tilestored %%tmm" #t ", (%0,%1,1)" ::"r"(static_cast<void*>(base)), \
                     "r"(static_cast<long>(stride))                                               \
                     : "memory")
#define LATTE_TILE_ZERO(t) _tile_zero(t)
#define LATTE_TDPBF16PS(c, a, b) _tile_dpbf16ps(c, a, b)
#define LATTE_TDPBSSD(c, a, b) _tile_dpbssd(c, a, b)
#define LATTE_TDPBUSD(c, a, b) _tile_dpbusd(c, a, b)

#endif

}  // namespace
}  // namespace latte::kernels

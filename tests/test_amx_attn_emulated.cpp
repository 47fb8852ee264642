// The AMX attention kernels (kernels/amx/flash_attn.cpp: the int8-tile kernel for q8_KV caches and
// the bf16-tile kernel for bf16, q8_0 and f16 caches) on CPUs without AMX: this file compiles that
// file a second time with LATTE_AMX_EMULATE (kernels/amx/tile.h: a scalar model of the eight tile
// registers and of TDPBSSD/TDPBUSD/TDPBF16PS) into namespace latte::kernels::amx_emu. Its vector
// code is the real AVX-512 code (this file gets the avx512 flags; the test runs where the CPU has
// the avx512 level), so the kernels' whole data flow — Qᵀ and V packing, K loaded in place, the
// 512-row tiles (bf16 tiles: 256) and 64-row sub-tiles, the rows-as-lanes softmax, the P transposes, the column order
// of O and its write-out, superblocks of 8 query blocks, tails, partials — is checked on the CI
// machine, which has no AMX. On machines with AMX the real kernel goes through the same grid in
// tests/test_kernels.cpp (check_level and the P·V rounding test).
//
// Fresh random inputs (normal, never zero) per shape; outputs poisoned with NaN. Tolerances, as
// max |O - ref| / max |ref|:
//   - against the scalar reference: tests/test_kernels.cpp's tol() for the amx level (the query
//     quantisation, resp. bf16 rounding, dominates): q8_KV 5e-2, q8_0 and bf16 3e-2, f16 2e-5 (the
//     split bf16 form);
//   - q8_KV against avx2's near-f32 P·V with the same int8 query: 2.5e-2 (the u8 P over 512-row
//     tiles, as the real-AMX test "amx q8_KV P·V (u8 P over 512-row tiles)"; measured 2.16e-2 on
//     one query row per head over 511 KV rows, MHA 192/128, 1.60e-2 there with 256-row tiles);
//   - partials (attn_flash_part over the whole length, O / l) against attn_flash: 1e-5;
//   - q8_KV with LATTE_AMX_PAIR / LATTE_AMX_KCOPY / LATTE_AMX_QPACK / LATTE_AMX_FUSEKV / LATTE_AMX_FUSEO
//     forced either way: the same bits.
#if defined(__x86_64__)  // the CMake files give this file the avx512 flags on x86 only
#define LATTE_AMX_EMULATE 1
#include "kernels/amx/flash_attn.cpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/scalar/flash_attn.h"
#include "tests/attn_data.h"

// The emulated kernels' vector code: the avx512 level and AVX512-VBMI (the V pack's byte permutes;
// every AMX CPU has it, AVX-512 CPUs before Ice Lake do not).
static bool emu_runs() { return latte::kernels::isa_available(Isa::Avx512) && __builtin_cpu_supports("avx512vbmi"); }

TEST_CASE("kernels: amx attention kernels on the emulated tiles against scalar", "[kernels][amx]") {
    if (!emu_runs()) {
        WARN("skipped: the emulated amx kernels run their vector code at the avx512 level with AVX512-VBMI");
        return;
    }
    // query blocks 1..3 (one block: q8_KV goes to avx512's 16-row path) and a superblock boundary
    // (130 rows), KV lengths across the 64-row sub-tile and the int8 kernel's 512-row (bf16 tiles:
    // 256-row) tile boundaries, TG, random and causal (the rows the last of the cache) masks; 8 and
    // 6 blocks over 2 resp. 3 tiles (4 resp. 3 pairs on every tile)
    using S = Shape;
    const Shape cases[] = {{true, 16, 1, 0, 1, S::TG},       {true, 16, 1, 0, 300, S::TG},
                           {true, 1, 5, 0, 64, S::Random},    {true, 16, 1, 0, 257, S::Random},
                           {true, 16, 1, 0, 513, S::Random},  {true, 20, 2, 63, 65, S::Causal},
                           {true, 16, 3, 517, 520, S::Causal}, {true, 130, 1, 0, 70, S::Random},
                           {false, 16, 1, 0, 255, S::TG},     {false, 16, 1, 0, 511, S::TG},
                           {false, 3, 7, 249, 256, S::Causal}, {false, 3, 7, 505, 512, S::Causal},
                           {false, 16, 2, 0, 130, S::Random}, {false, 1, 1, 0, 17, S::TG},
                           {true, 128, 1, 0, 600, S::TG},     {true, 16, 6, 1100, 1106, S::Causal},
                           // one query block (16 rows or fewer) goes to avx512's 16-row path since
                           // 2026-12-07: the tile boundaries again with two blocks for the int8 kernel
                           {true, 32, 1, 0, 257, S::Random},  {true, 17, 1, 0, 513, S::Random},
                           {false, 32, 1, 0, 511, S::TG},     {false, 17, 1, 0, 255, S::TG}};
    const GGMLType types[] = {GGMLType::Q8_KV, GGMLType::Q8_0, GGMLType::BF16, GGMLType::F16};
    // near-f32 P·V (the plain avx2 build's int16 P), where this CPU runs avx2
    const latte::kernels::KernelTable avx2 = latte::kernels::isa_available(Isa::Avx2)
                                                 ? avx2_plain_table()
                                                 : latte::kernels::table_for(Isa::Scalar);
    uint64_t seed = 20261204;
    double worst[4] = {}, worst_pv = 0.0, worst_part = 0.0;
    for (int ti = 0; ti < 4; ++ti) {
        const GGMLType t = types[ti];
        for (const Shape& c : cases) {
            const Data d = make(c, t, seed++);
            const size_t osz = static_cast<size_t>(d.M) * d.Dv;
            std::vector<float> ref(osz), got(osz, std::nanf("")), part(osz, std::nanf(""));
            std::vector<float> m(static_cast<size_t>(d.M), std::nanf("")), l(static_cast<size_t>(d.M), std::nanf(""));
            latte::kernels::scalar::attn_flash(d.M, d.N, d.Dk, d.Dv, d.q.data(), d.Dk, d.K(), d.ldk, t, d.V(c.mqa),
                                               d.ldv, t, d.kv_len.data(), d.scale, ref.data(), d.Dv);
            latte::kernels::amx_emu::attn_flash(d.M, d.N, d.Dk, d.Dv, d.q.data(), d.Dk, d.K(), d.ldk, t, d.V(c.mqa),
                                                d.ldv, t, d.kv_len.data(), d.scale, got.data(), d.Dv);
            const double e = rel_err(got, ref);
            INFO(latte::type_name(t) << (c.mqa ? " mqa" : " mha") << " heads=" << c.heads << " rows=" << c.rows
                                     << " N=" << c.N << " mask=" << c.mask << " err=" << e);
            CHECK(e <= tol(t, Isa::Amx));
            worst[ti] = std::max(worst[ti], e);
            // partials over the whole length, normalised here
            latte::kernels::amx_emu::attn_flash_part(d.M, d.N, d.Dk, d.Dv, d.q.data(), d.Dk, d.K(), d.ldk, t,
                                                     d.V(c.mqa), d.ldv, t, d.kv_len.data(), d.scale, part.data(), d.Dv,
                                                     m.data(), l.data());
            for (int r = 0; r < d.M; ++r)
                for (int i = 0; i < d.Dv; ++i) part[static_cast<size_t>(r) * d.Dv + i] /= l[static_cast<size_t>(r)];
            const double ep = rel_err(part, got);
            INFO("partials, normalised, against attn_flash: err=" << ep);
            CHECK(ep <= 1e-5);
            worst_part = std::max(worst_part, ep);
            if (t == GGMLType::Q8_KV) {
                // the int8 kernel's variants do the same arithmetic in the same order: the same bits.
                // Query blocks alone or in pairs (PAIR); the K tile copied to aligned rows or loaded
                // in place (KCOPY); P to A tiles through packs or vpmovusdb (QPACK); the K copy and V
                // pack in one pass or two (FUSEKV); O scaled by the last tile's update or the
                // write-out (FUSEO). Every one of the 32 combinations.
                latte::kernels::Buf altbuf;
                const char* names[] = {"LATTE_AMX_PAIR", "LATTE_AMX_KCOPY", "LATTE_AMX_QPACK", "LATTE_AMX_FUSEKV",
                                       "LATTE_AMX_FUSEO"};
                std::vector<std::array<const char*, 5>> vars;
                for (int m = 0; m < 32; ++m)
                    vars.push_back({m & 1 ? "1" : "0", m & 2 ? "1" : "0", m & 4 ? "1" : "0", m & 8 ? "1" : "0",
                                    m & 16 ? "1" : "0"});
                for (const auto& v : vars) {
                    std::string set;
                    for (int i = 0; i < 5; ++i) {
                        setenv(names[i], v[i], 1);
                        set += std::string(" ") + names[i] + "=" + v[i];
                    }
                    // O on a 64-byte line (the kernels' Buf), as the split's partials, poisoned
                    float* alt = altbuf.get<float>(osz);
                    std::fill(alt, alt + osz, std::nanf(""));
                    latte::kernels::amx_emu::attn_flash(d.M, d.N, d.Dk, d.Dv, d.q.data(), d.Dk, d.K(), d.ldk, t,
                                                        d.V(c.mqa), d.ldv, t, d.kv_len.data(), d.scale, alt, d.Dv);
                    INFO(set);
                    CHECK(std::memcmp(alt, got.data(), osz * sizeof(float)) == 0);
                }
                for (const char* n : names) unsetenv(n);
            }
            if (t == GGMLType::Q8_KV && latte::kernels::isa_available(Isa::Avx2)) {
                std::vector<float> near(osz, std::nanf(""));
                avx2.attn_flash(d.M, d.N, d.Dk, d.Dv, d.q.data(), d.Dk, d.K(), d.ldk, t, d.V(c.mqa), d.ldv, t,
                                d.kv_len.data(), d.scale, near.data(), d.Dv);
                const double ev = rel_err(got, near);
                INFO("against avx2's near-f32 P·V (same int8 query): err=" << ev);
                CHECK(ev <= 2.5e-2);
                worst_pv = std::max(worst_pv, ev);
            }
        }
    }
    if (const char* v = std::getenv("LATTE_TEST_ERRORS"); v && *v == '1')
        std::printf("amx emulated vs scalar: q8_KV %.3g, q8_0 %.3g, bf16 %.3g, f16 %.3g; q8_KV vs avx2 %.3g; "
                    "partials %.3g\n",
                    worst[0], worst[1], worst[2], worst[3], worst_pv, worst_part);
}

// The query quantised once per TG split (amx_emu::attn_quant_q, then attn_flash_part_q per chunk),
// and its Qᵀ tiles packed once too (attn_pack_q),
// against attn_flash_part: the same bits (tests/attn_data.h's query_once_same_bits), for the
// int8 kernel (q8_KV: one and two superblocks, 128 heads, MHA, from row 0 and row 16) and its
// hand-offs (q8_0 and bf16 to the bf16 tiles, which take no int8 query: declined).
TEST_CASE("kernels: amx query quantised once per TG split, emulated tiles: attn_flash_part's bits", "[kernels][amx]") {
    if (!emu_runs()) {
        WARN("skipped: the emulated amx kernels run their vector code at the avx512 level with AVX512-VBMI");
        return;
    }
    using S = Shape;
    uint64_t seed = 20261207;
    for (GGMLType t : {GGMLType::Q8_KV, GGMLType::Q8_0, GGMLType::BF16})
        for (const Shape s : {S{true, 16, 1, 0, 1031, S::TG}, S{true, 16, 9, 291, 300, S::Causal},
                              S{true, 128, 1, 0, 600, S::TG}, S{false, 1, 40, 700, 740, S::Causal}})
            for (int first : {0, 16}) {
                const Data d = make(s, t, seed++);
                if (first >= d.M) continue;  // (no rows from there)
                INFO(latte::type_name(t) << (s.mqa ? " mqa" : " mha") << " M=" << d.M << " N=" << d.N
                                         << " first=" << first);
                bool taken = true;
                const bool same = query_once_same_bits(
                    [&](auto... a) { return taken = latte::kernels::amx_emu::attn_quant_q(a...); },
                    latte::kernels::amx_emu::attn_flash_part, latte::kernels::amx_emu::attn_flash_part_q, d, t,
                    s.mqa, first);
                CHECK(taken == (t == GGMLType::Q8_KV));
                CHECK(same == taken);
                // and the Qᵀ tiles packed once (amx_emu::attn_pack_q, QuantQuery::qp): the same bits
                bool packed = false;
                const bool same_packed = query_once_same_bits(
                    latte::kernels::amx_emu::attn_quant_q, latte::kernels::amx_emu::attn_flash_part,
                    latte::kernels::amx_emu::attn_flash_part_q, d, t, s.mqa, first,
                    [&](auto... a) { return packed = latte::kernels::amx_emu::attn_pack_q(a...); });
                CHECK(packed == (taken && d.M > 16));  // one query block goes to avx512: nothing to pack
                CHECK(same_packed == taken);
            }
}
#endif  // __x86_64__

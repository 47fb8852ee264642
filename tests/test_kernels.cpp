// The attention kernels of every ISA level this machine can run, against the scalar reference
// (kernels/scalar/flash_attn.h), over a grid of shapes: heads × query rows fused into M (1..128),
// KV lengths 1..5000 including primes and the 64-row tile boundary ±1, TG (all rows see every KV
// row), causal with an offset (pos0 cached tokens before the ubatch) and random per-row lengths;
// MQA over the latent row (Dk 576, Dv 512, V aliasing the K row) and MHA (192/128, separate V).
// Outputs are poisoned with NaN before each call, so an unwritten element fails.
// Also: the flash-decoding partials merge to the full result, the dispatch resolution by name,
// and the table's row quantisers.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/scalar/flash_attn.h"
#include "tests/attn_data.h"
#if defined(__x86_64__)  // x86 builds compile kernels/avx2 (CMakeLists.txt)
#include "kernels/avx2/flash_attn.h"
#endif
#include "latte/error.h"
#include "latte/types.h"

using namespace latte;
using kernels::Isa;
using kernels::KernelTable;

namespace {

const GGMLType kTypes[] = {GGMLType::F32, GGMLType::F16, GGMLType::BF16, GGMLType::Q8_0, GGMLType::Q8_KV};

std::vector<Shape> grid() {
    using S = Shape;
    return {
        // MQA 576/512 (-mla 1): TG at many depths (tile boundaries ±1, primes), V3 heads, PP causal
        {true, 1, 1, 0, 1, S::TG},
        {true, 16, 1, 0, 63, S::TG},
        {true, 16, 1, 0, 64, S::TG},
        {true, 16, 1, 0, 65, S::TG},
        {true, 16, 1, 0, 127, S::TG},
        {true, 16, 1, 0, 1031, S::TG},
        {true, 16, 1, 0, 5000, S::TG},
        {true, 128, 1, 0, 129, S::TG},
        {true, 128, 1, 0, 997, S::TG},
        {true, 2, 3, 61, 64, S::Causal},
        {true, 16, 4, 60, 64, S::Causal},
        {true, 4, 17, 113, 130, S::Causal},
        {true, 1, 64, 0, 64, S::Causal},
        {true, 1, 64, 127, 191, S::Causal},
        {true, 3, 5, 0, 257, S::Random},
        {true, 16, 9, 291, 300, S::Causal},  // 144 rows: more than one 128-row amx superblock
        // MHA 192/128 (-mla 0/2): per head, query rows are tokens
        {false, 1, 1, 0, 1, S::TG},
        {false, 1, 7, 0, 7, S::Causal},
        {false, 1, 64, 66, 130, S::Causal},
        {false, 1, 33, 0, 1000, S::TG},
        {false, 1, 50, 0, 211, S::Random},
        {false, 1, 5, 4995, 5000, S::Causal},
        // 8 < M <= 16 rows with random lengths (avx512's 16-row q8_KV path, own V rows)
        {false, 1, 12, 0, 300, S::Random},
        {true, 1, 9, 0, 130, S::Random},
        // the 256-row KV tile boundary ±1 (avx512's 16-row path, amx's bf16 tiles), the amx int8
        // kernel's 512-row one, and 128 heads over two tiles and one row
        {true, 16, 1, 0, 255, S::TG},
        {true, 16, 1, 0, 256, S::TG},
        {true, 16, 1, 0, 257, S::TG},
        {true, 16, 1, 0, 511, S::TG},
        {true, 16, 1, 0, 512, S::TG},
        {true, 128, 1, 0, 513, S::TG},
        {true, 128, 1, 0, 1025, S::TG},
    };
}

void check_level(const KernelTable& tab) {
    uint64_t seed = 77;
    double worst[std::size(kTypes)] = {};  // per type, over the grid (LATTE_TEST_ERRORS=1 prints them)
    for (const Shape& s : grid()) {
        for (size_t ti = 0; ti < std::size(kTypes); ++ti) {
            const GGMLType t = kTypes[ti];
            const Data d = make(s, t, seed++);
            const size_t osz = static_cast<size_t>(d.M) * d.Dv;
            std::vector<float> ref(osz), got(osz);
            kernels::scalar::attn_flash(d.M, d.N, d.Dk, d.Dv, d.q.data(), d.Dk, d.K(), d.ldk, t, d.V(s.mqa), d.ldv, t,
                                        d.kv_len.data(), d.scale, ref.data(), d.Dv);
            for (bool flash : {true, false}) {
                std::fill(got.begin(), got.end(), std::nanf(""));
                (flash ? tab.attn_flash : tab.attn_plain)(d.M, d.N, d.Dk, d.Dv, d.q.data(), d.Dk, d.K(), d.ldk, t,
                                                          d.V(s.mqa), d.ldv, t, d.kv_len.data(), d.scale, got.data(), d.Dv);
                const double e = rel_err(got, ref);
                INFO(tab.name << " " << type_name(t) << (flash ? " flash" : " plain") << (s.mqa ? " mqa" : " mha")
                              << " heads=" << s.heads << " rows=" << s.rows << " pos0=" << s.pos0 << " N=" << d.N
                              << " mask=" << s.mask << " err=" << e);
                CHECK(e <= tol(t, tab.isa));
                worst[ti] = std::max(worst[ti], e);
            }
        }
    }
    if (const char* v = std::getenv("LATTE_TEST_ERRORS"); v && *v == '1')
        for (size_t ti = 0; ti < std::size(kTypes); ++ti)
            std::printf("max rel err %s %s: %.3g (tol %.3g)\n", tab.name, type_name(kTypes[ti]), worst[ti], tol(kTypes[ti], tab.isa));
}

// Two or three partials over disjoint KV ranges merged as documented in dispatch.h.
void check_partials(const KernelTable& tab) {
    // M = 32 (the general path) and M = 16 (avx512's 16-row q8_0 / q8_KV paths)
    for (GGMLType t : {GGMLType::F16, GGMLType::Q8_0, GGMLType::Q8_KV})
    for (const Shape s : {Shape{true, 16, 2, 700, 702, Shape::Causal}, Shape{true, 16, 1, 701, 702, Shape::Causal}}) {
        const Data d = make(s, t, 4242);
        const size_t osz = static_cast<size_t>(d.M) * d.Dv;
        std::vector<float> full(osz);
        tab.attn_flash(d.M, d.N, d.Dk, d.Dv, d.q.data(), d.Dk, d.K(), d.ldk, t, d.V(true), d.ldv, t, d.kv_len.data(),
                       d.scale, full.data(), d.Dv);
        const int edges[] = {0, 320, 701, d.N};  // the last chunk is empty for the first token's rows
        const int nc = 3;
        std::vector<float> part(osz * nc, std::nanf("")), m(static_cast<size_t>(d.M) * nc), l(m.size());
        for (int c = 0; c < nc; ++c) {
            std::vector<int> len(static_cast<size_t>(d.M));
            for (int r = 0; r < d.M; ++r) len[static_cast<size_t>(r)] = std::min(d.kv_len[static_cast<size_t>(r)], edges[c + 1]) - edges[c];
            tab.attn_flash_part(d.M, edges[c + 1] - edges[c], d.Dk, d.Dv, d.q.data(), d.Dk,
                                d.k.data() + d.ldk * edges[c], d.ldk, t, d.k.data() + d.ldk * edges[c], d.ldv, t,
                                len.data(), d.scale, &part[osz * c], d.Dv, &m[static_cast<size_t>(d.M) * c],
                                &l[static_cast<size_t>(d.M) * c]);
        }
        std::vector<float> merged(osz);
        for (int r = 0; r < d.M; ++r) {
            float mx = -std::numeric_limits<float>::infinity();
            for (int c = 0; c < nc; ++c) mx = std::max(mx, m[static_cast<size_t>(d.M) * c + r]);
            double lsum = 0.0;
            std::vector<double> o(static_cast<size_t>(d.Dv), 0.0);
            for (int c = 0; c < nc; ++c) {
                const float lc = l[static_cast<size_t>(d.M) * c + r];
                if (lc == 0.0f) {
                    CHECK(m[static_cast<size_t>(d.M) * c + r] == -std::numeric_limits<float>::infinity());
                    for (int i = 0; i < d.Dv; ++i) CHECK(part[osz * c + static_cast<size_t>(r) * d.Dv + i] == 0.0f);
                    continue;
                }
                const double w = std::exp(static_cast<double>(m[static_cast<size_t>(d.M) * c + r]) - mx);
                lsum += lc * w;
                for (int i = 0; i < d.Dv; ++i) o[static_cast<size_t>(i)] += w * part[osz * c + static_cast<size_t>(r) * d.Dv + i];
            }
            for (int i = 0; i < d.Dv; ++i) merged[static_cast<size_t>(r) * d.Dv + i] = static_cast<float>(o[static_cast<size_t>(i)] / lsum);
        }
        // f16: exact up to float rounding (1e-5). q8_KV / q8_0: avx512 rounds P (times the V scale)
        // to u8 (q8_KV; bf16 with LATTE_PV=bf16) or bf16 (q8_0) for P·V, and that rounding depends on
        // each partial's running max, so split and unsplit results differ by it: measured q8_KV
        // 9.3e-5 / 2.1e-4 (u8), 6.1e-4 / 5.8e-4 (bf16), q8_0 1.4e-3 / 7.4e-4 on these two shapes;
        // tolerance 5e-3.
        // amx (q8_KV): the same u8 P rounding over 512-row tiles (256 until 2026-12-06), whose
        // maxima differ more between split and unsplit runs: measured 5.0e-3 / 5.3e-3 with 256-row
        // tiles, 9.3e-3 / 6.4e-3 with 512 (Sapphire Rapids); tolerance 1e-2.
        const double e = rel_err(merged, full);
        INFO(tab.name << " " << type_name(t) << " err=" << e);
        // amx q8_0 (bf16 tiles): P is rounded to bf16 after each partial's own running max, so the
        // roundings differ between split and unsplit: measured 7.4e-4; tolerance 3e-3. amx f16 (the
        // split tiles): 2.4e-6 / 1.1e-6, inside f16's 1e-5.
        // avx512 q8_KV with 9..16 rows (the 16-row path, 256-row tiles since 2026-12-05, as amx):
        // 5.3e-3; tolerance 1e-2 as amx's.
        const double tl = t == GGMLType::F16 ? 1e-5
                          : (tab.isa == Isa::Amx || tab.isa == Isa::Avx512) && t == GGMLType::Q8_KV ? 1e-2
                          : tab.isa == Isa::Amx                         ? 3e-3
                                                                        : 5e-3;
        CHECK(e <= tl);
        if (const char* v = std::getenv("LATTE_TEST_ERRORS"); v && *v == '1')
            std::printf("merge rel err %s %s: %.3g\n", tab.name, type_name(t), e);
    }
}

// The q8 P·V of the avx512 level (q8_KV: int8 vpdpbusd over P·d quantised to u8 per row and tile;
// q8_0, or q8_KV with LATTE_PV=bf16: vdpbf16ps over P·d rounded to bf16) against avx2's P·V (int16 P
// and V since 2026-12-03: within 1.5e-4 of max |O| of f32 P·V, so the reference is still f32-exact
// at this tolerance's scale).
// Both levels quantise the query identically (round to nearest even, same scales), so this isolates
// the P·V rounding, which the scalar comparison's 3e-2/5e-2 (query quantisation) would hide.
// Measured over this grid (2026-12-02, Zen 5): int8 q8_KV 7.0e-3, bf16 q8_KV (LATTE_PV=bf16) 3.0e-3,
// bf16 q8_0 2.9e-3 (of max |O|); with the q8_0 16-row path's int8 P·V (u8 P per row, tile and
// 32-column block; the grid's 9..16-row shapes) q8_0 7.7e-3; tolerance 1e-2. Since 2026-12-05 the
// avx512 q8_KV 16-row path quantises P over 256-row tiles (kT16, as amx): 1.18e-2 on the 9..16-row
// shapes (the same figure as amx's), so avx512 is held to amx's 1.5e-2.
void check_pv_rounding(const KernelTable& ref, const KernelTable& tab, double tol = 1e-2, int first_type = 0) {
    uint64_t seed = 991;
    double worst[2] = {};
    for (const Shape& s : grid()) {
        for (int ti = first_type; ti < 2; ++ti) {
            const GGMLType t = ti == 0 ? GGMLType::Q8_0 : GGMLType::Q8_KV;
            const Data d = make(s, t, seed++);
            const size_t osz = static_cast<size_t>(d.M) * d.Dv;
            std::vector<float> want(osz, std::nanf("")), got(osz, std::nanf(""));
            ref.attn_flash(d.M, d.N, d.Dk, d.Dv, d.q.data(), d.Dk, d.K(), d.ldk, t, d.V(s.mqa), d.ldv, t,
                           d.kv_len.data(), d.scale, want.data(), d.Dv);
            tab.attn_flash(d.M, d.N, d.Dk, d.Dv, d.q.data(), d.Dk, d.K(), d.ldk, t, d.V(s.mqa), d.ldv, t,
                           d.kv_len.data(), d.scale, got.data(), d.Dv);
            const double e = rel_err(got, want);
            INFO(tab.name << " vs " << ref.name << " " << type_name(t) << (s.mqa ? " mqa" : " mha")
                          << " heads=" << s.heads << " rows=" << s.rows << " N=" << d.N << " err=" << e);
            CHECK(e <= tol);
            worst[ti] = std::max(worst[ti], e);
        }
    }
    if (const char* v = std::getenv("LATTE_TEST_ERRORS"); v && *v == '1')
        std::printf("P.V rounding %s vs %s: q8_0 %.3g, q8_KV %.3g\n", tab.name, ref.name, worst[0], worst[1]);
}

// The TG split of the 16-row tests: the MQA attention of d (V = the K rows' prefix) as two
// partials over [0, ⌈N/2⌉) and the rest (the second empty when N = 1), merged as dispatch.h says.
std::vector<float> merged_halves(const KernelTable& tab, const Data& d, GGMLType t) {
    const int N = d.N, cut = (N + 1) / 2;
    const size_t osz = static_cast<size_t>(d.M) * d.Dv;
    std::vector<float> part(2 * osz, std::nanf("")), m(2 * static_cast<size_t>(d.M)), l(m.size());
    for (int c = 0; c < 2; ++c) {
        const int e0 = c == 0 ? 0 : cut, e1 = c == 0 ? cut : N;
        std::vector<int> len(static_cast<size_t>(d.M));
        for (int r = 0; r < d.M; ++r) len[static_cast<size_t>(r)] = std::min(d.kv_len[static_cast<size_t>(r)], e1) - e0;
        tab.attn_flash_part(d.M, e1 - e0, d.Dk, d.Dv, d.q.data(), d.Dk, d.k.data() + d.ldk * e0, d.ldk, t,
                            d.k.data() + d.ldk * e0, d.ldv, t, len.data(), d.scale, &part[osz * c], d.Dv,
                            &m[static_cast<size_t>(d.M) * c], &l[static_cast<size_t>(d.M) * c]);
    }
    std::vector<float> merged(osz);
    for (int r = 0; r < d.M; ++r) {
        const size_t r0 = static_cast<size_t>(r), r1 = static_cast<size_t>(d.M) + r;
        const float mx = std::max(m[r0], m[r1]);
        const double w0 = l[r0] > 0.0f ? std::exp(static_cast<double>(m[r0]) - mx) : 0.0;
        const double w1 = l[r1] > 0.0f ? std::exp(static_cast<double>(m[r1]) - mx) : 0.0;
        const double lsum = l[r0] * w0 + l[r1] * w1;
        for (int i = 0; i < d.Dv; ++i) {
            const size_t o = r0 * d.Dv + i;
            merged[o] = static_cast<float>((w0 * part[o] + w1 * part[osz + o]) / lsum);
        }
    }
    return merged;
}

}  // namespace

TEST_CASE("kernels: avx512 q8 P·V (int8 / bf16) against avx2's near-f32 P·V", "[kernels]") {
    if (!kernels::isa_available(Isa::Avx2) || !kernels::isa_available(Isa::Avx512)) {
        WARN("skipped: needs avx2 and avx512");
        return;
    }
    check_pv_rounding(avx2_plain_table(), kernels::table_for(Isa::Avx512), 1.5e-2);
}

TEST_CASE("kernels: amx q8_KV P·V (u8 P over 512-row tiles) against avx2's near-f32 P·V", "[kernels]") {
    // The amx kernel quantises P·d to u8 per query row over a 512-row tile (avx512: 64 rows; 256
    // in its 16-row path). Its Q·Kᵀ is the same exact int8 product of the same quantised query, so
    // this isolates that rounding. Measured on the 16-core Xeon (2026-12-03, 256-row tiles): q8_KV
    // 1.18e-2 of max |O| (avx512: 7.9e-3; the worst shapes are the 192/128 ones over 130..5000
    // rows; 1.29e-2 in a later run); with 512-row tiles (Sapphire Rapids, 2026-12-06) 1.38e-2 on
    // this grid and 2.16e-2 on the emulated test's single query row per head over 511 KV rows
    // (1.60e-2 there with 256-row tiles); tolerance 2.5e-2, as the emulated test's. Against scalar the query quantisation still dominates: 2.57e-2 for both
    // levels (tol() 5e-2).
    if (!kernels::isa_available(Isa::Amx)) {
        WARN("skipped: this CPU (or OS) has no AMX; the amx kernel is tested on machines that do");
        return;
    }
    // q8_0 is not checked here: amx runs it on bf16 tiles with a bf16 (not int8) query, so it does
    // not share avx2's query rounding; check_level holds it against scalar.
    check_pv_rounding(avx2_plain_table(), kernels::table_for(Isa::Amx), 2.5e-2, 1);
}

TEST_CASE("kernels: every level this machine runs matches the scalar reference", "[kernels]") {
    for (Isa isa : kernels::available_isas()) {
        const KernelTable& tab = kernels::table_for(isa);
        INFO("level " << tab.name);
        CHECK(tab.isa == isa);
        if (isa == Isa::Scalar) continue;  // the reference itself
        check_level(tab);
    }
}

#if defined(__x86_64__)  // x86 builds compile kernels/avx2 (CMakeLists.txt)
// The avx2 level's AVX-VNNI build (kernels/avx2/flash_attn_vnni.cpp: vpdpbusd for Q·Kᵀ and the
// u8 P·V, the dispatch's choice where the CPU has AVX-VNNI) against the plain avx2 build, both called
// directly, over the grid, every cache type, flash and partials. Q·Kᵀ is the same exact integer sum
// and the softmax the same operations, so the row sums l agree bitwise everywhere, and O does for the
// float caches. For q8 V the VNNI build's P·d is u8 per row and tile (avx512's rounding, over the
// 16-row path's 128-row tiles; q8_0 per 32-column block with the row's one scale) where the plain
// one's is int16 (within 1.5e-4 of f32 P·V): measured 2026-12-06 (Zen 5, LATTE_TEST_ERRORS=1) q8_0
// 1.54e-2 (MHA, 12 rows, N = 300), q8_KV 9.5e-3 of max |O| apart; tolerance 2e-2. Against scalar
// both builds stay within tol() (check_level: q8_0 1.85e-2, q8_KV 2.57e-2).
TEST_CASE("kernels: avx2 with AVX-VNNI against the plain avx2 build", "[kernels]") {
    if (!kernels::isa_available(Isa::Avx2) || !__builtin_cpu_supports("avxvnni")) {
        WARN("skipped: needs AVX-VNNI");
        return;
    }
    uint64_t seed = 4242;
    int compared = 0;
    double worst[2] = {};
    for (const Shape& s : grid()) {
        for (GGMLType t : kTypes) {
            const bool q8 = t == GGMLType::Q8_0 || t == GGMLType::Q8_KV;
            const Data d = make(s, t, seed++);
            const size_t osz = static_cast<size_t>(d.M) * d.Dv;
            std::vector<float> a(osz, std::nanf("")), b(osz, std::nanf(""));
            std::vector<float> ma(static_cast<size_t>(d.M)), la(ma.size()), mb(ma.size()), lb(ma.size());
            auto same = [&](const char* what) {
                INFO(type_name(t) << (s.mqa ? " mqa" : " mha") << " heads=" << s.heads << " rows=" << s.rows
                                  << " N=" << d.N << " " << what);
                if (!q8) {
                    CHECK(std::memcmp(a.data(), b.data(), osz * sizeof(float)) == 0);
                    return;
                }
                const double e = rel_err(b, a);
                INFO("err=" << e);
                CHECK(e <= 2e-2);
                worst[t == GGMLType::Q8_KV] = std::max(worst[t == GGMLType::Q8_KV], e);
            };
            kernels::avx2::attn_flash(d.M, d.N, d.Dk, d.Dv, d.q.data(), d.Dk, d.K(), d.ldk, t, d.V(s.mqa), d.ldv, t,
                                      d.kv_len.data(), d.scale, a.data(), d.Dv);
            kernels::avx2vnni::attn_flash(d.M, d.N, d.Dk, d.Dv, d.q.data(), d.Dk, d.K(), d.ldk, t, d.V(s.mqa), d.ldv,
                                          t, d.kv_len.data(), d.scale, b.data(), d.Dv);
            same("flash");
            kernels::avx2::attn_flash_part(d.M, d.N, d.Dk, d.Dv, d.q.data(), d.Dk, d.K(), d.ldk, t, d.V(s.mqa),
                                           d.ldv, t, d.kv_len.data(), d.scale, a.data(), d.Dv, ma.data(), la.data());
            kernels::avx2vnni::attn_flash_part(d.M, d.N, d.Dk, d.Dv, d.q.data(), d.Dk, d.K(), d.ldk, t, d.V(s.mqa),
                                               d.ldv, t, d.kv_len.data(), d.scale, b.data(), d.Dv, mb.data(),
                                               lb.data());
            same("partials");
            CHECK(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)) == 0);
            CHECK(std::memcmp(ma.data(), mb.data(), ma.size() * sizeof(float)) == 0);
            ++compared;
        }
    }
    CHECK(compared > 0);
    if (const char* v = std::getenv("LATTE_TEST_ERRORS"); v && *v == '1')
        std::printf("avx2-vnni vs plain avx2 (u8 vs int16 P): q8_0 %.3g, q8_KV %.3g\n", worst[0], worst[1]);
}
#endif

TEST_CASE("kernels: flash-decoding partials merge to the full result", "[kernels]") {
    for (Isa isa : kernels::available_isas()) check_partials(kernels::table_for(isa));
}

// The split's merge (attn_combine) at every level against scalar's: random partials and weights
// (some chunks weight 0, their partials NaN: they must not be read), Dv with and without a vector
// tail, 1..32 chunks. SIMD sums with FMA: the bound is f32 rounding, 1e-5 of Σ_c |w_c·p_c| per
// element (measured ~1e-7).
TEST_CASE("kernels: every level's split merge (attn_combine) matches scalar", "[kernels]") {
    std::mt19937_64 rng(0xC0B1);
    std::normal_distribution<float> nd(0.0f, 3.0f);
    std::uniform_real_distribution<float> ud(0.0f, 1.0f);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (Isa isa : kernels::available_isas()) {
        const KernelTable& kt = kernels::table_for(isa);
        REQUIRE(kt.attn_combine != nullptr);
        for (int chunks : {1, 2, 3, 8, 17, 32}) {
            for (int Dv : {1, 7, 16, 33, 128, 130, 200, 512}) {
                const size_t stride = static_cast<size_t>(Dv) + 5;
                std::vector<float> part(stride * chunks), w(chunks);
                for (auto& x : part) x = nd(rng);
                int zeros = 0;
                for (int c = 0; c < chunks; ++c) {
                    w[c] = ud(rng);
                    if (c % 3 == 1 || (chunks == 1 && Dv == 7)) {  // an empty chunk: weight 0, never written
                        w[c] = 0.0f;
                        std::fill(part.begin() + c * stride, part.begin() + c * stride + Dv, nan);
                        ++zeros;
                    }
                }
                std::vector<float> ref(Dv + 3, nan), got(Dv + 3, nan);
                kernels::scalar::attn_combine(chunks, Dv, w.data(), part.data(), stride, ref.data());
                kt.attn_combine(chunks, Dv, w.data(), part.data(), stride, got.data());
                INFO(kt.name << " chunks " << chunks << " Dv " << Dv << " empty " << zeros);
                for (int d = 0; d < Dv; ++d) {
                    double mag = 0.0;
                    for (int c = 0; c < chunks; ++c)
                        if (w[c] != 0.0f) mag += std::fabs(double(w[c]) * part[c * stride + d]);
                    INFO("column " << d);
                    REQUIRE(std::isfinite(got[d]));
                    REQUIRE(std::fabs(double(got[d]) - ref[d]) <= 1e-5 * mag + 1e-30);
                    if (zeros == chunks) REQUIRE(got[d] == 0.0f);
                }
                for (int d = Dv; d < Dv + 3; ++d) REQUIRE(std::isnan(got[d]));  // nothing past Dv written
            }
        }
    }
}

// The TG split's query quantised once per call (attn_quant_q, then attn_flash_part_q per KV
// chunk) gives attn_flash_part's bits at every level that has it (avx512, amx): the 16-row paths
// (M = 16), the general path (M = 32, 144 = two amx superblocks), V3's 128 heads, MHA; from the
// buffer's first row and from a later one (the split's row blocks). Float caches have no int8
// query: attn_quant_q declines them; so does amx for q8_0, whose calls go to its bf16 tiles (until
// session 22 this expected amx to take q8_0, a check that only a machine with AMX runs, and
// failed there: 9 checks on the device).
TEST_CASE("kernels: the query quantised once per TG split gives attn_flash_part's bits", "[kernels]") {
    int levels = 0;
    for (Isa isa : kernels::available_isas()) {
        const KernelTable& tab = kernels::table_for(isa);
        if (!tab.attn_quant_q) continue;
        REQUIRE(tab.attn_flash_part_q);
        ++levels;
        uint64_t seed = 20261206;
        for (GGMLType t : {GGMLType::Q8_0, GGMLType::Q8_KV, GGMLType::F16})
            for (const Shape s : {Shape{true, 16, 1, 0, 1031, Shape::TG}, Shape{true, 16, 2, 700, 702, Shape::Causal},
                                  Shape{true, 128, 1, 0, 997, Shape::TG}, Shape{true, 16, 9, 291, 300, Shape::Causal},
                                  Shape{false, 1, 40, 700, 740, Shape::Causal}})
                for (int first : {0, 16}) {
                    const Data d = make(s, t, seed++);
                    if (first >= d.M) continue;  // (no rows from there)
                    INFO(tab.name << " " << type_name(t) << (s.mqa ? " mqa" : " mha") << " M=" << d.M << " N=" << d.N
                                  << " first=" << first);
                    bool taken = true;
                    const bool same = query_once_same_bits(
                        [&](auto... a) { return taken = tab.attn_quant_q(a...); }, tab.attn_flash_part,
                        tab.attn_flash_part_q, d, t, s.mqa, first);
                    CHECK(taken == (t == GGMLType::Q8_KV || (t == GGMLType::Q8_0 && isa != Isa::Amx)));
                    CHECK(same == taken);  // declined: not compared
                    if (tab.attn_pack_q)  // and packed once too (amx's Qᵀ tiles)
                        CHECK(query_once_same_bits(tab.attn_quant_q, tab.attn_flash_part, tab.attn_flash_part_q, d, t,
                                                   s.mqa, first, tab.attn_pack_q) == taken);
                }
    }
    // the levels with an int8 query that this machine runs have it (avx512 and amx)
    CHECK(levels == (kernels::isa_available(Isa::Avx512) ? 1 : 0) + (kernels::isa_available(Isa::Amx) ? 1 : 0));
}

namespace {
// Sets (or, with nullptr, unsets) an environment variable for the scope and restores it; the
// avx512 kernel reads LATTE_ROWS16 and LATTE_PV on every call.
struct EnvVar {
    const char* name;
    std::string old;
    bool had;
    EnvVar(const char* n, const char* v) : name(n), had(std::getenv(n) != nullptr) {
        if (had) old = std::getenv(n);
        if (v) ::setenv(name, v, 1);
        else ::unsetenv(name);
    }
    ~EnvVar() {
        if (had) ::setenv(name, old.c_str(), 1);
        else ::unsetenv(name);
    }
};

// tab.attn_flash over d (cache type t for K and V, V as the K row's prefix where mqa), or its
// attn_flash_part into m and l where they are given, with the environment variable `name` set to
// `value` for the call (nullptr: unset); O poisoned with NaN before it.
std::vector<float> flash_env(const KernelTable& tab, const Data& d, bool mqa, GGMLType t, const char* name,
                             const char* value, float* m = nullptr, float* l = nullptr) {
    EnvVar env(name, value);
    std::vector<float> o(static_cast<size_t>(d.M) * d.Dv, std::nanf(""));
    if (m)
        tab.attn_flash_part(d.M, d.N, d.Dk, d.Dv, d.q.data(), d.Dk, d.K(), d.ldk, t, d.V(mqa), d.ldv, t, d.kv_len.data(),
                            d.scale, o.data(), d.Dv, m, l);
    else
        tab.attn_flash(d.M, d.N, d.Dk, d.Dv, d.q.data(), d.Dk, d.K(), d.ldk, t, d.V(mqa), d.ldv, t, d.kv_len.data(),
                       d.scale, o.data(), d.Dv);
    return o;
}
}  // namespace

// avx512's q8_KV 16-row path packs an MQA tile's V for pv_i8 inside the Q·Kᵀ loop of the first
// group that reaches the rows (qk_rows16_pack) unless LATTE_FUSEPACK=0 (pack_v_i8 after the loop):
// the same packed bytes, so the same bits. TG over tile and 16-row boundaries (the last rows of a
// tile in 8- and 1-row steps), V3's 128 heads (8 groups: only the first packs), causal groups
// that reach a row at different times (a later group packs from a row that is not a 16-row step),
// random lengths; partials (attn_flash_part) too.
TEST_CASE("kernels: avx512 q8_KV V packed in the Q·Kᵀ loop gives the separate pack's bits", "[kernels]") {
    if (!kernels::isa_available(Isa::Avx512)) {
        WARN("skipped: needs avx512");
        return;
    }
    const KernelTable& tab = kernels::table_for(Isa::Avx512);
    uint64_t seed = 20261207;
    for (const Shape s : {Shape{true, 16, 1, 0, 1031, Shape::TG}, Shape{true, 16, 1, 0, 256, Shape::TG},
                          Shape{true, 16, 1, 0, 529, Shape::TG}, Shape{true, 128, 1, 0, 300, Shape::TG},
                          Shape{true, 16, 4, 600, 604, Shape::Causal}, Shape{true, 1, 64, 250, 314, Shape::Causal},
                          Shape{true, 12, 5, 0, 300, Shape::Random}}) {
        const Data d = make(s, GGMLType::Q8_KV, seed++);
        const size_t osz = static_cast<size_t>(d.M) * d.Dv;
        std::vector<float> mf(d.M), lf(d.M), ma(d.M), la(d.M);
        for (bool part : {false, true}) {
            const std::vector<float> fused = flash_env(tab, d, s.mqa, GGMLType::Q8_KV, "LATTE_FUSEPACK", nullptr,
                                                       part ? mf.data() : nullptr, lf.data());
            const std::vector<float> apart = flash_env(tab, d, s.mqa, GGMLType::Q8_KV, "LATTE_FUSEPACK", "0",
                                                       part ? ma.data() : nullptr, la.data());
            INFO("M=" << d.M << " N=" << d.N << " mask=" << s.mask << (part ? " part" : ""));
            CHECK(std::memcmp(fused.data(), apart.data(), osz * sizeof(float)) == 0);
            if (part) {
                CHECK(std::memcmp(mf.data(), ma.data(), d.M * sizeof(float)) == 0);
                CHECK(std::memcmp(lf.data(), la.data(), d.M * sizeof(float)) == 0);
            }
            CHECK(max_abs(fused) > 0.0);
        }
    }
}

// avx512's bf16 caches: Q·Kᵀ by vdpbf16ps with the query rounded to bf16 (tol() 3e-2, measured
// 8.4e-3); LATTE_BF16DOT=0 keeps the f32 FMA path, within the float types' 2e-5 of scalar, and the
// two differ by the query's rounding (more than the float bound, less than the bf16 one).
TEST_CASE("kernels: avx512 bf16 Q·Kᵀ by vdpbf16ps and by f32 FMA against scalar", "[kernels]") {
    if (!kernels::isa_available(Isa::Avx512)) {
        WARN("skipped: needs avx512");
        return;
    }
    const KernelTable& tab = kernels::table_for(Isa::Avx512);
    uint64_t seed = 20261216;
    for (const Shape s : {Shape{true, 16, 1, 0, 1031, Shape::TG}, Shape{true, 4, 17, 113, 130, Shape::Causal},
                          Shape{false, 1, 64, 66, 130, Shape::Causal}}) {
        const Data d = make(s, GGMLType::BF16, seed++);
        std::vector<float> ref(static_cast<size_t>(d.M) * d.Dv);
        kernels::scalar::attn_flash(d.M, d.N, d.Dk, d.Dv, d.q.data(), d.Dk, d.K(), d.ldk, GGMLType::BF16, d.V(s.mqa),
                                    d.ldv, GGMLType::BF16, d.kv_len.data(), d.scale, ref.data(), d.Dv);
        const std::vector<float> dot = flash_env(tab, d, s.mqa, GGMLType::BF16, "LATTE_BF16DOT", nullptr);
        const std::vector<float> fma = flash_env(tab, d, s.mqa, GGMLType::BF16, "LATTE_BF16DOT", "0");
        INFO((s.mqa ? "mqa" : "mha") << " M=" << d.M << " N=" << d.N << " mask=" << s.mask);
        CHECK(rel_err(fma, ref) <= 2e-5);
        CHECK(rel_err(dot, ref) <= 3e-2);
        CHECK(rel_err(dot, fma) > 2e-5);  // the bf16 query is used where on
    }
}

// avx512's float-V P·V runs 4 rows × 64 columns per pass (pv64) where Dv % 64 == 0, and 8 rows ×
// 32 columns (pv) otherwise or with LATTE_PV64=0: the same FMAs in the same order per element, so
// the same bits. f32/f16/bf16 caches, MQA (Dv 512) and MHA (Dv 128), TG, causal and random rows.
TEST_CASE("kernels: avx512 float P·V in 64-column passes gives the 32-column passes' bits", "[kernels]") {
    if (!kernels::isa_available(Isa::Avx512)) {
        WARN("skipped: needs avx512");
        return;
    }
    const KernelTable& tab = kernels::table_for(Isa::Avx512);
    uint64_t seed = 20261206;
    for (GGMLType t : {GGMLType::F32, GGMLType::F16, GGMLType::BF16})
        for (const Shape s : {Shape{true, 16, 1, 0, 1031, Shape::TG}, Shape{true, 4, 17, 113, 130, Shape::Causal},
                              Shape{false, 1, 64, 66, 130, Shape::Causal}, Shape{true, 3, 5, 0, 257, Shape::Random}}) {
            const Data d = make(s, t, seed++);
            const size_t osz = static_cast<size_t>(d.M) * d.Dv;
            const std::vector<float> a = flash_env(tab, d, s.mqa, t, "LATTE_PV64", nullptr);
            const std::vector<float> b = flash_env(tab, d, s.mqa, t, "LATTE_PV64", "0");
            INFO(type_name(t) << (s.mqa ? " mqa" : " mha") << " M=" << d.M << " N=" << d.N << " mask=" << s.mask);
            CHECK(std::memcmp(a.data(), b.data(), osz * sizeof(float)) == 0);
            CHECK(max_abs(a) > 0.0);
        }
}

// avx512's 16-row TG paths (8 < M <= 16 query rows as the lanes of a vector: q8_KV since a6d8eda,
// q8_0 since 2026-12-02) in three modes: off (LATTE_ROWS16=0, the general tiled path), on (int8
// P·V), on with LATTE_PV=bf16 (bf16 P·V); on fresh random inputs: rows 9..16, KV lengths 1..4099
// incl. primes and the 64-row tile (and 8-row group) boundaries ±1, TG and random per-row lengths,
// MQA 576/512 (V = the K row's prefix) and MHA 192/128; outputs poisoned with NaN.
// Measured 2026-12-02 (Zen 5; LATTE_TEST_ERRORS=1 prints them), relative to max |O|:
//   - against scalar, tol() (3e-2 q8_0, 5e-2 q8_KV: the query quantisation): q8_0 off 2.48e-2,
//     on 2.30e-2, on-bf16 2.48e-2; q8_KV 3.14e-2 / 3.14e-2 / 3.16e-2;
//   - on-bf16 against off, q8_0: the same int8 Q·Kᵀ per 32-block and the same bf16 P (per row and
//     tile), only the f32 summation order differs: 4.6e-7, tolerance 1e-5;
//   - on against off: q8_0 u8 P (per row, tile and 32-column block) against bf16 P: 1.12e-2,
//     tolerance 2e-2 (each against f32 P·V: 7.7e-3 / 2.9e-3, check_pv_rounding); q8_KV u8 P in
//     both, per 256-row tile on and 64-row tile off (5.8e-7 when both were 64): tolerance 2e-2;
//   - the flash-decoding partials (attn_flash_part, the TG split) merge to the unsplit result
//     within the P rounding, which depends on each chunk's max (as check_partials): q8_0 5.8e-3,
//     q8_KV 6.7e-3 (256-row tiles; 5.0e-3 with 64); tolerance 1.5e-2.
// avx512's 16-row paths take whole superblocks of 16-row groups (each > 8 rows); q8_KV's runs the
// groups over each KV tile in turn and packs the tile's V once for them. Per group the tiles are
// those of a call with the group alone: the same bits as calling it group by group. Causal
// (groups see different lengths: V packed by the first group that reaches a row), TG, random
// lengths; 2, 3, 4 groups, the last 9..16 rows.
TEST_CASE("kernels: avx512 16-row paths over groups of a superblock give the group-by-group bits", "[kernels]") {
    if (!kernels::isa_available(Isa::Avx512)) {
        WARN("skipped: needs avx512");
        return;
    }
    const KernelTable& tab = kernels::table_for(Isa::Avx512);
    uint64_t seed = 20261208;
    for (GGMLType t : {GGMLType::Q8_KV, GGMLType::Q8_0})
        for (const Shape s : {Shape{true, 16, 4, 600, 604, Shape::Causal}, Shape{true, 1, 64, 250, 314, Shape::Causal},
                              Shape{true, 32, 1, 0, 700, Shape::TG}, Shape{true, 12, 5, 0, 300, Shape::Random},
                              Shape{false, 1, 41, 259, 300, Shape::Causal}}) {
            const Data d = make(s, t, seed++);
            const size_t osz = static_cast<size_t>(d.M) * d.Dv;
            std::vector<float> whole(osz, std::nanf("")), groups(osz, std::nanf(""));
            tab.attn_flash(d.M, d.N, d.Dk, d.Dv, d.q.data(), d.Dk, d.K(), d.ldk, t, d.V(s.mqa), d.ldv, t,
                           d.kv_len.data(), d.scale, whole.data(), d.Dv);
            for (int r0 = 0; r0 < d.M; r0 += 16)
                tab.attn_flash(std::min(16, d.M - r0), d.N, d.Dk, d.Dv, d.q.data() + static_cast<size_t>(r0) * d.Dk,
                               d.Dk, d.K(), d.ldk, t, d.V(s.mqa), d.ldv, t, d.kv_len.data() + r0, d.scale,
                               groups.data() + static_cast<size_t>(r0) * d.Dv, d.Dv);
            INFO(type_name(t) << (s.mqa ? " mqa" : " mha") << " M=" << d.M << " N=" << d.N << " mask=" << s.mask);
            CHECK(std::memcmp(whole.data(), groups.data(), osz * sizeof(float)) == 0);
            CHECK(rel_err(whole, groups) == 0.0);
        }
}

TEST_CASE("kernels: avx512 16-row TG paths (q8_0, q8_KV), on and off, against scalar", "[kernels]") {
    if (!kernels::isa_available(Isa::Avx512)) {
        WARN("skipped: needs avx512");
        return;
    }
    const KernelTable& tab = kernels::table_for(Isa::Avx512);
    const int lens[] = {1, 2, 7, 8, 9, 63, 64, 65, 127, 128, 129, 191, 257, 521, 1031, 4099};
    const char* const mode_name[3] = {"off", "on", "on-bf16"};
    uint64_t seed = 20261202;
    double worst_ref[2][3] = {}, worst_on[2] = {}, worst_bf16[2] = {}, worst_merge[2] = {};
    for (int ti = 0; ti < 2; ++ti) {
        const GGMLType t = ti == 0 ? GGMLType::Q8_0 : GGMLType::Q8_KV;
        for (int M = 9; M <= 16; ++M) {
            for (int li = 0; li < static_cast<int>(std::size(lens)); ++li) {
                const int N = lens[li];
                // MQA for most, MHA (own V rows) for some; random per-row lengths for some
                const bool mqa = (M + li) % 4 != 0;
                const Shape::Mask mask = (M + li) % 3 == 0 ? Shape::Random : Shape::TG;
                const Shape s{mqa, M, 1, 0, N, mask};
                const Data d = make(s, t, seed++);
                const size_t osz = static_cast<size_t>(d.M) * d.Dv;
                std::vector<float> ref(osz), got[3];
                kernels::scalar::attn_flash(d.M, d.N, d.Dk, d.Dv, d.q.data(), d.Dk, d.K(), d.ldk, t, d.V(mqa), d.ldv,
                                            t, d.kv_len.data(), d.scale, ref.data(), d.Dv);
                for (int mode = 0; mode < 3; ++mode) {
                    EnvVar rows16("LATTE_ROWS16", mode == 0 ? "0" : nullptr);
                    EnvVar pv("LATTE_PV", mode == 2 ? "bf16" : nullptr);
                    got[mode].assign(osz, std::nanf(""));
                    tab.attn_flash(d.M, d.N, d.Dk, d.Dv, d.q.data(), d.Dk, d.K(), d.ldk, t, d.V(mqa), d.ldv, t,
                                   d.kv_len.data(), d.scale, got[mode].data(), d.Dv);
                    const double e = rel_err(got[mode], ref);
                    INFO(type_name(t) << " " << mode_name[mode] << (mqa ? " mqa" : " mha") << " M=" << M
                                      << " N=" << N << " mask=" << mask << " err=" << e);
                    CHECK(e <= tol(t));
                    worst_ref[ti][mode] = std::max(worst_ref[ti][mode], e);
                }
                const double eo = rel_err(got[1], got[0]);
                INFO(type_name(t) << " on vs off" << (mqa ? " mqa" : " mha") << " M=" << M << " N=" << N
                                  << " err=" << eo);
                CHECK(eo <= 2e-2);
                worst_on[ti] = std::max(worst_on[ti], eo);
                if (t == GGMLType::Q8_0) {
                    const double eb = rel_err(got[2], got[0]);
                    INFO("q8_0 on-bf16 vs off err=" << eb);
                    CHECK(eb <= 1e-5);
                    worst_bf16[ti] = std::max(worst_bf16[ti], eb);
                }
                // the TG split (default mode): two partials (the second empty when N = 1), merged
                if (mqa) {
                    const std::vector<float> merged = merged_halves(tab, d, t);
                    const double em = rel_err(merged, got[1]);
                    INFO(type_name(t) << " merged partials M=" << M << " N=" << N << " err=" << em);
                    CHECK(em <= 1.5e-2);
                    worst_merge[ti] = std::max(worst_merge[ti], em);
                }
            }
        }
    }
    if (const char* v = std::getenv("LATTE_TEST_ERRORS"); v && *v == '1')
        for (int ti = 0; ti < 2; ++ti)
            std::printf("rows16 %s: vs scalar off %.3g on %.3g on-bf16 %.3g; on vs off %.3g, on-bf16 vs off %.3g, "
                        "merged partials %.3g\n",
                        ti == 0 ? "q8_0" : "q8_KV", worst_ref[ti][0], worst_ref[ti][1], worst_ref[ti][2],
                        worst_on[ti], worst_bf16[ti], worst_merge[ti]);
}

// avx2's 16-row TG path (8 < M <= 16 query rows over q8_0 / q8_KV K and V: the rows as the lanes of
// two vectors for Q·Kᵀ with K read in place, 128-row KV tiles, int16 P·V; u8 with AVX-VNNI) on (default) and off
// (LATTE_ROWS16=0: the general path, 64-row tiles), on fresh random inputs: rows 9..16, KV lengths
// 1..4099 including the 4-row group and 64/128-row tile boundaries ±1, TG and random per-row lengths,
// MQA 576/512 (V = the K row's prefix) and MHA 192/128 (own V rows); outputs poisoned with NaN.
// Measured 2026-12-03 (Zen 3; LATTE_TEST_ERRORS=1 prints them), relative to max |O|:
//   - against scalar, tol() (3e-2 q8_0, 5e-2 q8_KV: the query quantisation): q8_0 off 2.36e-2,
//     on 2.36e-2; q8_KV 4.03e-2 / 4.03e-2 (one query scale for 576 values, this sharp softmax);
//   - on against off: the same quantised query and exact int8 Q·Kᵀ; only the f32 order of the q8_0
//     block sums and the int16 P·d rounding (per row over 128- vs 64-row tiles, 2^-15 of the row's
//     max) differ: q8_0 1.1e-4, q8_KV 9.3e-5; tolerance 1e-3;
//   - flash-decoding partials (attn_flash_part, the TG split at about N/2) merged against the unsplit
//     result (the int16 P rounding depends on each chunk's tiles): q8_0 1.1e-4, q8_KV 7.2e-5;
//     tolerance 1e-3.
TEST_CASE("kernels: avx2 16-row TG path (q8_0, q8_KV), on and off, against scalar", "[kernels]") {
    if (!kernels::isa_available(Isa::Avx2)) {
        WARN("skipped: needs avx2");
        return;
    }
    const KernelTable& tab = kernels::table_for(Isa::Avx2);
    // on vs off and the merged partials differ by the P·d rounding of different tiles: 1e-3 for the
    // plain build's int16 P, 1.5e-2 for the AVX-VNNI build's u8 P (avx512's tolerance for the same;
    // measured 2026-12-06 on Zen 5: on vs off q8_0 1.1e-2, q8_KV 1.0e-2, merged 7.9e-3 / 6.2e-3)
    const double tol_pv = std::string_view(tab.name) == "avx2-vnni" ? 1.5e-2 : 1e-3;
    const int lens[] = {1, 2, 3, 5, 8, 63, 64, 65, 127, 128, 129, 130, 255, 256, 257, 521, 1031, 4099};
    uint64_t seed = 20261203;
    double worst_ref[2][2] = {}, worst_on[2] = {}, worst_merge[2] = {};
    for (int ti = 0; ti < 2; ++ti) {
        const GGMLType t = ti == 0 ? GGMLType::Q8_0 : GGMLType::Q8_KV;
        for (int M = 9; M <= 16; ++M) {
            for (int li = 0; li < static_cast<int>(std::size(lens)); ++li) {
                const int N = lens[li];
                const bool mqa = (M + li) % 4 != 0;
                const Shape::Mask mask = (M + li) % 3 == 0 ? Shape::Random : Shape::TG;
                const Shape s{mqa, M, 1, 0, N, mask};
                const Data d = make(s, t, seed++);
                const size_t osz = static_cast<size_t>(d.M) * d.Dv;
                std::vector<float> ref(osz), got[2];
                kernels::scalar::attn_flash(d.M, d.N, d.Dk, d.Dv, d.q.data(), d.Dk, d.K(), d.ldk, t, d.V(mqa), d.ldv,
                                            t, d.kv_len.data(), d.scale, ref.data(), d.Dv);
                for (int mode = 0; mode < 2; ++mode) {
                    EnvVar rows16("LATTE_ROWS16", mode == 0 ? "0" : nullptr);
                    got[mode].assign(osz, std::nanf(""));
                    tab.attn_flash(d.M, d.N, d.Dk, d.Dv, d.q.data(), d.Dk, d.K(), d.ldk, t, d.V(mqa), d.ldv, t,
                                   d.kv_len.data(), d.scale, got[mode].data(), d.Dv);
                    const double e = rel_err(got[mode], ref);
                    INFO(type_name(t) << (mode ? " on" : " off") << (mqa ? " mqa" : " mha") << " M=" << M
                                      << " N=" << N << " mask=" << mask << " err=" << e);
                    CHECK(e <= tol(t));
                    worst_ref[ti][mode] = std::max(worst_ref[ti][mode], e);
                }
                const double eo = rel_err(got[1], got[0]);
                INFO(type_name(t) << " on vs off" << (mqa ? " mqa" : " mha") << " M=" << M << " N=" << N
                                  << " err=" << eo);
                CHECK(eo <= tol_pv);
                worst_on[ti] = std::max(worst_on[ti], eo);
                if (!mqa) continue;
                // the TG split: two partials (the second empty when N = 1), merged
                const std::vector<float> merged = merged_halves(tab, d, t);
                const double em = rel_err(merged, got[1]);
                INFO(type_name(t) << " merged partials M=" << M << " N=" << N << " err=" << em);
                CHECK(em <= tol_pv);
                worst_merge[ti] = std::max(worst_merge[ti], em);
            }
        }
    }
    if (const char* v = std::getenv("LATTE_TEST_ERRORS"); v && *v == '1')
        for (int ti = 0; ti < 2; ++ti)
            std::printf("avx2 rows16 %s: vs scalar off %.3g on %.3g; on vs off %.3g; merged partials %.3g\n",
                        ti == 0 ? "q8_0" : "q8_KV", worst_ref[ti][0], worst_ref[ti][1], worst_on[ti], worst_merge[ti]);
}

TEST_CASE("kernels: SIMD shapes the fast path does not take fall back to scalar", "[kernels]") {
    // Dk 40 / Dv 24: not multiples of the vector widths.
    const int M = 3, N = 70, Dk = 40, Dv = 24;
    std::mt19937 rng(3);
    std::normal_distribution<float> nd;
    std::vector<float> q(M * Dk), k(N * Dk), v(N * Dv), ref(M * Dv), got(M * Dv);
    for (auto* vec : {&q, &k, &v})
        for (auto& x : *vec) x = nd(rng);
    const std::vector<int> len = {1, 35, 70};
    kernels::scalar::attn_flash(M, N, Dk, Dv, q.data(), Dk, k.data(), Dk * 4, GGMLType::F32, v.data(), Dv * 4,
                                GGMLType::F32, len.data(), 0.3f, ref.data(), Dv);
    for (Isa isa : kernels::available_isas()) {
        std::fill(got.begin(), got.end(), std::nanf(""));
        kernels::table_for(isa).attn_flash(M, N, Dk, Dv, q.data(), Dk, k.data(), Dk * 4, GGMLType::F32, v.data(),
                                           Dv * 4, GGMLType::F32, len.data(), 0.3f, got.data(), Dv);
        CHECK(rel_err(got, ref) <= 1e-6);
    }
}

TEST_CASE("kernels: dispatch resolves levels by name and refuses what it cannot run", "[kernels]") {
    CHECK(kernels::resolve_table("scalar").isa == Isa::Scalar);
    CHECK(kernels::resolve_table("SCALAR").isa == Isa::Scalar);
    CHECK(kernels::resolve_table("").isa == kernels::best_isa());
    CHECK(kernels::resolve_table("auto").isa == kernels::best_isa());
    REQUIRE_THROWS_WITH(kernels::resolve_table("sse9"), Catch::Contains("sse9") && Catch::Contains("avx512"));
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Amx, Isa::Neon}) {
        INFO(kernels::isa_name(isa));
        if (kernels::isa_available(isa)) {
            CHECK(kernels::resolve_table(kernels::isa_name(isa)).isa == isa);
        } else {
            REQUIRE_THROWS_AS(kernels::resolve_table(kernels::isa_name(isa)), Error);
            REQUIRE_THROWS_WITH(kernels::resolve_table(kernels::isa_name(isa)), Catch::Contains(kernels::isa_name(isa)));
        }
    }
    const auto av = kernels::available_isas();
    REQUIRE(!av.empty());
    CHECK(av.front() == Isa::Scalar);
    // The process-wide table is one of them (whatever LATTE_ISA says for this run).
    CHECK(kernels::isa_available(kernels::active().isa));
}

TEST_CASE("kernels: the table's row quantisers round-trip like the scalar ones", "[kernels]") {
    std::mt19937 rng(9);
    std::normal_distribution<float> nd;
    const int n = 576;
    std::vector<float> x(n), a(n), b(n);
    for (auto& v : x) v = nd(rng);
    for (Isa isa : kernels::available_isas()) {
        const KernelTable& tab = kernels::table_for(isa);
        for (GGMLType t : kTypes) {
            std::vector<uint8_t> qa(row_bytes(t, n)), qb(row_bytes(t, n));
            tab.quantize_row(t, x.data(), qa.data(), n);
            quantize_row(t, x.data(), qb.data(), n);
            tab.dequantize_row(t, qa.data(), a.data(), n);
            dequantize_row(t, qb.data(), b.data(), n);
            INFO(tab.name << " " << type_name(t));
            CHECK(rel_err(a, b) <= 1e-2);  // at most one rounding step apart (ties)
        }
    }
}

TEST_CASE("kernels: q8_KV rows: header, sum, size, not a file type", "[kernels]") {
    const int n = 192;
    std::vector<float> x(n);
    for (int i = 0; i < n; ++i) x[i] = std::sin(0.37f * i) * 3.0f;
    CHECK(row_bytes(GGMLType::Q8_KV, n) == 8 + n);
    CHECK(parse_type("q8_KV") == GGMLType::Q8_KV);
    CHECK(std::string(type_name(GGMLType::Q8_KV)) == "q8_KV");
    CHECK_FALSE(is_known_type(static_cast<uint32_t>(GGMLType::Q8_KV)));
    std::vector<uint8_t> r(row_bytes(GGMLType::Q8_KV, n));
    quantize_row(GGMLType::Q8_KV, x.data(), r.data(), n);
    RowQ8KVHeader h;
    std::memcpy(&h, r.data(), sizeof h);
    int32_t sum = 0;
    for (int i = 0; i < n; ++i) sum += static_cast<int8_t>(r[8 + i]);
    CHECK(h.sum == sum);
    CHECK(h.d == Approx(3.0f / 127.0f).epsilon(1e-2));
    std::vector<float> y(n);
    dequantize_row(GGMLType::Q8_KV, r.data(), y.data(), n);
    for (int i = 0; i < n; ++i) CHECK(std::fabs(y[i] - x[i]) <= 0.5f * h.d + 1e-6f);
}

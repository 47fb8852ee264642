// The weight matmul entries of the kernel table (GemmFn / GemmActSizeFn / GemmActPrepFn,
// kernels/dispatch.h) of every level this build and CPU can run — x86 levels natively, neon under
// qemu-aarch64 — against the scalar reference, in the kernels-only executable (no engine needed;
// tests/test_matmul.cpp checks the same contract in the full build, plus the forward).
// Every weight type: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, and Q8_0_R16 / Q4_0_R16 /
// Q4_K_R / Q5_K_R / Q6_K_R against the scalar result of their un-repacked originals (K-quants: the
// bound below with 256-blocks, the activation's quantisation block). Fresh random weights (rows
// of different magnitudes) and activations (normal, every 7th element ×4: outliers inside blocks); never zeros. Shapes: n_out
// not a multiple of the 4-row tiles (1, 3, 5, 17, 35) or of the row groups (67 rows of 4096),
// n_tok 1..5 and 67 (past a 64-token chunk), float n_in not a multiple of 8 (1, 7, 37, 200).
// Outputs are poisoned with NaN first and the padding past n_out (ldy = n_out + 3) must stay.
// Tolerance per element, |y - y_scalar| <=
//   F32/F16/BF16:  1e-5·Σ|w·x| (the same products in another summation order);
//   quantised:     0.51·Σ_blocks Σ_i |w_i|·amax_b(x)/127 + 1e-5·Σ|w·x|, the bound of dispatch.h:
//                  the activation's per-32-block (K-quants: per-256) int8 quantisation (half a
//                  step per element, d_x = amax/127) plus f32 rounding;
//   scalar itself: against a double-precision dequantise-and-dot, 1e-5·Σ|w·x|.
// And: a result does not depend on how the rows or tokens are split between calls (bit for bit).
// LATTE_TEST_ERRORS=1 prints each level's largest err/bound per type.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <random>
#include <vector>

#include "kernels/dispatch.h"
#include "latte/types.h"

using namespace latte;
using kernels::Isa;
using kernels::KernelTable;

namespace {

constexpr float kGemmPad = 12345.0f;

bool gemm_kquant(GGMLType t) { return t == GGMLType::Q4_K || t == GGMLType::Q5_K || t == GGMLType::Q6_K || is_kr(t); }
bool gemm_quantised(GGMLType t) {
    return t == GGMLType::Q8_0 || t == GGMLType::Q4_0 || t == GGMLType::Q8_0_R16 || t == GGMLType::Q4_0_R16 ||
           gemm_kquant(t);
}
bool gemm_r16(GGMLType t) { return t == GGMLType::Q8_0_R16 || t == GGMLType::Q4_0_R16; }

struct GCase {
    GGMLType type;  // the type the kernel is called with (an r16 type: w holds the repacked rows)
    int64_t n_in, n_out, n_tok;
};

struct GData {
    GGMLType base;             // the file type (type itself unless r16)
    std::vector<uint8_t> w;    // as the kernel gets it (repacked for r16 types)
    std::vector<uint8_t> wb;   // the rows in the base type
    size_t ldw = 0;
    std::vector<float> wf;     // the base rows dequantised
    std::vector<float> x;
};

GData gmake(const GCase& c, std::mt19937& rng) {
    GData d;
    d.base = gemm_r16(c.type) ? r16_base(c.type) : is_kr(c.type) ? kr_base(c.type) : c.type;
    std::normal_distribution<float> nd(0.0f, 1.0f);
    d.ldw = row_bytes(d.base, c.n_in);
    d.wb.resize(d.ldw * c.n_out);
    d.wf.resize(static_cast<size_t>(c.n_in * c.n_out));
    std::vector<float> row(static_cast<size_t>(c.n_in));
    for (int64_t j = 0; j < c.n_out; ++j) {
        const float s = 0.02f * (1.0f + static_cast<float>(j % 5));  // rows of different magnitudes
        for (auto& v : row) {
            v = s * nd(rng);
            if (v == 0.0f) v = s;
        }
        quantize_row(d.base, row.data(), &d.wb[j * d.ldw], c.n_in);
        dequantize_row(d.base, &d.wb[j * d.ldw], &d.wf[static_cast<size_t>(j * c.n_in)], c.n_in);
    }
    if (gemm_r16(c.type)) {
        d.w.resize(d.wb.size());
        repack_r16(d.base, d.wb.data(), c.n_in, c.n_out, d.w.data());
    } else if (is_kr(c.type)) {
        d.w.resize(d.wb.size());
        repack_k(d.base, d.wb.data(), d.w.data(), c.n_in * c.n_out);
    } else {
        d.w = d.wb;
    }
    d.x.resize(static_cast<size_t>(c.n_in * c.n_tok));
    for (size_t i = 0; i < d.x.size(); ++i) {
        float v = nd(rng) * (i % 7 == 0 ? 4.0f : 1.0f);
        d.x[i] = v == 0.0f ? 0.5f : v;
    }
    return d;
}

// Y (n_tok rows of ldy; NaN-poisoned, padding kGemmPad) for weights of type t at w.
std::vector<float> grun(const KernelTable& kt, GGMLType t, const uint8_t* w, size_t ldw, const GCase& c,
                        const GData& d, int64_t ldy) {
    const size_t a_row = kt.gemm_act_size(t, c.n_in);
    std::vector<uint8_t> act(a_row * c.n_tok + 1);
    if (a_row) kt.gemm_act_prep(t, d.x.data(), c.n_in, c.n_in, c.n_tok, act.data());
    std::vector<float> y(static_cast<size_t>(ldy * c.n_tok), kGemmPad);
    for (int64_t tk = 0; tk < c.n_tok; ++tk)
        for (int64_t j = 0; j < c.n_out; ++j) y[tk * ldy + j] = std::numeric_limits<float>::quiet_NaN();
    kt.gemm(t, w, ldw, c.n_in, c.n_out, d.x.data(), c.n_in, a_row ? act.data() : nullptr, c.n_tok, y.data(), ldy);
    return y;
}

// |y - y_ref| allowed for element (tk, j): see the header.
double gbound(const GCase& c, const GData& d, int64_t tk, int64_t j, bool quant) {
    const float* w = &d.wf[static_cast<size_t>(j * c.n_in)];
    const float* x = &d.x[static_cast<size_t>(tk * c.n_in)];
    double sabs = 0.0, q = 0.0;
    for (int64_t i = 0; i < c.n_in; ++i) sabs += std::fabs(static_cast<double>(w[i]) * x[i]);
    const int bs = gemm_kquant(c.type) ? 256 : 32;  // the activation's quantisation block
    if (quant)
        for (int64_t b = 0; b < c.n_in / bs; ++b) {
            double amax = 0.0, sw = 0.0;
            for (int i = 0; i < bs; ++i) {
                amax = std::max(amax, std::fabs(static_cast<double>(x[b * bs + i])));
                sw += std::fabs(static_cast<double>(w[b * bs + i]));
            }
            q += 0.51 * sw * amax / 127.0;
        }
    return q + 1e-5 * sabs + 1e-30;
}

std::vector<GCase> gcases() {
    std::vector<GCase> v;
    for (GGMLType t : {GGMLType::F32, GGMLType::F16, GGMLType::BF16, GGMLType::Q8_0, GGMLType::Q4_0}) {
        std::vector<int64_t> n_ins = {32, 96, 256};
        if (!gemm_quantised(t)) n_ins.insert(n_ins.end(), {1, 7, 37, 200});
        for (int64_t n_in : n_ins)
            for (int64_t n_out : {1, 3, 5, 17, 35})
                for (int64_t n_tok = 1; n_tok <= 5; ++n_tok) v.push_back({t, n_in, n_out, n_tok});
        v.push_back({t, 4096, 67, 2});  // more rows than a row group (~256 KiB) for most types
        v.push_back({t, 64, 9, 67});    // past the 64-token chunk
    }
    for (GGMLType t : {GGMLType::Q8_0_R16, GGMLType::Q4_0_R16}) {
        for (int64_t n_in : {32, 96, 512})
            for (int64_t n_out : {16, 48})
                for (int64_t n_tok = 1; n_tok <= 5; ++n_tok) v.push_back({t, n_in, n_out, n_tok});
        v.push_back({t, 4096, 64, 3});  // several row groups of 16-row groups
        v.push_back({t, 64, 32, 67});
        v.push_back({t, 8256, 48, 70});  // amx: k-blocks of 128, 128 and 2 steps, a tail token tile
    }
    // K-quants and their repacked forms (256-blocks; the reference: scalar on the file type's rows)
    for (GGMLType t : {GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K, GGMLType::Q4_K_R, GGMLType::Q5_K_R,
                       GGMLType::Q6_K_R}) {
        for (int64_t n_in : {256, 768})
            for (int64_t n_out : {1, 3, 5, 17})
                for (int64_t n_tok = 1; n_tok <= 5; ++n_tok) v.push_back({t, n_in, n_out, n_tok});
        v.push_back({t, 4096, 67, 2});
        v.push_back({t, 256, 9, 67});
        v.push_back({t, 4352, 40, 70});  // amx (q4_K_r / q5_K_r): 32 rows on tiles in two k-blocks, 8 on avx512
    }
    return v;
}

bool print_errors() {
    const char* e = std::getenv("LATTE_TEST_ERRORS");
    return e != nullptr && *e != '\0' && *e != '0';
}

}  // namespace

TEST_CASE("kernels gemm: the scalar reference is dequantise-and-dot", "[gemm]") {
    const KernelTable& kt = kernels::table_for(Isa::Scalar);
    std::mt19937 rng(5);
    for (const GCase& c : gcases()) {
        if (c.n_out * c.n_tok > 40 && c.n_in > 32) continue;
        const GData d = gmake(c, rng);
        const auto y = grun(kt, c.type, d.w.data(), d.ldw, c, d, c.n_out);
        for (int64_t tk = 0; tk < c.n_tok; ++tk)
            for (int64_t j = 0; j < c.n_out; ++j) {
                double ref = 0.0;
                for (int64_t i = 0; i < c.n_in; ++i)
                    ref += static_cast<double>(d.wf[static_cast<size_t>(j * c.n_in + i)]) *
                           d.x[static_cast<size_t>(tk * c.n_in + i)];
                INFO(type_name(c.type) << " n_in " << c.n_in << " n_out " << c.n_out << " n_tok " << c.n_tok);
                REQUIRE(std::fabs(y[tk * c.n_out + j] - ref) <= gbound(c, d, tk, j, false));
            }
    }
}

TEST_CASE("kernels gemm: every level matches scalar for every weight type (r16: the original rows)", "[gemm]") {
    const KernelTable& ref_kt = kernels::table_for(Isa::Scalar);
    const auto cases = gcases();
    for (Isa isa : kernels::available_isas()) {
        if (isa == Isa::Scalar) continue;
        const KernelTable& kt = kernels::table_for(isa);
        std::mt19937 rng(1234 + static_cast<int>(isa));
        double worst[9] = {};
        int checked = 0;
        for (const GCase& c : cases) {
            const GData d = gmake(c, rng);
            const int64_t ldy = c.n_out + 3;
            // The reference: scalar on the un-repacked rows (scalar's r16 is bit for bit the same).
            const auto ref = grun(ref_kt, d.base, d.wb.data(), d.ldw, c, d, ldy);
            const auto y = grun(kt, c.type, d.w.data(), d.ldw, c, d, ldy);
            const int ti = [&] {
                switch (c.type) {
                    case GGMLType::F32: return 0;
                    case GGMLType::F16: return 1;
                    case GGMLType::BF16: return 2;
                    case GGMLType::Q8_0: return 3;
                    case GGMLType::Q4_0: return 4;
                    case GGMLType::Q8_0_R16: return 5;
                    case GGMLType::Q4_0_R16: return 6;
                    default: return is_kr(c.type) ? 8 : 7;
                }
            }();
            for (int64_t tk = 0; tk < c.n_tok; ++tk) {
                for (int64_t j = 0; j < c.n_out; ++j) {
                    const float got = y[tk * ldy + j], want = ref[tk * ldy + j];
                    const double err = std::fabs(static_cast<double>(got) - want);
                    const double tol = gbound(c, d, tk, j, gemm_quantised(c.type));
                    if (!(err <= tol)) {
                        INFO(kt.name << " " << type_name(c.type) << " n_in " << c.n_in << " n_out " << c.n_out
                                     << " n_tok " << c.n_tok << " at (t " << tk << ", j " << j << "): " << got
                                     << " vs " << want << ", tol " << tol);
                        REQUIRE(err <= tol);
                    }
                    worst[ti] = std::max(worst[ti], err / tol);
                }
                for (int64_t j = c.n_out; j < ldy; ++j) REQUIRE(y[tk * ldy + j] == kGemmPad);
            }
            ++checked;
        }
        if (print_errors())
            std::printf("gemm %s: max err/bound f32 %.3g f16 %.3g bf16 %.3g q8_0 %.3g q4_0 %.3g q8_0_r16 %.3g "
                        "q4_0_r16 %.3g K-quants %.3g K-quants repacked %.3g\n",
                        kt.name, worst[0], worst[1], worst[2], worst[3], worst[4], worst[5], worst[6], worst[7], worst[8]);
        INFO(kt.name);
        CHECK(checked == static_cast<int>(cases.size()));
    }
}

TEST_CASE("kernels gemm: a result does not depend on how rows and tokens are split", "[gemm]") {
    for (Isa isa : kernels::available_isas()) {
        const KernelTable& kt = kernels::table_for(isa);
        std::mt19937 rng(77);
        for (GGMLType t : {GGMLType::F32, GGMLType::F16, GGMLType::BF16, GGMLType::Q8_0, GGMLType::Q4_0,
                           GGMLType::Q8_0_R16, GGMLType::Q4_0_R16, GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K,
                           GGMLType::Q4_K_R, GGMLType::Q5_K_R, GGMLType::Q6_K_R}) {
            const bool r16 = gemm_r16(t);
            const GCase c{t, gemm_kquant(t) ? 512 : 320, r16 ? 64 : 67, 7};
            const GData d = gmake(c, rng);
            const auto whole = grun(kt, t, d.w.data(), d.ldw, c, d, c.n_out);
            const size_t a_row = kt.gemm_act_size(t, c.n_in);
            std::vector<uint8_t> act(a_row * c.n_tok + 1);
            if (a_row) kt.gemm_act_prep(t, d.x.data(), c.n_in, c.n_in, c.n_tok, act.data());
            // Rows in uneven pieces (r16: whole 16-row groups), each piece's tokens in pieces too.
            const std::vector<int64_t> cuts = r16 ? std::vector<int64_t>{0, 16, 48, 64}
                                                  : std::vector<int64_t>{0, 1, 6, 7, 23, 48, 67};
            const int64_t tcuts[] = {0, 1, 4, 7};
            std::vector<float> y(whole.size(), std::numeric_limits<float>::quiet_NaN());
            for (size_t p = 0; p + 1 < cuts.size(); ++p)
                for (size_t q = 0; q + 1 < std::size(tcuts); ++q) {
                    const int64_t j0 = cuts[p], t0 = tcuts[q];
                    kt.gemm(t, &d.w[j0 * d.ldw], d.ldw, c.n_in, cuts[p + 1] - j0, d.x.data() + t0 * c.n_in, c.n_in,
                            a_row ? act.data() + t0 * a_row : nullptr, tcuts[q + 1] - t0, y.data() + t0 * c.n_out + j0,
                            c.n_out);
                }
            INFO(kt.name << " " << type_name(t));
            for (size_t i = 0; i < y.size(); ++i) REQUIRE(y[i] == whole[i]);
        }
        // PP-sized calls (amx: bf16 tiles from 64 tokens) split as the engine splits them, at multiples
        // of 16 rows: K-quant rows past a call's last whole 16-row group take another path there.
        for (GGMLType t : {GGMLType::Q8_0_R16, GGMLType::Q4_K_R, GGMLType::Q5_K_R}) {
            const GCase c{t, gemm_kquant(t) ? 512 : 320, gemm_r16(t) ? 64 : 72, 70};
            const GData d = gmake(c, rng);
            const auto whole = grun(kt, t, d.w.data(), d.ldw, c, d, c.n_out);
            const size_t a_row = kt.gemm_act_size(t, c.n_in);
            std::vector<uint8_t> act(a_row * c.n_tok + 1);
            if (a_row) kt.gemm_act_prep(t, d.x.data(), c.n_in, c.n_in, c.n_tok, act.data());
            const int64_t cuts[] = {0, 16, 48, c.n_out};
            std::vector<float> y(whole.size(), std::numeric_limits<float>::quiet_NaN());
            for (size_t p = 0; p + 1 < std::size(cuts); ++p)
                kt.gemm(t, &d.w[cuts[p] * d.ldw], d.ldw, c.n_in, cuts[p + 1] - cuts[p], d.x.data(), c.n_in,
                        a_row ? act.data() : nullptr, c.n_tok, y.data() + cuts[p], c.n_out);
            INFO(kt.name << " " << type_name(t) << " (70 tokens)");
            for (size_t i = 0; i < y.size(); ++i) REQUIRE(y[i] == whole[i]);
        }
    }
}

TEST_CASE("kernels gemm: neon's 16-row repacked types give their file type's bits", "[gemm]") {
    // kernels/neon/gemm.cpp accumulates a row the same way in both layouts (a lane per row, block
    // order); the other levels promise only the bound above.
    if (!kernels::isa_available(Isa::Neon)) return;
    const KernelTable& kt = kernels::table_for(Isa::Neon);
    std::mt19937 rng(99);
    for (GGMLType t : {GGMLType::Q8_0_R16, GGMLType::Q4_0_R16})
        for (int64_t n_tok : {1, 2, 3, 5}) {
            const GCase c{t, 160, 48, n_tok};
            const GData d = gmake(c, rng);
            const auto y = grun(kt, t, d.w.data(), d.ldw, c, d, c.n_out);
            const auto yb = grun(kt, d.base, d.wb.data(), d.ldw, c, d, c.n_out);
            INFO(type_name(t) << " n_tok " << n_tok);
            for (size_t i = 0; i < y.size(); ++i) REQUIRE(y[i] == yb[i]);
        }
}

// The weight matmul entries of the kernel table (kernels/dispatch.h, GemmFn) on every ISA level this
// machine can run, against the scalar reference, for every weight type on fresh random data:
// n_in not a multiple of 256 (and, for float types, not of 16 or 8), n_out 1..67, n_tok 1..33.
// Outputs are poisoned (NaN) before each call and the padding past n_out must stay untouched.
// Tolerances (|y - y_scalar| per element):
//   F32/F16/BF16: 1e-5·Σ|w·x| + 1e-30 (same f32 products, another summation order);
//   Q8_0/Q4_0 on SIMD levels: 0.51·Σ_blocks Σ_i|w_i|·amax_b(x)/127 + 1e-5·Σ|w·x| — the activation's
//   per-32-block int8 quantisation (at most half a step per element) plus f32 rounding;
//   scalar itself: against a double-precision dequantise-and-dot, 1e-5·Σ|w·x|.
// A row's result must not depend on how the rows are split between calls (threads).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "latte/types.h"

using namespace latte;
using kernels::Isa;
using kernels::KernelTable;

namespace {

constexpr float kPad = 12345.0f;

struct Case {
    GGMLType type;
    int64_t n_in, n_out, n_tok;
};

struct Data {
    std::vector<uint8_t> w;
    size_t ldw = 0;
    std::vector<float> wf;  // dequantised rows
    std::vector<float> x;
};

Data make(const Case& c, std::mt19937& rng) {
    Data d;
    std::normal_distribution<float> nd(0.0f, 1.0f);
    d.ldw = row_bytes(c.type, c.n_in);
    d.w.resize(d.ldw * c.n_out);
    d.wf.resize(static_cast<size_t>(c.n_in * c.n_out));
    std::vector<float> row(static_cast<size_t>(c.n_in));
    for (int64_t j = 0; j < c.n_out; ++j) {
        const float s = 0.02f * (1.0f + static_cast<float>(j % 5));  // rows of different magnitudes
        for (auto& v : row) v = s * nd(rng);
        quantize_row(c.type, row.data(), &d.w[j * d.ldw], c.n_in);
        dequantize_row(c.type, &d.w[j * d.ldw], &d.wf[static_cast<size_t>(j * c.n_in)], c.n_in);
    }
    d.x.resize(static_cast<size_t>(c.n_in * c.n_tok));
    for (size_t i = 0; i < d.x.size(); ++i) d.x[i] = nd(rng) * (i % 7 == 0 ? 4.0f : 1.0f);  // outliers in blocks
    return d;
}

std::vector<float> run(const KernelTable& kt, const Case& c, const Data& d, int64_t ldy) {
    const size_t a_row = kt.gemm_act_size(c.type, c.n_in);
    std::vector<uint8_t> act(a_row * c.n_tok + 1);
    if (a_row) kt.gemm_act_prep(c.type, d.x.data(), c.n_in, c.n_in, c.n_tok, act.data());
    std::vector<float> y(static_cast<size_t>(ldy * c.n_tok), kPad);
    for (int64_t t = 0; t < c.n_tok; ++t)
        for (int64_t j = 0; j < c.n_out; ++j) y[t * ldy + j] = std::numeric_limits<float>::quiet_NaN();
    kt.gemm(c.type, d.w.data(), d.ldw, c.n_in, c.n_out, d.x.data(), c.n_in, a_row ? act.data() : nullptr, c.n_tok,
            y.data(), ldy);
    return y;
}

bool quantised(GGMLType t) { return t == GGMLType::Q8_0 || t == GGMLType::Q4_0; }

// |y - y_ref| allowed for element (t, j).
double bound(const Case& c, const Data& d, int64_t t, int64_t j, bool simd) {
    const float* w = &d.wf[static_cast<size_t>(j * c.n_in)];
    const float* x = &d.x[static_cast<size_t>(t * c.n_in)];
    double sabs = 0.0, q = 0.0;
    for (int64_t i = 0; i < c.n_in; ++i) sabs += std::fabs(static_cast<double>(w[i]) * x[i]);
    if (simd && quantised(c.type))
        for (int64_t b = 0; b < c.n_in / 32; ++b) {
            double amax = 0.0, sw = 0.0;
            for (int i = 0; i < 32; ++i) {
                amax = std::max(amax, std::fabs(static_cast<double>(x[b * 32 + i])));
                sw += std::fabs(static_cast<double>(w[b * 32 + i]));
            }
            q += 0.51 * sw * amax / 127.0;
        }
    return q + 1e-5 * sabs + 1e-30;
}

std::vector<Case> cases() {
    std::vector<Case> v;
    for (GGMLType t : {GGMLType::F32, GGMLType::F16, GGMLType::BF16, GGMLType::Q8_0, GGMLType::Q4_0}) {
        std::vector<int64_t> n_ins = {32, 96, 544, 2080};  // 2080 = 65 blocks: odd block count, not % 256
        if (!quantised(t)) n_ins.insert(n_ins.end(), {7, 19, 100});
        for (int64_t n_in : n_ins)
            for (int64_t n_out : {1, 3, 4, 5, 17, 67})
                for (int64_t n_tok : {1, 2, 3, 4, 5, 9, 33}) {
                    if (n_in >= 2080 && n_out * n_tok > 200) continue;  // keep the big rows quick
                    v.push_back({t, n_in, n_out, n_tok});
                }
    }
    return v;
}

}  // namespace

TEST_CASE("matmul: the scalar reference is dequantise-and-dot", "[matmul]") {
    std::mt19937 rng(11);
    const KernelTable& kt = kernels::table_for(Isa::Scalar);
    for (const Case& c : cases()) {
        if (c.n_out * c.n_tok > 40) continue;
        const Data d = make(c, rng);
        const auto y = run(kt, c, d, c.n_out);
        for (int64_t t = 0; t < c.n_tok; ++t)
            for (int64_t j = 0; j < c.n_out; ++j) {
                double ref = 0.0;
                for (int64_t i = 0; i < c.n_in; ++i)
                    ref += static_cast<double>(d.wf[static_cast<size_t>(j * c.n_in + i)]) * d.x[static_cast<size_t>(t * c.n_in + i)];
                INFO(type_name(c.type) << " n_in " << c.n_in << " n_out " << c.n_out << " n_tok " << c.n_tok);
                REQUIRE(std::fabs(y[t * c.n_out + j] - ref) <= bound(c, d, t, j, false));
            }
    }
}

TEST_CASE("matmul: every level matches the scalar reference for every weight type and shape", "[matmul]") {
    const KernelTable& ref_kt = kernels::table_for(Isa::Scalar);
    for (Isa isa : kernels::available_isas()) {
        if (isa == Isa::Scalar) continue;
        const KernelTable& kt = kernels::table_for(isa);
        std::mt19937 rng(1234 + static_cast<int>(isa));
        int checked = 0;
        for (const Case& c : cases()) {
            const Data d = make(c, rng);
            const int64_t ldy = c.n_out + 3;
            const auto ref = run(ref_kt, c, d, ldy);
            const auto y = run(kt, c, d, ldy);
            for (int64_t t = 0; t < c.n_tok; ++t) {
                for (int64_t j = 0; j < c.n_out; ++j) {
                    const float got = y[t * ldy + j], want = ref[t * ldy + j];
                    const double err = std::fabs(static_cast<double>(got) - want), tol = bound(c, d, t, j, true);
                    if (!(err <= tol)) {
                        INFO(kt.name << " " << type_name(c.type) << " n_in " << c.n_in << " n_out " << c.n_out
                                     << " n_tok " << c.n_tok << " at (t " << t << ", j " << j << "): " << got << " vs "
                                     << want << ", tol " << tol);
                        REQUIRE(err <= tol);
                    }
                }
                for (int64_t j = c.n_out; j < ldy; ++j) REQUIRE(y[t * ldy + j] == kPad);
            }
            ++checked;
        }
        INFO(kt.name);
        CHECK(checked > 100);
    }
}

TEST_CASE("matmul: a row's result does not depend on how the rows are split", "[matmul]") {
    for (Isa isa : kernels::available_isas()) {
        const KernelTable& kt = kernels::table_for(isa);
        std::mt19937 rng(77);
        for (GGMLType t : {GGMLType::F32, GGMLType::F16, GGMLType::BF16, GGMLType::Q8_0, GGMLType::Q4_0}) {
            const Case c{t, 320, 67, 11};
            const Data d = make(c, rng);
            const auto whole = run(kt, c, d, c.n_out);
            const size_t a_row = kt.gemm_act_size(t, c.n_in);
            std::vector<uint8_t> act(a_row * c.n_tok + 1);
            if (a_row) kt.gemm_act_prep(t, d.x.data(), c.n_in, c.n_in, c.n_tok, act.data());
            std::vector<float> y(static_cast<size_t>(c.n_out * c.n_tok), std::numeric_limits<float>::quiet_NaN());
            for (int64_t j0 : {0, 1, 6, 7, 23, 48}) {
                const int64_t j1 = j0 == 48 ? c.n_out : (j0 == 0 ? 1 : j0 == 1 ? 6 : j0 == 6 ? 7 : j0 == 7 ? 23 : 48);
                kt.gemm(t, &d.w[j0 * d.ldw], d.ldw, c.n_in, j1 - j0, d.x.data(), c.n_in, a_row ? act.data() : nullptr,
                        c.n_tok, y.data() + j0, c.n_out);
            }
            INFO(kt.name << " " << type_name(t));
            for (size_t i = 0; i < y.size(); ++i) REQUIRE(std::memcmp(&y[i], &whole[i], 4) == 0);
        }
    }
}

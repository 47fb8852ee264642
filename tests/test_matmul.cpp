// The weight matmul entries of the kernel table (kernels/dispatch.h, GemmFn) on every ISA level this
// machine can run, against the scalar reference, for every weight type on fresh random data:
// n_in not a multiple of 256 (and, for float types, not of 16 or 8), n_out 1..67, n_tok 1..33.
// Outputs are poisoned (NaN) before each call and the padding past n_out must stay untouched.
// Tolerances (|y - y_scalar| per element):
//   F32/F16/BF16: 1e-5·Σ|w·x| + 1e-30 (same f32 products, another summation order);
//   Q8_0/Q4_0 on SIMD levels: 0.51·Σ_blocks Σ_i|w_i|·amax_b(x)/127 + 1e-5·Σ|w·x| — the activation's
//   per-32-block int8 quantisation (at most half a step per element) plus f32 rounding;
//   Q4_K/Q5_K/Q6_K on SIMD levels: the same with 256-blocks (the activation is quantised per 256);
//   scalar itself: against a double-precision dequantise-and-dot, 1e-5·Σ|w·x|.
// A row's result must not depend on how the rows are split between calls (threads).
// Q8_0_R16 (Q8_0 repacked in 16-row groups at load, issue 7): the repacking round-trips byte for
// byte; scalar gives Q8_0's result bit for bit; every level is within Q8_0's bound of scalar over
// n_out 16..1408, n_in 32..7168, n_tok 1..70; row and token splits give identical bits; and the
// tiny model in q8_0 gives the same logits with ModelParams::repack on and off: max |Δlogit| <=
// 1e-3·max|logit| (the SIMD kernels' f32 summation order differs between the layouts; the int8
// dots and the activation quantisation are the same).
// Q4_K_R/Q5_K_R/Q6_K_R (K-quant blocks repacked at load): in the K-quant shape lists and the split
// test; scalar gives the file type's bits; SIMD within 1e-5·Σ|w·x| of the level's own file-type
// kernel (same int8 dots); a q4_K/q5_K/q6_K model gives the same logits repacked or not (scalar) or
// close (SIMD), and its load report says so.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <filesystem>

#include "kernels/amx/gemm.h"
#include "kernels/dispatch.h"
#include "latte/latte.h"
#include "latte/mkmodel.h"
#include "latte/types.h"

using namespace latte;
using kernels::Isa;
using kernels::KernelTable;

namespace {

// Whether the amx level runs a call on bf16 tiles (kernels/amx/gemm.h); false off x86.
bool amx_tiles(GGMLType t, int64_t n_in, int64_t n_tok) {
#if defined(__x86_64__)
    return kernels::amx::gemm_uses_bf16(t, n_in, n_tok);
#else
    (void)t, (void)n_in, (void)n_tok;
    return false;
#endif
}


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

bool kquant(GGMLType t) { return t == GGMLType::Q4_K || t == GGMLType::Q5_K || t == GGMLType::Q6_K || is_kr(t); }
constexpr GGMLType kKRTypes[] = {GGMLType::Q4_K_R, GGMLType::Q5_K_R, GGMLType::Q6_K_R};
bool quantised(GGMLType t) {
    return t == GGMLType::Q8_0 || t == GGMLType::Q4_0 || t == GGMLType::Q8_0_R16 || t == GGMLType::Q4_0_R16 ||
           kquant(t);
}

// Q8_0_R16 / Q4_0_R16 data: Q8_0 / Q4_0 rows as make() makes them, repacked (wf: those rows
// dequantised).
Data make_r16(const Case& c, std::mt19937& rng) {
    const GGMLType base = r16_base(c.type);
    Data d = make({base, c.n_in, c.n_out, c.n_tok}, rng);
    std::vector<uint8_t> r(d.w.size());
    repack_r16(base, d.w.data(), c.n_in, c.n_out, r.data());
    d.w.swap(r);
    return d;
}
constexpr GGMLType kR16Types[] = {GGMLType::Q8_0_R16, GGMLType::Q4_0_R16};

// |y - y_ref| allowed for element (t, j).
double bound(const Case& c, const Data& d, int64_t t, int64_t j, bool simd) {
    const float* w = &d.wf[static_cast<size_t>(j * c.n_in)];
    const float* x = &d.x[static_cast<size_t>(t * c.n_in)];
    double sabs = 0.0, q = 0.0;
    for (int64_t i = 0; i < c.n_in; ++i) sabs += std::fabs(static_cast<double>(w[i]) * x[i]);
    if (simd && quantised(c.type)) {
        const int bs = kquant(c.type) ? 256 : 32;  // the activation's quantisation block
        for (int64_t b = 0; b < c.n_in / bs; ++b) {
            double amax = 0.0, sw = 0.0;
            for (int i = 0; i < bs; ++i) {
                amax = std::max(amax, std::fabs(static_cast<double>(x[b * bs + i])));
                sw += std::fabs(static_cast<double>(w[b * bs + i]));
            }
            q += 0.51 * sw * amax / 127.0;
        }
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
    // K-quants (256-blocks): 1, 2 and 9 blocks per row
    for (GGMLType t : {GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K, GGMLType::Q4_K_R, GGMLType::Q5_K_R, GGMLType::Q6_K_R})
        for (int64_t n_in : {256, 512, 2304})
            for (int64_t n_out : {1, 3, 4, 5, 17, 67})
                for (int64_t n_tok : {1, 2, 3, 4, 5, 9, 33}) {
                    if (n_in >= 2304 && n_out * n_tok > 200) continue;
                    v.push_back({t, n_in, n_out, n_tok});
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
        for (GGMLType t : {GGMLType::F32, GGMLType::F16, GGMLType::BF16, GGMLType::Q8_0, GGMLType::Q4_0, GGMLType::Q4_K,
                           GGMLType::Q5_K, GGMLType::Q6_K, GGMLType::Q4_K_R, GGMLType::Q5_K_R, GGMLType::Q6_K_R}) {
            const Case c{t, kquant(t) ? 768 : 320, 67, 11};
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

TEST_CASE("matmul: 16-row repacking round-trips and has the documented layout", "[matmul]") {
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> byte(0, 255);
    for (GGMLType rt : kR16Types) {
        const GGMLType base = r16_base(rt);
        const bool q8 = base == GGMLType::Q8_0;
        const size_t bs = q8 ? 34 : 18, qbytes = bs - 2;
        REQUIRE(r16_type(base) == rt);
        for (int64_t n_out : {16, 48, 1408})
            for (int64_t n_in : {32, 96, 2080, 7168}) {
                if (n_out * n_in > 1408 * 2080) continue;
                const size_t ldw = row_bytes(base, n_in);
                REQUIRE(row_bytes(rt, n_in) == ldw);
                std::vector<uint8_t> src(ldw * n_out), packed(src.size()), back(src.size(), 0xAB);
                for (auto& b : src) b = static_cast<uint8_t>(byte(rng));  // any bytes, -128 and odd scales included
                repack_r16(base, src.data(), n_in, n_out, packed.data());
                unpack_r16(base, packed.data(), n_in, n_out, back.data());
                INFO(type_name(rt) << " n_out " << n_out << " n_in " << n_in);
                REQUIRE(back == src);
                // row j, block b, quant byte i: group j/16, at 16·bs·b: scales, then byte i of row j%16 in
                // vector i/4 (q8_0: flipped to u8)
                for (int k = 0; k < 200; ++k) {
                    const int64_t j = rng() % n_out, b = rng() % (n_in / 32), i = rng() % static_cast<int64_t>(qbytes);
                    const uint8_t* g = packed.data() + (j / 16) * 16 * ldw + b * 16 * bs;
                    const uint8_t* blk = src.data() + j * ldw + b * bs;
                    REQUIRE(g[2 * (j % 16)] == blk[0]);
                    REQUIRE(g[2 * (j % 16) + 1] == blk[1]);
                    REQUIRE(g[32 + (i / 4) * 64 + (j % 16) * 4 + i % 4] == static_cast<uint8_t>(blk[2 + i] ^ (q8 ? 0x80 : 0)));
                }
            }
        std::vector<uint8_t> buf(34 * 17);
        REQUIRE_THROWS(repack_r16(base, buf.data(), 32, 17, buf.data()));
        REQUIRE_FALSE(is_known_type(static_cast<uint32_t>(rt)));
    }
    std::vector<uint8_t> q(34 * 16), p(q.size()), p2(q.size());
    for (auto& b : q) b = static_cast<uint8_t>(byte(rng));
    repack_q8_0_r16(q.data(), 32, 16, p.data());
    repack_r16(GGMLType::Q8_0, q.data(), 32, 16, p2.data());
    REQUIRE(p == p2);
    REQUIRE_THROWS(repack_r16(GGMLType::F16, q.data(), 32, 16, p.data()));
    REQUIRE(std::string(type_name(GGMLType::Q8_0_R16)) == "q8_0_r16");
    REQUIRE(std::string(type_name(GGMLType::Q4_0_R16)) == "q4_0_r16");
}

TEST_CASE("matmul: 16-row repacked types on scalar are their file type bit for bit", "[matmul]") {
    const KernelTable& kt = kernels::table_for(Isa::Scalar);
    std::mt19937 rng(6);
    for (GGMLType rt : kR16Types)
        for (const Case& c : {Case{rt, 96, 48, 3}, Case{rt, 2080, 16, 5}}) {
            const Data r = make_r16(c, rng);
            Data q = r;
            unpack_r16(r16_base(rt), r.w.data(), c.n_in, c.n_out, q.w.data());
            const auto yr = run(kt, c, r, c.n_out);
            const auto yq = run(kt, {r16_base(rt), c.n_in, c.n_out, c.n_tok}, q, c.n_out);
            REQUIRE(std::memcmp(yr.data(), yq.data(), yr.size() * 4) == 0);
        }
}

TEST_CASE("matmul: 16-row repacked types on every level match the scalar reference", "[matmul]") {
    const KernelTable& ref_kt = kernels::table_for(Isa::Scalar);
    std::vector<Case> cs;
    for (GGMLType rt : kR16Types)
        for (int64_t n_out : {16, 48, 1408})
            for (int64_t n_in : {32, 96, 544, 2080, 7168})
                for (int64_t n_tok : {1, 2, 3, 4, 5, 7, 13, 70, 131})
                    if (n_out * n_in * n_tok <= 30'000'000 || (n_out == 1408 && n_in == 7168 && n_tok == 1))
                        cs.push_back({rt, n_in, n_out, n_tok});
    for (Isa isa : kernels::available_isas()) {
        if (isa == Isa::Scalar) continue;
        const KernelTable& kt = kernels::table_for(isa);
        std::mt19937 rng(4321 + static_cast<int>(isa));
        for (const Case& c : cs) {
            const Data d = make_r16(c, rng);
            const int64_t ldy = c.n_out + 5;
            const auto ref = run(ref_kt, c, d, ldy);
            const auto y = run(kt, c, d, ldy);
            // and the level's own Q8_0 kernel on the unpacked rows: the same int8 dots and activation,
            // only the f32 summation order differs
            Data dq = d;
            unpack_r16(r16_base(c.type), d.w.data(), c.n_in, c.n_out, dq.w.data());
            const Case cq{r16_base(c.type), c.n_in, c.n_out, c.n_tok};
            const auto yq = run(kt, cq, dq, ldy);
            // (not where amx runs the call on bf16 tiles: that is another rounding, checked against
            // scalar below and in tests/test_amx_emulated.cpp)
            const bool tiles = isa == Isa::Amx && amx_tiles(c.type, c.n_in, c.n_tok);
            for (int64_t t = 0; t < (tiles ? 0 : c.n_tok); t += std::max<int64_t>(1, c.n_tok / 3))
                for (int64_t j = 0; j < c.n_out; j += std::max<int64_t>(1, c.n_out / 40)) {
                    const double err = std::fabs(static_cast<double>(y[t * ldy + j]) - yq[t * ldy + j]);
                    INFO(kt.name << " " << type_name(c.type) << " vs its file type, n_in " << c.n_in << " n_out " << c.n_out << " t " << t << " j " << j);
                    REQUIRE(err <= bound(cq, dq, t, j, false));
                }
            for (int64_t t = 0; t < c.n_tok; ++t) {
                for (int64_t j = 0; j < c.n_out; ++j) {
                    const float got = y[t * ldy + j], want = ref[t * ldy + j];
                    const double err = std::fabs(static_cast<double>(got) - want);
                    if (!(err <= 0.0) || t == 0) {  // bound() is O(n_in): only where needed, and on row 0
                        const double tol = bound(c, d, t, j, true);
                        if (!(err <= tol)) {
                            INFO(kt.name << " " << type_name(c.type) << " n_in " << c.n_in << " n_out " << c.n_out << " n_tok " << c.n_tok
                                         << " at (t " << t << ", j " << j << "): " << got << " vs " << want << ", tol "
                                         << tol);
                            REQUIRE(err <= tol);
                        }
                    }
                }
                for (int64_t j = c.n_out; j < ldy; ++j) REQUIRE(y[t * ldy + j] == kPad);
            }
        }
    }
}

TEST_CASE("matmul: 16-row repacked results do not depend on the row or token split", "[matmul]") {
    for (Isa isa : kernels::available_isas())
        for (GGMLType rt : kR16Types) {
            const KernelTable& kt = kernels::table_for(isa);
            std::mt19937 rng(78);
            const Case c{rt, 544, 112, 23};
            const Data d = make_r16(c, rng);
            const auto whole = run(kt, c, d, c.n_out);
            const size_t a_row = kt.gemm_act_size(c.type, c.n_in);
            std::vector<uint8_t> act(a_row * c.n_tok + 1);
            if (a_row) kt.gemm_act_prep(c.type, d.x.data(), c.n_in, c.n_in, c.n_tok, act.data());
            std::vector<float> y(static_cast<size_t>(c.n_out * c.n_tok), std::numeric_limits<float>::quiet_NaN());
            // amx: a call of 64 or more tokens runs on bf16 tiles, fewer on avx512's int8 dots
            // (kernels/dispatch.h): every piece here (and the whole's 23) is below that.
            const int64_t rs[] = {0, 16, 48, 96, 112};
            const std::vector<int64_t> ts = {0, 1, 4, 5, 11, 23};
            for (size_t ti = 0; ti + 1 < ts.size(); ++ti)
                REQUIRE(amx_tiles(rt, c.n_in, ts[ti + 1] - ts[ti]) == amx_tiles(rt, c.n_in, c.n_tok));
            for (int ri = 0; ri + 1 < 5; ++ri)
                for (size_t ti = 0; ti + 1 < ts.size(); ++ti) {
                    const int64_t j0 = rs[ri], t0 = ts[ti];
                    kt.gemm(c.type, &d.w[j0 * d.ldw], d.ldw, c.n_in, rs[ri + 1] - j0, d.x.data() + t0 * c.n_in, c.n_in,
                            a_row ? act.data() + t0 * a_row : nullptr, ts[ti + 1] - t0, y.data() + t0 * c.n_out + j0,
                            c.n_out);
                }
            INFO(kt.name << " " << type_name(rt));
            for (size_t i = 0; i < y.size(); ++i) REQUIRE(std::memcmp(&y[i], &whole[i], 4) == 0);
        }
}

TEST_CASE("matmul: repacked K-quants (q4_K_r, q5_K_r, q6_K_r): scalar is the file type bit for bit, SIMD its own "
          "file-type kernel up to f32 rounding", "[matmul]") {
    // The repacked rows of make()'s K-quant rows (make() quantises to the repacked type directly:
    // the file type's quantisation, repacked; types.cpp's quantize_row).
    std::mt19937 rng(8);
    std::vector<Case> cs;
    for (GGMLType rt : kKRTypes)
        for (int64_t n_in : {256, 2304, 7168})
            for (int64_t n_out : {1, 5, 67})
                for (int64_t n_tok : {1, 2, 3, 4, 5, 13})
                    if (n_in * n_out * n_tok <= 3'000'000) cs.push_back({rt, n_in, n_out, n_tok});
    for (Isa isa : kernels::available_isas()) {
        const KernelTable& kt = kernels::table_for(isa);
        for (const Case& c : cs) {
            const Data r = make(c, rng);
            Data f = r;  // the same rows in the file type
            unpack_k(c.type, r.w.data(), f.w.data(), c.n_in * c.n_out);
            const Case cf{kr_base(c.type), c.n_in, c.n_out, c.n_tok};
            const auto yr = run(kt, c, r, c.n_out);
            const auto yf = run(kt, cf, f, c.n_out);
            INFO(kt.name << " " << type_name(c.type) << " n_in " << c.n_in << " n_out " << c.n_out << " n_tok " << c.n_tok);
            if (isa == Isa::Scalar) {
                REQUIRE(std::memcmp(yr.data(), yf.data(), yr.size() * 4) == 0);
                continue;
            }
            // the same activation quantisation and exact int32 block sums; only the f32 order differs
            for (int64_t t = 0; t < c.n_tok; ++t)
                for (int64_t j = 0; j < c.n_out; ++j) {
                    const double err = std::fabs(static_cast<double>(yr[t * c.n_out + j]) - yf[t * c.n_out + j]);
                    if (!(err <= 0.0)) REQUIRE(err <= bound(cf, f, t, j, false));
                }
        }
    }
}

TEST_CASE("matmul: the forward gives the same logits with q8_0/q4_0 weights repacked or not", "[matmul]") {
    namespace fs = std::filesystem;
    for (GGMLType wt : {GGMLType::Q8_0, GGMLType::Q4_0}) {
        MkModelSpec spec = mkmodel_preset("tiny");
        spec.type = wt;
        spec.n_layer = 2;
        spec.n_expert = 0;  // dense: a ~1e-6 difference can flip an expert choice, which is not what this checks
        spec.n_expert_used = spec.n_expert_shared = 0;
        spec.n_expert_groups = spec.n_group_used = 1;
        const fs::path dir = fs::path(LATTE_BUILD_DIR) / "test-models";
        fs::create_directories(dir);
        const fs::path path = dir / (std::string("r16-") + type_name(wt) + "-" + std::to_string(::getpid()) + ".gguf");
        mkmodel_write(spec, path.string(), false, 1);
        struct Rm { fs::path p; ~Rm() { std::error_code ec; fs::remove(p, ec); } } rm{path};
        std::vector<float> logits[2];
        for (int rp = 0; rp < 2; ++rp) {
            ModelParams mp;
            mp.repack = rp == 1;
            // repack off: mapped; on: mapped (a copy in anonymous memory), then read (in place)
            for (int mm = 0; mm < (rp ? 2 : 1); ++mm) {
                mp.use_mmap = mm == 0;
                auto m = Model::load(path.string(), mp);
                const std::string rep = m->load_report();
                INFO(rep);
                REQUIRE((rep.find("to 16-row groups") != std::string::npos) == (rp == 1));
                ContextParams cp;
                cp.n_ctx = 64;
                cp.n_threads = 2;
                // a fixed path: -mla auto (the default) rates attn_kv_b in its own type, repacked or
                // not, so the two loads could take different paths (seen once in CI at scalar)
                cp.mla = MlaMode::Hybrid;
                Context ctx(m, cp);
                std::vector<int32_t> ids;
                for (int i = 0; i < 21; ++i) ids.push_back(3 + (i * 37) % 1000);
                ctx.decode(ids, true);
                std::vector<float> l;
                for (int i = 0; i < 21; ++i) {
                    const float* p = ctx.logits(i);
                    l.insert(l.end(), p, p + m->hparams().n_vocab);
                }
                if (rp == 1 && mm == 1) REQUIRE(l == logits[1]);  // in place or in anonymous memory: the same bytes
                else logits[rp] = l;
            }
        }
        double num = 0.0, den = 0.0;
        for (size_t i = 0; i < logits[0].size(); ++i) {
            REQUIRE(std::isfinite(logits[1][i]));
            num = std::max(num, static_cast<double>(std::fabs(logits[0][i] - logits[1][i])));
            den = std::max(den, static_cast<double>(std::fabs(logits[0][i])));
        }
        INFO(type_name(wt) << ", active level " << kernels::active().name << ": max |dlogit| " << num << ", max |logit| "
                           << den);
        if (kernels::active().isa == Isa::Scalar) {
            REQUIRE(num == 0.0);  // scalar de-interleaves to the file type: the same operations
        } else {
            // SIMD: the int8 dots are the same, the f32 sums of the blocks are in another order (~1e-6),
            // and the activation quantisation is a step function: a ~1e-6 difference flips a rounding,
            // which moves this random model's logits by ~1% (measured 1.2% at avx512, 21 tokens), as
            // test_forward's "quantised weight files" bound says; the same 5e-2 of max |logit| here.
            REQUIRE(num <= 5e-2 * den);
        }
    }
}

TEST_CASE("matmul: K-quant model files (q4_K, q5_K, q6_K) load and run", "[matmul]") {
    namespace fs = std::filesystem;
    std::vector<float> ref;  // the f32 file's logits
    for (GGMLType wt : {GGMLType::F32, GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K}) {
        MkModelSpec spec = mkmodel_preset("tiny");
        spec.type = wt;
        spec.n_layer = 2;
        const fs::path dir = fs::path(LATTE_BUILD_DIR) / "test-models";
        fs::create_directories(dir);
        const fs::path path = dir / (std::string("kq-") + type_name(wt) + "-" + std::to_string(::getpid()) + ".gguf");
        mkmodel_write(spec, path.string(), false, 1);
        struct Rm { fs::path p; ~Rm() { std::error_code ec; fs::remove(p, ec); } } rm{path};
        ModelParams mp_off;
        mp_off.repack = false;
        auto m = Model::load(path.string());
        auto m_off = Model::load(path.string(), mp_off);  // the file's layout (q4_K ...) for comparison
        if (wt != GGMLType::F32) {
            const std::string rep = m->load_report();
            INFO(rep);
            REQUIRE(rep.find("K-quant matrices") != std::string::npos);
            REQUIRE(m_off->load_report().find("K-quant matrices") == std::string::npos);
        }
        // rows of 256k elements are in the K-quant, the others (attn_q_b: rows of q_lora_rank 128) in q8_0
        bool any_k = false;
        for (const auto& [name, ne] : mkmodel_tensor_list(spec)) {
            const GGMLType t = mkmodel_tensor_type(spec, name, ne);
            if (ne.size() > 1 && name.find("ffn_gate_inp") == std::string::npos)
                REQUIRE(t == (wt == GGMLType::F32 ? GGMLType::F32 : ne[0] % 256 == 0 ? wt : GGMLType::Q8_0));
            any_k |= t == wt;
        }
        REQUIRE(any_k);
        auto logits_of = [&](const std::shared_ptr<Model>& mod) {
            ContextParams cp;
            cp.n_ctx = 64;
            cp.n_threads = 2;
            // a fixed path: -mla auto (the default) rates attn_kv_b in its own type, repacked or not,
            // so the two files could take different paths and differ by more than the repacking
            cp.mla = MlaMode::Hybrid;
            Context ctx(mod, cp);
            std::vector<int32_t> ids;
            for (int i = 0; i < 9; ++i) ids.push_back(3 + (i * 37) % 1000);
            ctx.decode(ids, true);
            std::vector<float> l;
            for (int i = 0; i < 9; ++i) {
                const float* p = ctx.logits(i);
                l.insert(l.end(), p, p + mod->hparams().n_vocab);
            }
            return l;
        };
        const std::vector<float> l = logits_of(m), l_off = logits_of(m_off);
        for (float v : l) REQUIRE(std::isfinite(v));
        {  // repacked (q4_K_r ...) against the file layout: scalar bit for bit; SIMD the f32 order and
           // a flipped activation rounding at most (as the q8_0/q4_0 repacking test above)
            double num = 0.0, den = 0.0;
            for (size_t i = 0; i < l.size(); ++i) {
                num = std::max(num, static_cast<double>(std::fabs(l[i] - l_off[i])));
                den = std::max(den, static_cast<double>(std::fabs(l_off[i])));
            }
            INFO(type_name(wt) << " repacked vs not at " << kernels::active().name << ": max |dlogit| " << num);
            if (kernels::active().isa == Isa::Scalar || wt == GGMLType::F32) REQUIRE(num == 0.0);
            else REQUIRE(num <= 5e-2 * den);
        }
        if (wt == GGMLType::F32) {
            ref = l;
            continue;
        }
        // the quantised weights are the f32 file's values rounded: the logits follow, the error halving
        // with each bit (measured at avx2 and scalar: 0.25, 0.13, 0.067 for q4_K, q5_K, q6_K; a misread
        // layout gives unrelated logits, ~1.4)
        double num = 0.0, den = 0.0;
        for (size_t i = 0; i < l.size(); ++i) {
            num += (l[i] - ref[i]) * (l[i] - ref[i]);
            den += ref[i] * ref[i];
        }
        INFO(type_name(wt) << " at " << kernels::active().name << ": rms(dlogit)/rms(logit) " << std::sqrt(num / den));
        CHECK(std::sqrt(num / den) < (wt == GGMLType::Q4_K ? 0.4 : wt == GGMLType::Q5_K ? 0.2 : 0.1));
    }
}

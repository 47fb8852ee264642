// The AMX bf16-tile weight matmul (kernels/amx/gemm.cpp) on any x86 CPU: this file compiles that
// kernel a second time with LATTE_AMX_EMULATE (kernels/amx/tile.h: a scalar model of the eight
// tile registers and TDPBF16PS), into namespace latte::kernels::amx_emu, so its data layout — the
// weight unpacking to bf16 B tiles, the 2 × 2 tile blocking, token tails, C stores into Y — is
// checked where there is no AMX. Where the CPU has AMX the real kernel (namespace amx) runs the
// same cases too; it also runs through the kernel table in tests/test_kernels_gemm.cpp and
// tests/test_matmul.cpp against the scalar reference.
//
// Reference: Σ_i bf16(w_ji)·bf16(x_ti) in double, w the dequantised weight (q·d exact) rounded to
// bf16 (nearest even) as the kernel does. Tolerance |y - ref| <= 1e-5·Σ|w·x| (f32 sums in another
// order). Fresh random weights and activations (never zero); shapes cover 1 or 2 row groups per
// panel, token counts below, at and past one and two 16-row tiles, and strides with padding.
#define LATTE_AMX_EMULATE 1
#include "kernels/amx/gemm.cpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/dispatch.h"

namespace {

using latte::GGMLType;

struct AmxCase {
    int64_t n_in, n_out, n_tok;
};

float bf16r(float f) { return latte::bf16_to_fp32(latte::fp32_to_bf16(f)); }

// base Q8_0 / Q4_0 (repacked to r16 groups) or Q4_K / Q5_K (repacked row by row to q4_K_r / q5_K_r).
void check_bf16_gemm(GGMLType base, const AmxCase& c, std::mt19937& rng, bool real) {
    const bool kq = base == GGMLType::Q4_K || base == GGMLType::Q5_K;
    const GGMLType rt = kq                        ? latte::kr_type(base)
                        : base == GGMLType::Q8_0 ? GGMLType::Q8_0_R16
                                                 : GGMLType::Q4_0_R16;
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const size_t ldw = latte::row_bytes(base, c.n_in);
    std::vector<uint8_t> wb(ldw * c.n_out), w(ldw * c.n_out);
    std::vector<float> row(c.n_in), wf(static_cast<size_t>(c.n_in * c.n_out));
    for (int64_t j = 0; j < c.n_out; ++j) {
        const float mag = 0.02f * static_cast<float>(1 + j % 5);  // rows of different magnitudes
        for (auto& v : row) v = mag * nd(rng);
        latte::quantize_row(base, row.data(), wb.data() + j * ldw, c.n_in);
        latte::dequantize_row(base, wb.data() + j * ldw, wf.data() + j * c.n_in, c.n_in);
    }
    if (kq) latte::repack_k(base, wb.data(), w.data(), c.n_in * c.n_out);
    else latte::repack_r16(base, wb.data(), c.n_in, c.n_out, w.data());
    const size_t lda = ((2 * c.n_in + 63) & ~int64_t{63}) + 64;  // padded, not the row length
    std::vector<uint8_t> xb(lda * c.n_tok + 64);
    std::vector<float> x(static_cast<size_t>(c.n_in * c.n_tok));
    for (size_t i = 0; i < x.size(); ++i) x[i] = nd(rng) * (i % 7 == 0 ? 4.0f : 1.0f);
    const int64_t ldy = c.n_out + 3;
    std::vector<float> y(static_cast<size_t>(ldy * c.n_tok), std::numeric_limits<float>::quiet_NaN());
    for (int64_t t = 0; t < c.n_tok; ++t) {
        auto* xr = reinterpret_cast<uint16_t*>(xb.data() + t * lda);
        if (real) latte::kernels::amx::to_bf16(x.data() + t * c.n_in, c.n_in, xr);
        else latte::kernels::amx_emu::to_bf16(x.data() + t * c.n_in, c.n_in, xr);
        for (int64_t i = 0; i < c.n_in; ++i) REQUIRE(xr[i] == latte::fp32_to_bf16(x[t * c.n_in + i]));
        for (int64_t j = c.n_out; j < ldy; ++j) y[t * ldy + j] = 12345.0f;
    }
    if (real)
        latte::kernels::amx::gemm_bf16(rt, w.data(), ldw, c.n_in, c.n_out, xb.data(), lda, c.n_tok, y.data(), ldy);
    else
        latte::kernels::amx_emu::gemm_bf16(rt, w.data(), ldw, c.n_in, c.n_out, xb.data(), lda, c.n_tok, y.data(),
                                           ldy);
    for (int64_t t = 0; t < c.n_tok; ++t) {
        for (int64_t j = 0; j < c.n_out; ++j) {
            double ref = 0.0, sabs = 0.0;
            for (int64_t i = 0; i < c.n_in; ++i) {
                const double p = static_cast<double>(bf16r(wf[j * c.n_in + i])) * bf16r(x[t * c.n_in + i]);
                ref += p;
                sabs += std::fabs(p);
            }
            const float got = y[t * ldy + j];
            INFO(latte::type_name(rt) << (real ? " amx" : " emulated") << " n_in " << c.n_in << " n_out " << c.n_out
                                      << " n_tok " << c.n_tok << " at (t " << t << ", j " << j << "): " << got
                                      << " vs " << ref);
            REQUIRE(std::fabs(got - ref) <= 1e-5 * sabs + 1e-30);
        }
        for (int64_t j = c.n_out; j < ldy; ++j) REQUIRE(y[t * ldy + j] == 12345.0f);
    }
}

const AmxCase kCases[] = {{32, 16, 1},  {64, 32, 15},  {96, 48, 16},  {64, 32, 17},  {128, 16, 33},
                          {256, 48, 50}, {512, 80, 31}, {2048, 32, 20}, {160, 64, 64},
                          // n_in 8192: two 4096-input k-blocks (kernels/amx/gemm.cpp) of 128-row chunks;
                          // 70 tokens end in a 6-token tail tile
                          {8192, 80, 70},
                          // 10944 inputs (the dense down projection): k-blocks of 128, 128 and 86 steps;
                          // 160 rows: a 128-row chunk and a 32-row one
                          {10944, 160, 67}};

// q4_K_r / q5_K_r: n_in a multiple of 256, n_out of 16 (gemm_bf16's contract); 4352 inputs are a
// 128-step k-block and an 8-step one
const AmxCase kKCases[] = {{256, 16, 1}, {512, 48, 17}, {256, 32, 64}, {4352, 48, 70}, {1024, 160, 40}};

}  // namespace

TEST_CASE("amx bf16 gemm, emulated tiles: q8_0_r16 / q4_0_r16 against the bf16 reference", "[gemm][amx]") {
    std::mt19937 rng(4242);
    for (GGMLType base : {GGMLType::Q8_0, GGMLType::Q4_0})
        for (const AmxCase& c : kCases) check_bf16_gemm(base, c, rng, false);
}

TEST_CASE("amx bf16 gemm, emulated tiles: q4_K_r / q5_K_r against the bf16 reference", "[gemm][amx]") {
    std::mt19937 rng(4343);
    for (GGMLType base : {GGMLType::Q4_K, GGMLType::Q5_K})
        for (const AmxCase& c : kKCases) check_bf16_gemm(base, c, rng, false);
}

TEST_CASE("amx bf16 gemm, real tiles: the same cases where the CPU has AMX", "[gemm][amx]") {
    if (!latte::kernels::isa_available(latte::kernels::Isa::Amx)) {
        WARN("skipped: this CPU (or OS) has no AMX; the emulated test above checks the kernel's layout");
        return;
    }
    std::mt19937 rng(4242);
    for (GGMLType base : {GGMLType::Q8_0, GGMLType::Q4_0})
        for (const AmxCase& c : kCases) check_bf16_gemm(base, c, rng, true);
    std::mt19937 rng_k(4343);
    for (GGMLType base : {GGMLType::Q4_K, GGMLType::Q5_K})
        for (const AmxCase& c : kKCases) check_bf16_gemm(base, c, rng_k, true);
}

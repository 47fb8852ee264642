// Element types: half/bfloat conversions against the CPU's own converters, and the block
// formats' round trips with their stated error bounds.
#include <immintrin.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "latte/error.h"
#include "latte/types.h"

using namespace latte;

namespace {

__attribute__((target("f16c"))) uint16_t hw_fp32_to_fp16(float f) {
    return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float hw_fp16_to_fp32(uint16_t h) { return _cvtsh_ss(h); }

}  // namespace

TEST_CASE("types: fp16 conversions equal the CPU's F16C instructions", "[types]") {
    if (!__builtin_cpu_supports("f16c")) return;  // every x86 this project targets has it
    for (uint32_t h = 0; h < 65536; ++h) {
        const float a = fp16_to_fp32(static_cast<uint16_t>(h)), b = hw_fp16_to_fp32(static_cast<uint16_t>(h));
        if (std::isnan(b)) CHECK(std::isnan(a));
        else CHECK(std::memcmp(&a, &b, 4) == 0);
    }
    std::mt19937 rng(1);
    std::uniform_int_distribution<uint32_t> bits;
    int mismatches = 0;
    for (int i = 0; i < 2000000; ++i) {
        float f;
        const uint32_t u = bits(rng);
        std::memcpy(&f, &u, 4);
        if (std::isnan(f)) continue;
        if (fp32_to_fp16(f) != hw_fp32_to_fp16(f)) ++mismatches;
    }
    for (float f : {0.0f, -0.0f, 65504.0f, 65520.0f, 65519.99f, 6.1035156e-05f, 5.9604645e-08f, 2.9802322e-08f,
                    2.9802326e-08f, 1e-10f, INFINITY, -INFINITY})
        CHECK(fp32_to_fp16(f) == hw_fp32_to_fp16(f));
    CHECK(mismatches == 0);
}

TEST_CASE("types: bf16 rounds to nearest even", "[types]") {
    CHECK(fp32_to_bf16(1.0f) == 0x3f80);
    CHECK(bf16_to_fp32(0x3f80) == 1.0f);
    // 1 + 2^-8 is halfway between two bf16 values: rounds to the even one (1.0)
    CHECK(fp32_to_bf16(1.00390625f) == 0x3f80);
    CHECK(fp32_to_bf16(1.01171875f) == 0x3f82);  // 1 + 3·2^-8: halfway, rounds up to even
    CHECK(std::isnan(bf16_to_fp32(fp32_to_bf16(NAN))));
    std::mt19937 rng(2);
    std::normal_distribution<float> nd(0.0f, 10.0f);
    for (int i = 0; i < 100000; ++i) {
        const float f = nd(rng);
        CHECK(std::fabs(bf16_to_fp32(fp32_to_bf16(f)) - f) <= std::fabs(f) * (1.0f / 256.0f));
    }
}

TEST_CASE("types: q8_0 and q4_0 round trips stay within their block error", "[types]") {
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int n = 32 * 37;
    std::vector<float> x(n), y(n);
    for (auto& v : x) v = nd(rng) * (1.0f + static_cast<float>(&v - x.data()) / 32.0f);
    for (GGMLType t : {GGMLType::Q8_0, GGMLType::Q4_0, GGMLType::F16, GGMLType::BF16, GGMLType::F32}) {
        std::vector<uint8_t> buf(row_bytes(t, n));
        quantize_row(t, x.data(), buf.data(), n);
        dequantize_row(t, buf.data(), y.data(), n);
        for (int b = 0; b < n / 32; ++b) {
            float amax = 0.0f;
            for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
            // q8_0: half a step of amax/127 plus the fp16 rounding of the scale; q4_0: half a
            // step of amax/8 (and the asymmetric end step).
            const float bound = t == GGMLType::Q8_0   ? amax / 127.0f * 0.5f + amax * 1e-3f
                                : t == GGMLType::Q4_0 ? amax / 8.0f + amax * 1e-3f
                                : t == GGMLType::F16  ? amax * 1e-3f
                                : t == GGMLType::BF16 ? amax * 4e-3f
                                                      : 0.0f;
            for (int j = 0; j < 32; ++j) {
                INFO(type_name(t) << " block " << b << " j " << j);
                CHECK(std::fabs(y[b * 32 + j] - x[b * 32 + j]) <= bound);
            }
        }
    }
}

TEST_CASE("types: sizes, names and errors", "[types]") {
    CHECK(row_bytes(GGMLType::Q8_0, 576) == 18 * 34);
    CHECK(row_bytes(GGMLType::Q4_K, 512) == 2 * 144);
    CHECK(row_bytes(GGMLType::F16, 7) == 14);
    CHECK(parse_type("Q8_0") == GGMLType::Q8_0);
    CHECK(std::string(type_name(GGMLType::BF16)) == "bf16");
    CHECK_FALSE(is_known_type(4));
    CHECK_FALSE(is_known_type(31));
    CHECK(is_known_type(30));
    REQUIRE_THROWS_WITH(row_bytes(GGMLType::Q8_0, 33), Catch::Contains("block size 32"));
    REQUIRE_THROWS_WITH(parse_type("q9"), Catch::Contains("q9"));
    float f[32];
    uint8_t b[256];
    REQUIRE_THROWS_AS(dequantize_row(GGMLType::Q4_K, b, f, 256), Error);
    REQUIRE_THROWS_AS(type_info(static_cast<GGMLType>(99)), Error);
}

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
    REQUIRE_THROWS_AS(dequantize_row(GGMLType::Q2_K, b, f, 256), Error);
    REQUIRE_THROWS_AS(type_info(static_cast<GGMLType>(99)), Error);
}

namespace {

// ggml's K-quant element formulas, written per element from the block layout (include/latte/types.h),
// independently of the row loops in src/types.cpp.
float ref_k4(const uint8_t* blk, bool q5, int e) {
    const float d = fp16_to_fp32(static_cast<uint16_t>(blk[0] | blk[1] << 8));
    const float dmin = fp16_to_fp32(static_cast<uint16_t>(blk[2] | blk[3] << 8));
    const uint8_t* s = blk + 4;
    const uint8_t* qh = blk + 16;
    const uint8_t* qs = blk + (q5 ? 48 : 16);
    const int j = e / 32, c = e / 64, l = e % 32, hi = (e % 64) / 32;
    int sc, m;
    if (j < 4) {
        sc = s[j] & 63;
        m = s[j + 4] & 63;
    } else {
        sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
    int q = hi ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 0xF;
    if (q5 && (qh[l] >> (2 * c + hi) & 1)) q += 16;
    return (d * static_cast<float>(sc)) * static_cast<float>(q) - dmin * static_cast<float>(m);
}

float ref_q6(const uint8_t* blk, int e) {
    const float d = fp16_to_fp32(static_cast<uint16_t>(blk[208] | blk[209] << 8));
    const int h = e / 128, g = (e % 128) / 32, l = e % 32;
    const uint8_t b = blk[64 * h + l + 32 * (g & 1)];
    const int lo4 = g < 2 ? b & 0xF : b >> 4;
    const int hi2 = (blk[128 + 32 * h + l] >> (2 * g)) & 3;
    const int8_t sc = static_cast<int8_t>(blk[192 + e / 16]);
    return d * static_cast<float>(sc) * static_cast<float>((lo4 | hi2 << 4) - 32);
}

}  // namespace

TEST_CASE("types: q4_K, q5_K and q6_K dequantise hand-built blocks as ggml defines them", "[types]") {
    REQUIRE(type_info(GGMLType::Q4_K).type_size == 144);
    REQUIRE(type_info(GGMLType::Q5_K).type_size == 176);
    REQUIRE(type_info(GGMLType::Q6_K).type_size == 210);
    REQUIRE(parse_type("q4_K") == GGMLType::Q4_K);
    REQUIRE(parse_type("Q5_K") == GGMLType::Q5_K);
    REQUIRE(parse_type("q6_k") == GGMLType::Q6_K);
    std::mt19937 rng(9);
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> ud(-0.05f, 0.05f);
    for (GGMLType t : {GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K}) {
        const int nb = 5, n = 256 * nb;
        const size_t bsz = type_info(t).type_size;
        std::vector<uint8_t> w(bsz * nb);
        for (auto& b : w) b = static_cast<uint8_t>(byte(rng));  // every bit pattern of scales/quants
        for (int b = 0; b < nb; ++b) {  // finite fp16 scales
            uint8_t* blk = &w[b * bsz];
            const uint16_t d = fp32_to_fp16(ud(rng)), dmin = fp32_to_fp16(std::fabs(ud(rng)));
            if (t == GGMLType::Q6_K) {
                std::memcpy(blk + 208, &d, 2);
            } else {
                std::memcpy(blk, &d, 2);
                std::memcpy(blk + 2, &dmin, 2);
            }
        }
        std::vector<float> y(n);
        dequantize_row(t, w.data(), y.data(), n);
        for (int b = 0; b < nb; ++b)
            for (int e = 0; e < 256; ++e) {
                const uint8_t* blk = &w[b * bsz];
                const float want = t == GGMLType::Q6_K ? ref_q6(blk, e) : ref_k4(blk, t == GGMLType::Q5_K, e);
                INFO(type_name(t) << " block " << b << " element " << e);
                REQUIRE(std::memcmp(&y[b * 256 + e], &want, 4) == 0);  // ggml's f32 arithmetic, bit for bit
            }
    }
    // Known values. q4_K: d = 1, dmin = 0.5, sub-block j: sc = j + 1, m = 2j (j = 5: sc 6 = 0b000110 in
    // bytes 9 (low 4 bits) and 1 (bits 6-7), m 10 = 0b001010: byte 9 high nibble, byte 5 bits 6-7).
    {
        BlockQ4_K b{};
        b.d = fp32_to_fp16(1.0f);
        b.dmin = fp32_to_fp16(0.5f);
        for (int j = 0; j < 8; ++j) {
            const int sc = j + 1 + (j == 7 ? 40 : 0), m = 2 * j + (j == 6 ? 33 : 0);  // 48 and 45: 6 bits used
            if (j < 4) {
                b.scales[j] = static_cast<uint8_t>(sc);
                b.scales[j + 4] = static_cast<uint8_t>(m);
            } else {
                b.scales[j + 4] = static_cast<uint8_t>((sc & 0xF) | (m & 0xF) << 4);
                b.scales[j - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
                b.scales[j] |= static_cast<uint8_t>((m >> 4) << 6);
            }
        }
        for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((i % 16) | ((15 - i % 16) << 4));
        float y[256];
        dequantize_row(GGMLType::Q4_K, &b, y, 256);
        for (int e = 0; e < 256; ++e) {
            const int j = e / 32, l = e % 32;
            const int sc = j + 1 + (j == 7 ? 40 : 0), m = 2 * j + (j == 6 ? 33 : 0);
            const int q = j % 2 == 0 ? l % 16 : 15 - l % 16;
            INFO("q4_K element " << e);
            REQUIRE(y[e] == static_cast<float>(sc * q) - 0.5f * static_cast<float>(m));
        }
        // q5_K: the same with the fifth bit set for every odd l of sub-blocks 1 and 6
        BlockQ5_K b5{};
        b5.d = b.d;
        b5.dmin = b.dmin;
        std::memcpy(b5.scales, b.scales, 12);
        std::memcpy(b5.qs, b.qs, 128);
        for (int l = 1; l < 32; l += 2) b5.qh[l] = (1 << 1) | (1 << 6);
        dequantize_row(GGMLType::Q5_K, &b5, y, 256);
        for (int e = 0; e < 256; ++e) {
            const int j = e / 32, l = e % 32;
            const int sc = j + 1 + (j == 7 ? 40 : 0), m = 2 * j + (j == 6 ? 33 : 0);
            const int q = (j % 2 == 0 ? l % 16 : 15 - l % 16) + ((j == 1 || j == 6) && l % 2 ? 16 : 0);
            INFO("q5_K element " << e);
            REQUIRE(y[e] == static_cast<float>(sc * q) - 0.5f * static_cast<float>(m));
        }
    }
    // q6_K: d (last) = 0.25, scales[k] = k - 8, element e stores q = e % 64: x = 0.25·(k-8)·(e%64 - 32)
    {
        std::vector<float> v(256);
        BlockQ6_K b{};
        b.d = fp32_to_fp16(0.25f);
        for (int k = 0; k < 16; ++k) b.scales[k] = static_cast<int8_t>(k - 8);
        for (int e = 0; e < 256; ++e) {
            const int q = e % 64, h = e / 128, g = (e % 128) / 32, l = e % 32;
            b.ql[64 * h + l + 32 * (g & 1)] |= static_cast<uint8_t>((q & 0xF) << (g < 2 ? 0 : 4));
            b.qh[32 * h + l] |= static_cast<uint8_t>((q >> 4) << (2 * g));
        }
        float y[256];
        dequantize_row(GGMLType::Q6_K, &b, y, 256);
        for (int e = 0; e < 256; ++e) {
            INFO("q6_K element " << e);
            REQUIRE(y[e] == 0.25f * static_cast<float>((e / 16 - 8) * (e % 64 - 32)));
        }
    }
}

TEST_CASE("types: q4_K, q5_K and q6_K round trips stay within their sub-block step", "[types]") {
    std::mt19937 rng(10);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int n = 256 * 23;
    std::vector<float> x(n), y(n);
    for (int i = 0; i < n; ++i) {
        const float s = 0.01f * (1.0f + static_cast<float>((i / 32) % 9));  // sub-blocks of different ranges
        x[i] = nd(rng) * s + (i / 256 == 3 ? 0.05f : 0.0f) - (i / 256 == 4 ? 0.05f : 0.0f);  // all-positive-ish, all-negative-ish
    }
    for (int i = 256 * 5; i < 256 * 6; ++i) x[i] = 0.0f;          // a zero block
    for (int i = 256 * 6 + 32; i < 256 * 6 + 64; ++i) x[i] = 0.0f;  // a zero sub-block
    for (GGMLType t : {GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K}) {
        std::vector<uint8_t> buf(row_bytes(t, n));
        quantize_row(t, x.data(), buf.data(), n);
        dequantize_row(t, buf.data(), y.data(), n);
        const size_t bsz = type_info(t).type_size;
        double se = 0.0, sx = 0.0;
        for (int b = 0; b < n / 256; ++b) {
            const uint8_t* blk = &buf[b * bsz];
            for (int e = 0; e < 256; ++e) {
                const int i = b * 256 + e;
                float bound;
                if (t == GGMLType::Q6_K) {
                    const float d = fp16_to_fp32(static_cast<uint16_t>(blk[208] | blk[209] << 8));
                    bound = 0.5f * std::fabs(d * static_cast<float>(static_cast<int8_t>(blk[192 + e / 16])));
                } else {
                    const float d = fp16_to_fp32(static_cast<uint16_t>(blk[0] | blk[1] << 8));
                    const float dmin = fp16_to_fp32(static_cast<uint16_t>(blk[2] | blk[3] << 8));
                    uint8_t sc, m;
                    k4_scale_min(e / 32, blk + 4, sc, m);
                    bound = 0.5f * d * sc + 0.5f * dmin;
                }
                INFO(type_name(t) << " block " << b << " element " << e << ": " << x[i] << " -> " << y[i]);
                REQUIRE(std::fabs(y[i] - x[i]) <= bound * 1.001f + 1e-7f);
                se += (y[i] - x[i]) * (y[i] - x[i]);
                sx += x[i] * x[i];
            }
        }
        for (int i = 256 * 5; i < 256 * 6; ++i) REQUIRE(y[i] == 0.0f);
        // relative rms error: ~step/sqrt(12) over a range of ~5 sigma
        const double rel = std::sqrt(se / sx);
        INFO(type_name(t) << " relative rms error " << rel);
        CHECK(rel < (t == GGMLType::Q4_K ? 0.12 : t == GGMLType::Q5_K ? 0.06 : 0.04));
    }
}

namespace {

// The repacked K-quant layouts (include/latte/types.h), per element, independently of src/types.cpp.
float ref_k4r(const uint8_t* blk, bool q5, int e) {
    const float d = fp16_to_fp32(static_cast<uint16_t>(blk[0] | blk[1] << 8));
    const float dmin = fp16_to_fp32(static_cast<uint16_t>(blk[2] | blk[3] << 8));
    const uint8_t* s = blk + 4;
    const uint8_t* qh = blk + 16;
    const uint8_t* qs = blk + (q5 ? 48 : 16);
    const int l = e / 32, j = e % 32;  // sub-block l, element j of it: element vector j / 4, byte 4l + j % 4
    const int sc = s[l] & 63;
    const int m = (s[l] >> 6) << 4 | ((l < 4 ? s[8 + l] : s[8 + l - 4] >> 4) & 15);
    const int ev = j / 4, byte = 4 * l + j % 4;
    int q = ev < 4 ? qs[32 * ev + byte] & 15 : qs[32 * (ev - 4) + byte] >> 4;
    if (q5 && (qh[byte] >> ev & 1)) q += 16;
    return (d * static_cast<float>(sc)) * static_cast<float>(q) - dmin * static_cast<float>(m);
}

float ref_q6r(const uint8_t* blk, int e) {
    const float d = fp16_to_fp32(static_cast<uint16_t>(blk[208] | blk[209] << 8));
    const int k = e / 16, j = e % 16, ev = j / 2, byte = 2 * k + j % 2;
    const int lo4 = ev < 4 ? blk[32 * ev + byte] & 15 : blk[32 * (ev - 4) + byte] >> 4;
    const int hi2 = (blk[128 + 32 * (ev / 4) + byte] >> (2 * (ev % 4))) & 3;
    const int8_t sc = static_cast<int8_t>(blk[192 + k]);
    return d * static_cast<float>(sc) * static_cast<float>((lo4 | hi2 << 4) - 32);
}

}  // namespace

TEST_CASE("types: q4_K_r, q5_K_r, q6_K_r repack K-quant blocks losslessly with the documented layout", "[types]") {
    std::mt19937 rng(21);
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> ud(-0.05f, 0.05f);
    for (GGMLType t : {GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K}) {
        const GGMLType r = kr_type(t);
        REQUIRE(kr_base(r) == t);
        REQUIRE(is_kr(r));
        REQUIRE_FALSE(is_kr(t));
        REQUIRE_FALSE(is_known_type(static_cast<uint32_t>(r)));
        REQUIRE(type_info(r).convertible);
        REQUIRE(type_info(r).block_size == 256);
        REQUIRE(row_bytes(r, 512) == row_bytes(t, 512));
        const int nb = 7, n = 256 * nb;
        const size_t bsz = type_info(t).type_size;
        std::vector<uint8_t> w(bsz * nb);
        for (auto& b : w) b = static_cast<uint8_t>(byte(rng));  // every bit pattern
        std::vector<uint8_t> p(w.size()), back(w.size(), 0xAB), inplace = w;
        repack_k(t, w.data(), p.data(), n);
        unpack_k(r, p.data(), back.data(), n);
        INFO(type_name(r));
        REQUIRE(back == w);  // exact inverse for any bytes
        repack_k(t, inplace.data(), inplace.data(), n);
        REQUIRE(inplace == p);  // in place: the same
        unpack_k(r, inplace.data(), inplace.data(), n);
        REQUIRE(inplace == w);
        for (int b = 0; b < nb; ++b) {  // finite fp16 scales, then the element formulas on both layouts
            uint8_t* blk = &w[b * bsz];
            const uint16_t d = fp32_to_fp16(ud(rng)), dmin = fp32_to_fp16(std::fabs(ud(rng)));
            std::memcpy(blk + (t == GGMLType::Q6_K ? 208 : 0), &d, 2);
            if (t != GGMLType::Q6_K) std::memcpy(blk + 2, &dmin, 2);
        }
        repack_k(t, w.data(), p.data(), n);
        std::vector<float> y(n), yr(n);
        dequantize_row(t, w.data(), y.data(), n);
        dequantize_row(r, p.data(), yr.data(), n);
        REQUIRE(std::memcmp(y.data(), yr.data(), 4 * static_cast<size_t>(n)) == 0);  // a row reads alone, bit for bit
        for (int b = 0; b < nb; ++b)
            for (int e = 0; e < 256; ++e) {
                const uint8_t* blk = &p[b * bsz];
                const float want = t == GGMLType::Q6_K ? ref_q6r(blk, e) : ref_k4r(blk, t == GGMLType::Q5_K, e);
                INFO("block " << b << " element " << e);
                REQUIRE(std::memcmp(&yr[b * 256 + e], &want, 4) == 0);
            }
        // quantize_row to the repacked type: the file type's quantisation, repacked
        std::vector<float> x(n);
        for (auto& v : x) v = ud(rng);
        std::vector<uint8_t> qf(w.size()), qr(w.size()), qr2(w.size());
        quantize_row(t, x.data(), qf.data(), n);
        quantize_row(r, x.data(), qr.data(), n);
        repack_k(t, qf.data(), qr2.data(), n);
        REQUIRE(qr == qr2);
    }
    std::vector<uint8_t> buf(210 * 2);
    REQUIRE_THROWS_AS(repack_k(GGMLType::Q8_0, buf.data(), buf.data(), 256), Error);
    REQUIRE_THROWS_AS(unpack_k(GGMLType::Q4_K, buf.data(), buf.data(), 256), Error);
    REQUIRE_THROWS_AS(repack_k(GGMLType::Q4_K, buf.data(), buf.data(), 100), Error);
    REQUIRE_THROWS_AS(kr_type(GGMLType::Q8_0), Error);
    REQUIRE(std::string(type_name(GGMLType::Q4_K_R)) == "q4_K_r");
    REQUIRE(std::string(type_name(GGMLType::Q5_K_R)) == "q5_K_r");
    REQUIRE(std::string(type_name(GGMLType::Q6_K_R)) == "q6_K_r");
}

// Random attention inputs for the kernel tests (tests/test_kernels.cpp, tests/test_amx_attn_emulated.cpp):
// a shape (MQA 576/512 with V the K rows' prefix, or MHA 192/128), its cache rows quantised to the
// type under test, per-row KV lengths; the relative error measure and the per-level tolerances
// against the scalar reference.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "kernels/dispatch.h"
#if defined(__x86_64__)  // x86 builds compile kernels/avx2 (CMakeLists.txt)
#include "kernels/avx2/flash_attn.h"
#endif
#include "latte/types.h"

namespace {

using latte::GGMLType;
using latte::quantize_row;
using latte::row_bytes;
using latte::kernels::Isa;

struct Shape {
    bool mqa;      // 576/512 with V = prefix of K; else 192/128 with its own V
    int heads, rows, pos0;
    int N;         // KV rows in the cache (for causal: pos0 + rows)
    enum Mask { TG, Causal, Random } mask;
};

struct Data {
    int M, N, Dk, Dv;
    std::vector<float> q;
    std::vector<uint8_t> k, v;
    size_t ldk = 0, ldv = 0;
    std::vector<int> kv_len;
    float scale;
    const void* K() const { return k.data(); }
    const void* V(bool mqa) const { return mqa ? static_cast<const void*>(k.data()) : static_cast<const void*>(v.data()); }
};

inline Data make(const Shape& s, GGMLType t, uint64_t seed) {
    Data d;
    d.Dk = s.mqa ? 576 : 192;
    d.Dv = s.mqa ? 512 : 128;
    d.M = s.heads * s.rows;
    d.N = s.N;
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    d.q.resize(static_cast<size_t>(d.M) * d.Dk);
    for (auto& x : d.q) x = nd(rng);
    d.ldk = row_bytes(t, d.Dk);
    d.k.resize(d.ldk * d.N);
    std::vector<float> row(static_cast<size_t>(d.Dk));
    for (int j = 0; j < d.N; ++j) {
        for (auto& x : row) x = nd(rng);
        quantize_row(t, row.data(), d.k.data() + d.ldk * j, d.Dk);
    }
    if (!s.mqa) {
        d.ldv = row_bytes(t, d.Dv);
        d.v.resize(d.ldv * d.N);
        for (int j = 0; j < d.N; ++j) {
            for (int i = 0; i < d.Dv; ++i) row[static_cast<size_t>(i)] = nd(rng);
            quantize_row(t, row.data(), d.v.data() + d.ldv * j, d.Dv);
        }
    } else {
        d.ldv = d.ldk;
    }
    d.kv_len.resize(static_cast<size_t>(d.M));
    std::uniform_int_distribution<int> ud(1, d.N);
    for (int r = 0; r < s.rows; ++r)
        for (int h = 0; h < s.heads; ++h) {
            int len = d.N;
            if (s.mask == Shape::Causal) len = std::min(d.N, s.pos0 + r + 1);
            if (s.mask == Shape::Random) len = ud(rng);
            d.kv_len[static_cast<size_t>(r) * s.heads + h] = len;
        }
    d.scale = 2.0f / std::sqrt(192.0f);  // sharper than uniform softmax
    return d;
}

inline double max_abs(const std::vector<float>& a) {
    double m = 0.0;
    for (float x : a) m = std::max(m, static_cast<double>(std::fabs(x)));
    return m;
}

// max |got - ref| / max |ref|; NaN (unwritten) gives infinity.
inline double rel_err(const std::vector<float>& got, const std::vector<float>& ref) {
    double num = 0.0;
    for (size_t i = 0; i < ref.size(); ++i) {
        if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
        num = std::max(num, static_cast<double>(std::fabs(got[i] - ref[i])));
    }
    return num / std::max(max_abs(ref), 1e-30);
}

// Tolerance of a SIMD level against the scalar kernel on the same cache bytes, relative to max |O|.
// Float caches: only float rounding and the exp polynomial differ (measured <= 4.5e-6; avx512's bf16
// caches round the query to bf16 for vdpbf16ps: below). q8 caches:
// the query is quantised to int8 for Q·Kᵀ (per 32-block / per row), and avx512 also rounds P for
// P·V (see check_pv_rounding): measured 2026-12-02 avx2 1.84e-2 / avx512 1.93e-2 (q8_0) and
// avx2 2.47e-2 / avx512 2.57e-2 (q8_KV: one scale for 576 values) at this sharp softmax
// (LATTE_TEST_ERRORS=1 prints them).
// amx: bf16 and q8_0 caches go through its bf16-tile kernel, which rounds the scaled query, K
// (q8_0: d·q), V and P to bf16 (8-bit mantissa; no int8 query): measured on the 16-core Xeon
// (2026-12-03) bf16 5.5e-3, q8_0 7.95e-3 (avx512's int8-query q8_0: 1.93e-2); tolerance 3e-2, the
// q8_0 one. f16 caches take the split form (every operand as bf16 + bf16 remainder, three products):
// measured 1.21e-5, inside the float types' 2e-5 (plain bf16 tiles: 1.04e-2); f32 stays on avx512.
inline double tol(GGMLType t, Isa isa = Isa::Scalar) {
    if (isa == Isa::Amx && (t == GGMLType::BF16 || t == GGMLType::Q8_0)) return 3e-2;
    // avx512, bf16 caches: Q·Kᵀ by vdpbf16ps with the query rounded to bf16 (K is bf16 already; V
    // and P stay f32): measured 2026-12-06 (Zen 5) up to 8.4e-3; amx's bound
    if (isa == Isa::Avx512 && t == GGMLType::BF16) return 3e-2;
    switch (t) {
        case GGMLType::Q8_0: return 3e-2;
        case GGMLType::Q8_KV: return 5e-2;
        default: return 2e-5;
    }
}

// The query quantised once (dispatch.h's attn_quant_q, then attn_flash_part_q per KV chunk, as
// src/mla_attention.cpp's TG split does) against attn_flash_part quantising it per call: the
// same bits (O, m, l), chunk by chunk over [0, 320), [320, 701), [701, N) of the shape, with the
// query rows handed over from row `first` of the quantised buffer (the split's row blocks).
// Returns false where quant declines the types (then part_q is not called); fails on any bit.
// With pack (dispatch.h's attn_pack_q; `first` a multiple of 16) the rows are also packed once and
// handed over as QuantQuery::qp where pack takes the types. Each chunk's call is told the next
// chunk's rows (QuantQuery::next_k / next_v), which a kernel may prefetch: the bits stay.
template <class Quant, class Part, class PartQ, class Pack = std::nullptr_t>
bool query_once_same_bits(Quant quant, Part part, PartQ part_q, const Data& d, GGMLType t, bool mqa, int first,
                          Pack pack = nullptr) {
    const int blocks = t == GGMLType::Q8_KV ? 1 : d.Dk / 32;
    std::vector<int8_t> q8(static_cast<size_t>(d.M) * d.Dk);
    std::vector<float> qd(static_cast<size_t>(d.M) * blocks);
    std::vector<int32_t> qs(qd.size());
    if (!quant(t, t, d.Dk, d.Dv, d.M, d.q.data(), d.Dk, d.scale, q8.data(), qd.data(), qs.data())) return false;
    std::vector<uint8_t> qp;
    if constexpr (!std::is_same_v<Pack, std::nullptr_t>) {
        qp.assign(static_cast<size_t>((d.M + 15) / 16 * 16) * d.Dk, 0xA5);
        if (!pack(t, t, d.Dk, d.Dv, d.M, q8.data(), qp.data())) qp.clear();
    }
    const int M = d.M - first;
    const int edges[] = {0, std::min(320, d.N), std::min(701, d.N), d.N};
    bool same = true;
    for (int c = 0; c < 3; ++c) {
        const int j0 = edges[c], n = edges[c + 1] - j0;
        if (n <= 0) continue;
        std::vector<int> len(static_cast<size_t>(M));
        for (int r = 0; r < M; ++r)
            len[static_cast<size_t>(r)] = std::max(0, std::min(d.kv_len[static_cast<size_t>(first + r)], edges[c + 1]) - j0);
        const size_t osz = static_cast<size_t>(M) * d.Dv;
        std::vector<float> o1(osz, std::nanf("")), o2(osz, std::nanf(""));
        std::vector<float> m1(static_cast<size_t>(M), std::nanf("")), l1(m1), m2(m1), l2(m1);
        const auto* K = static_cast<const uint8_t*>(d.K()) + d.ldk * j0;
        const auto* V = static_cast<const uint8_t*>(d.V(mqa)) + d.ldv * j0;
        const float* Q = d.q.data() + static_cast<size_t>(first) * d.Dk;
        part(M, n, d.Dk, d.Dv, Q, d.Dk, K, d.ldk, t, V, d.ldv, t, len.data(), d.scale, o1.data(), d.Dv, m1.data(),
             l1.data());
        latte::kernels::QuantQuery qq{q8.data() + static_cast<size_t>(first) * d.Dk,
                                      qd.data() + static_cast<size_t>(first) * blocks,
                                      qs.data() + static_cast<size_t>(first) * blocks,
                                      qp.empty() ? nullptr : qp.data() + static_cast<size_t>(first) * d.Dk};
        if (c + 1 < 3 && edges[c + 2] > edges[c + 1]) {  // told the next chunk's rows, as the split does
            const size_t rows = static_cast<size_t>(edges[c + 2] - edges[c + 1]);
            qq.next_k = static_cast<const uint8_t*>(d.K()) + d.ldk * static_cast<size_t>(edges[c + 1]);
            qq.next_k_bytes = rows * d.ldk;
            if (!mqa) {
                qq.next_v = static_cast<const uint8_t*>(d.V(mqa)) + d.ldv * static_cast<size_t>(edges[c + 1]);
                qq.next_v_bytes = rows * d.ldv;
            }
        }
        part_q(M, n, d.Dk, d.Dv, Q, d.Dk, K, d.ldk, t, V, d.ldv, t, len.data(), d.scale, o2.data(), d.Dv, m2.data(),
               l2.data(), qq);
        same = same && std::memcmp(o1.data(), o2.data(), osz * sizeof(float)) == 0 &&
               std::memcmp(m1.data(), m2.data(), m1.size() * sizeof(float)) == 0 &&
               std::memcmp(l1.data(), l2.data(), l1.size() * sizeof(float)) == 0;
    }
    return same;
}

#if defined(__x86_64__)
// The plain avx2 build's table: its int16 P·V is within 1.5e-4 of max |O| of f32 P·V, so it is the
// near-f32 reference of the P·V rounding checks. table_for(Isa::Avx2) is the AVX-VNNI build where
// the CPU has AVX-VNNI, whose u8 P·V rounds as avx512's does.
inline latte::kernels::KernelTable avx2_plain_table() {
    latte::kernels::KernelTable t = latte::kernels::table_for(latte::kernels::Isa::Avx2);
    t.name = "avx2 (plain)";
    t.attn_plain = latte::kernels::avx2::attn_plain;
    t.attn_flash = latte::kernels::avx2::attn_flash;
    t.attn_flash_part = latte::kernels::avx2::attn_flash_part;
    return t;
}
#else
// No avx2 kernels in this build (aarch64): the callers test isa_available(Isa::Avx2) first, so
// this only has to compile (table_for would throw, naming the level).
inline latte::kernels::KernelTable avx2_plain_table() { return latte::kernels::table_for(latte::kernels::Isa::Avx2); }
#endif

}  // namespace

// Each -mla path's attention against an independent double-precision Eigen implementation of the
// unabsorbed formula (DESIGN.md §1): s_h(t) = (q_nope_h·W_kb_h c(t) + q_pe_h·k_pe(t))·scale,
// o_h = Σ_t softmax(s_h)(t) · W_vb_h c(t), with the causal mask and a KV offset (pos0 tokens
// already cached before the ubatch).
#include <Eigen/Dense>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "kv_cache.h"
#include "latte/error.h"
#include "mla_attention.h"
#include "threadpool.h"

using namespace latte;

namespace {

struct Case {
    MlaDims d;
    int pos0, n;
    std::vector<float> c, kpe, q, wkb, wvb;  // c/kpe: (pos0+n) rows; q: n×H×192
    float scale;
};

Case make_case(int H, int pos0, int n, uint64_t seed) {
    Case k;
    k.d.n_head = H;
    k.pos0 = pos0;
    k.n = n;
    const int L = k.d.kv_lora, R = k.d.n_rot, N = k.d.d_nope, V = k.d.d_v, T = pos0 + n;
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto fill = [&](std::vector<float>& v, size_t sz, float s) {
        v.resize(sz);
        for (auto& x : v) x = s * nd(rng);
    };
    fill(k.c, static_cast<size_t>(T) * L, 1.0f);
    fill(k.kpe, static_cast<size_t>(T) * R, 1.0f);
    fill(k.q, static_cast<size_t>(n) * H * (N + R), 1.0f);
    fill(k.wkb, static_cast<size_t>(H) * N * L, 1.0f / std::sqrt(static_cast<float>(L)));
    fill(k.wvb, static_cast<size_t>(H) * V * L, 1.0f / std::sqrt(static_cast<float>(L)));
    k.scale = 2.0f / std::sqrt(static_cast<float>(N + R));  // sharper than uniform softmax
    return k;
}

// The oracle: n×H×V doubles.
std::vector<double> oracle(const Case& k) {
    using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const int H = k.d.n_head, L = k.d.kv_lora, R = k.d.n_rot, N = k.d.d_nope, V = k.d.d_v, T = k.pos0 + k.n;
    Mat C(T, L), KPE(T, R);
    for (int t = 0; t < T; ++t) {
        for (int j = 0; j < L; ++j) C(t, j) = k.c[static_cast<size_t>(t) * L + j];
        for (int j = 0; j < R; ++j) KPE(t, j) = k.kpe[static_cast<size_t>(t) * R + j];
    }
    std::vector<double> out(static_cast<size_t>(k.n) * H * V);
    for (int h = 0; h < H; ++h) {
        Mat Wk(N, L), Wv(V, L);
        for (int i = 0; i < N; ++i)
            for (int j = 0; j < L; ++j) Wk(i, j) = k.wkb[(static_cast<size_t>(h) * N + i) * L + j];
        for (int i = 0; i < V; ++i)
            for (int j = 0; j < L; ++j) Wv(i, j) = k.wvb[(static_cast<size_t>(h) * V + i) * L + j];
        const Mat Knope = C * Wk.transpose();  // T × N
        const Mat Vh = C * Wv.transpose();     // T × V
        for (int t = 0; t < k.n; ++t) {
            const float* qr = &k.q[(static_cast<size_t>(t) * H + h) * (N + R)];
            Eigen::VectorXd qn(N), qp(R);
            for (int i = 0; i < N; ++i) qn(i) = qr[i];
            for (int i = 0; i < R; ++i) qp(i) = qr[N + i];
            const int vis = k.pos0 + t + 1;
            Eigen::VectorXd s = (Knope.topRows(vis) * qn + KPE.topRows(vis) * qp) * static_cast<double>(k.scale);
            s = (s.array() - s.maxCoeff()).exp();
            s /= s.sum();
            const Eigen::VectorXd o = Vh.topRows(vis).transpose() * s;
            for (int i = 0; i < V; ++i) out[(static_cast<size_t>(t) * H + h) * V + i] = o(i);
        }
    }
    return out;
}

// max |got - ref| / max |ref|
double rel_err(const std::vector<float>& got, const std::vector<double>& ref) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < ref.size(); ++i) {
        num = std::max(num, std::fabs(got[i] - ref[i]));
        den = std::max(den, std::fabs(ref[i]));
    }
    return num / den;
}

std::vector<float> run_path(const Case& k, MlaPath path, bool flash, GGMLType ct, ThreadPool& pool) {
    const int H = k.d.n_head, V = k.d.d_v, L = k.d.kv_lora, R = k.d.n_rot;
    KVCache cache(k.d, 2, k.pos0 + k.n + 3, path == MlaPath::Full, ct);
    const MlaWeights w{k.wkb.data(), k.wvb.data()};
    const int il = 1;  // the second layer: offsets per layer are exercised too
    if (k.pos0 > 0) mla_store(cache, il, 0, k.pos0, k.c.data(), k.kpe.data(), w, pool);
    mla_store(cache, il, k.pos0, k.n, &k.c[static_cast<size_t>(k.pos0) * L], &k.kpe[static_cast<size_t>(k.pos0) * R], w,
              pool);
    std::vector<float> out(static_cast<size_t>(k.n) * H * V, std::nanf(""));  // poisoned: unwritten fails
    mla_attend(path, flash, cache, il, k.pos0, k.n, k.q.data(), w, k.scale, out.data(), pool);
    return out;
}

}  // namespace

TEST_CASE("attention: every -mla path matches the unabsorbed double-precision formula", "[attention]") {
    // Tolerances, max abs error relative to max |o|: f32 cache 1e-5 (float rounding only; measured 7e-7);
    // f16 2e-3, bf16 1e-2, q8_0 2e-2 (the cache's own rounding; measured 4.4e-4, 3.8e-3, 1.4e-2).
    struct TypeTol { GGMLType t; double tol; };
    // SIMD levels (LATTE_ISA=avx2/avx512) also quantise the query for q8 caches: measured q8_0 1.6e-2.
    // q8_KV 5e-2: one scale per 576-value row, coarser than q8_0's per-32 scales; measured 2.5e-2
    // scalar, 3.4e-2 SIMD (the query quantised per row too).
    const TypeTol types[] = {{GGMLType::F32, 1e-5}, {GGMLType::F16, 2e-3}, {GGMLType::BF16, 1e-2}, {GGMLType::Q8_0, 2e-2},
                             {GGMLType::Q8_KV, 5e-2}};
    struct Shape { int H, pos0, n; };
    const Shape shapes[] = {{1, 0, 1}, {3, 0, 7}, {2, 63, 3}, {4, 64, 1}, {16, 5, 1}, {2, 130, 70}, {5, 1, 64}};
    ThreadPool pool2(2), pool3(3);
    uint64_t seed = 1234;
    for (const Shape& s : shapes) {
        const Case k = make_case(s.H, s.pos0, s.n, seed++);
        const std::vector<double> ref = oracle(k);
        for (const TypeTol& tt : types) {
            for (MlaPath path : {MlaPath::Full, MlaPath::Absorbed, MlaPath::Decompressed}) {
                for (bool flash : {false, true}) {
                    ThreadPool& pool = (seed % 2) ? pool2 : pool3;
                    const std::vector<float> got = run_path(k, path, flash, tt.t, pool);
                    const double err = rel_err(got, ref);
                    INFO("H=" << s.H << " pos0=" << s.pos0 << " n=" << s.n << " type=" << type_name(tt.t)
                              << " path=" << static_cast<int>(path) << " flash=" << flash << " err=" << err);
                    CHECK(err <= tt.tol);
                }
            }
        }
    }
}

TEST_CASE("attention: TG flash-decoding (KV split across threads) matches the formula", "[attention]") {
    // One query token at depth 1500: -mla 1 with -fa on splits the KV length into chunks whose
    // partial (m, l, O) are merged; the split depends only on the shape, so threads do not matter.
    const Case k = make_case(4, 1500, 1, 4321);
    const std::vector<double> ref = oracle(k);
    ThreadPool p1(1), p2(2), p3(3);
    struct TypeTol { GGMLType t; double tol; };
    for (const TypeTol tt : {TypeTol{GGMLType::F32, 1e-5}, TypeTol{GGMLType::F16, 2e-3}, TypeTol{GGMLType::Q8_KV, 5e-2}}) {
        const auto a = run_path(k, MlaPath::Absorbed, true, tt.t, p2);
        const double err = rel_err(a, ref);
        INFO(type_name(tt.t) << " err=" << err);
        CHECK(err <= tt.tol);
        CHECK(run_path(k, MlaPath::Absorbed, true, tt.t, p1) == a);
        CHECK(run_path(k, MlaPath::Absorbed, true, tt.t, p3) == a);
    }
}

TEST_CASE("attention: a short prompt over a deep cache splits the KV length too, and matches the formula", "[attention]") {
    // -mla 1 PP with few row blocks (mqa_attend: < 16) over >= 1024 cached rows also splits the KV
    // length. 20 tokens × 16 heads after 1100 cached: 320 rows in 5 blocks (4 at amx), 2 chunks. One
    // head, 700 tokens after 400: 11 blocks, 2 chunks at [0, 512) and [512, 1100), so the first
    // rows (kv_len <= 512) see nothing of the second: empty partials.
    // Two checks: against the formula (the cache type's own rounding; q8_KV 8e-2 here: one head ×
    // 700 rows is a max over more outputs than the other cases, measured 5.1e-2 with and without
    // the split), and against the unsplit kernel (-fa off takes the whole KV length per row: only
    // the order of float sums differs, measured <= 5e-7; tolerance 1e-5; q8_0 2e-3: the flash kernel
    // of a SIMD level quantises the query for its int8 dot, the -fa off path does not, measured 7.7e-4).
    // q8_KV at the amx and avx512 levels 2e-3 too: their P·V quantises P to u8 per row over
    // 512-row KV tiles (amx; avx512's 16-row path, 256 rows until 2026-12-06), and the split's
    // chunk edges (multiples of 64) cut those tiles differently (measured 1.4e-4 on Sapphire Rapids' real tiles, 1.3e-4 /
    // 1.4e-4 avx512 on Zen 5 since the 16-row path takes every q8 superblock of 16-row groups).
    ThreadPool p1(1), p2(2), p3(3);
    const kernels::Isa active = kernels::active().isa;
    const double q8kv_unsplit = active == kernels::Isa::Amx || active == kernels::Isa::Avx512 ? 2e-3 : 1e-5;
    uint64_t seed = 777;
    for (const auto& [H, pos0, n] : {std::tuple{16, 1100, 20}, std::tuple{1, 400, 700}}) {
        const Case k = make_case(H, pos0, n, seed++);
        const std::vector<double> ref = oracle(k);
        struct TypeTol { GGMLType t; double tol, tol_unsplit; };
        for (const TypeTol tt : {TypeTol{GGMLType::F32, 1e-5, 1e-5}, TypeTol{GGMLType::F16, 2e-3, 1e-5},
                                 TypeTol{GGMLType::Q8_0, 2e-2, 2e-3}, TypeTol{GGMLType::Q8_KV, 8e-2, q8kv_unsplit}}) {
            const auto a = run_path(k, MlaPath::Absorbed, true, tt.t, p2);
            const auto unsplit = run_path(k, MlaPath::Absorbed, false, tt.t, p2);
            const double err = rel_err(a, ref);
            const double err_unsplit = rel_err(a, std::vector<double>(unsplit.begin(), unsplit.end()));
            INFO("H=" << H << " pos0=" << pos0 << " n=" << n << " " << type_name(tt.t) << " err=" << err
                      << " vs unsplit " << err_unsplit);
            CHECK(err <= tt.tol);
            CHECK(err_unsplit <= tt.tol_unsplit);
            CHECK(run_path(k, MlaPath::Absorbed, true, tt.t, p1) == a);
            CHECK(run_path(k, MlaPath::Absorbed, true, tt.t, p3) == a);
        }
    }
}

TEST_CASE("attention: results do not depend on the thread count", "[attention]") {
    const Case k = make_case(4, 17, 9, 99);
    ThreadPool p1(1), p3(3);
    for (MlaPath path : {MlaPath::Full, MlaPath::Absorbed, MlaPath::Decompressed}) {
        const auto a = run_path(k, path, true, GGMLType::F16, p1);
        const auto b = run_path(k, path, true, GGMLType::F16, p3);
        CHECK(a == b);
    }
}

TEST_CASE("attention: path and cache layout must agree", "[attention]") {
    const Case k = make_case(2, 0, 2, 7);
    ThreadPool pool(1);
    KVCache latent(k.d, 1, 8, false, GGMLType::F32);
    std::vector<float> out(static_cast<size_t>(k.n) * 2 * 128);
    const MlaWeights w{k.wkb.data(), k.wvb.data()};
    REQUIRE_THROWS_AS(mla_attend(MlaPath::Full, true, latent, 0, 0, 2, k.q.data(), w, k.scale, out.data(), pool), Error);
    REQUIRE_THROWS_AS(mla_attend(MlaPath::Absorbed, true, latent, 0, 7, 2, k.q.data(), w, k.scale, out.data(), pool), Error);
    REQUIRE_THROWS_AS(KVCache(k.d, 1, 8, false, GGMLType::Q4_0), Error);
}

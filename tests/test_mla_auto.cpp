// -mla auto (MlaMode::Auto): per ubatch the cheaper of the absorbed (1) and decompressed (2) paths
// by src/mla_cost.h's model. Its logits are those of mode 1 or 2, the path it took is reported
// (Context::last_paths()), and the choice moves from 1 to 2 as the ubatch grows on a long cache.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "latte/latte.h"
#include "mla_cost.h"

using namespace latte;

namespace {

std::shared_ptr<Model> tiny() {
    static std::shared_ptr<Model> m = Model::load(LATTE_TINY_MODEL);
    return m;
}

std::vector<int32_t> ids(int n, int32_t n_vocab, uint32_t s = 9) {
    std::vector<int32_t> v;
    for (int i = 0; i < n; ++i) {
        s = s * 1664525u + 1013904223u;
        v.push_back(static_cast<int32_t>(2 + (s >> 8) % static_cast<uint32_t>(n_vocab - 2)));
    }
    return v;
}

double rel_diff(const float* a, const float* b, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; ++i) {
        d = std::max(d, std::fabs(static_cast<double>(a[i]) - b[i]));
        m = std::max(m, std::fabs(static_cast<double>(b[i])));
    }
    return d / std::max(m, 1e-30);
}

struct EnvRates {  // pins the cost model's rates for one scope
    explicit EnvRates(const char* v) { setenv("LATTE_MLA_RATES", v, 1); }
    ~EnvRates() { unsetenv("LATTE_MLA_RATES"); }
};

}  // namespace

TEST_CASE("forward: parse_mla_mode accepts auto", "[forward]") {
    CHECK(parse_mla_mode("auto") == MlaMode::Auto);
    CHECK_THROWS_AS(parse_mla_mode("5"), Error);
}

TEST_CASE("forward: -mla auto gives the logits of mode 1 or mode 2 and says which", "[forward]") {
    const auto m = tiny();
    const int32_t nv = static_cast<int32_t>(m->hparams().n_vocab);
    for (int n : {1, 24}) {
        const auto p = ids(40 + n, nv);
        const std::vector<int32_t> prompt(p.begin(), p.begin() + 40), next(p.begin() + 40, p.end());
        std::vector<std::vector<float>> out;
        std::vector<int> paths;
        for (MlaMode mode : {MlaMode::Absorbed, MlaMode::Decompressed, MlaMode::Auto}) {
            Context ctx(m, {.n_ctx = 256, .n_threads = 2, .mla = mode});
            ctx.decode(prompt);
            ctx.decode(next, true);
            out.emplace_back(ctx.logits(0), ctx.logits(0) + static_cast<size_t>(n) * nv);
            paths = ctx.last_paths();
        }
        REQUIRE(paths.size() == 1);
        REQUIRE((paths[0] == 1 || paths[0] == 2));
        const size_t sz = out[2].size();
        INFO("n " << n << ", auto took path " << paths[0]);
        CHECK(rel_diff(out[2].data(), out[paths[0] - 1].data(), sz) <= 1e-4);
        CHECK(rel_diff(out[2].data(), out[0].data(), sz) <= 1e-4);
        CHECK(rel_diff(out[2].data(), out[1].data(), sz) <= 1e-4);
    }
}

TEST_CASE("forward: -mla auto moves from path 1 to path 2 as the ubatch grows on a long cache", "[forward]") {
    const auto m = tiny();
    const int32_t nv = static_cast<int32_t>(m->hparams().n_vocab);
    const auto p = ids(1025, nv);
    {
        // Measured rates: one token can never pay a whole window's decompression.
        Context ctx(m, {.n_ctx = 1100, .n_ubatch = 1024, .mla = MlaMode::Auto});
        ctx.decode(std::vector<int32_t>(p.begin(), p.begin() + 512));
        ctx.decode({p[512]});
        CHECK(ctx.last_paths() == std::vector<int>{1});
    }
    {
        const EnvRates pin("100,100,100");  // equal kernel rates: DESIGN.md's crossover near 340 tokens
        Context ctx(m, {.n_ctx = 1100, .n_ubatch = 1024, .mla = MlaMode::Auto});
        ctx.decode(std::vector<int32_t>(p.begin(), p.begin() + 512));
        ctx.decode({p[512]});
        CHECK(ctx.last_paths() == std::vector<int>{1});
        ctx.decode(std::vector<int32_t>(p.begin() + 513, p.begin() + 1025));
        CHECK(ctx.last_paths() == std::vector<int>{2});
    }
}

TEST_CASE("forward: the -mla auto cost model crosses near 171 tokens for equal rates", "[forward]") {
    // Equal rates, a long cache: mode 1 costs 2·(576+512) = 2176 flop per (token, head, cached row),
    // mode 2 2·(192+128) = 640 plus the decompression 2·512·256 = 262144 per (head, cached row)
    // shared by the ubatch: they cross at n = 262144 / 1536 ≈ 171 (DESIGN.md's "≈ 340" counts
    // MACs for the attention and flops for the decompression).
    MlaDims d;
    d.n_head = 16;
    const MlaRates r{{1e11, 1e11, 1e11}, {1e11, 1e11, 1e11}, 1e11, 0};
    auto two = [&](int n, int pos0) {
        const MlaCost c = mla_cost(d, n, pos0, r);
        return c.decompressed_s < c.absorbed_s;
    };
    CHECK_FALSE(two(1, 100000));
    CHECK_FALSE(two(128, 100000));
    CHECK(two(256, 100000));
    CHECK(two(4096, 100000));
}

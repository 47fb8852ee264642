// Tests of the token sampler.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "latte/error.h"
#include "latte/sampler.h"

using latte::Sampler;
using latte::SamplerParams;

namespace {

SamplerParams plain(float temp, uint64_t seed = 42) {  // no truncation at all
    SamplerParams p;
    p.temp = temp;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    return p;
}

std::vector<double> frequencies(Sampler& s, const std::vector<float>& logits, int draws) {
    std::vector<double> f(logits.size(), 0.0);
    for (int i = 0; i < draws; ++i) {
        const int32_t t = s.sample(logits.data(), static_cast<int32_t>(logits.size()));
        REQUIRE((t >= 0 && t < static_cast<int32_t>(logits.size())));
        f[static_cast<size_t>(t)] += 1.0 / draws;
    }
    return f;
}

std::vector<float> log_probs(const std::vector<double>& p) {
    std::vector<float> l;
    for (double x : p) l.push_back(static_cast<float>(std::log(x)));
    return l;
}

}  // namespace

TEST_CASE("sampler: greedy picks the argmax, lowest id on ties", "[sampler]") {
    Sampler s(plain(0.0f));
    const std::vector<float> a = {0.1f, 2.0f, -1.0f, 1.5f};
    CHECK(s.sample(a.data(), 4) == 1);
    const std::vector<float> tie = {0.1f, 3.0f, -1.0f, 3.0f, 3.0f};
    CHECK(s.sample(tie.data(), 5) == 1);
    const std::vector<float> last = {-5.0f, -4.0f, -3.0f};
    CHECK(s.sample(last.data(), 3) == 2);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const std::vector<float> with_nan = {nan, -1.0f, 0.5f, nan};
    CHECK(s.sample(with_nan.data(), 4) == 2);
    Sampler neg(plain(-1.0f));
    CHECK(neg.sample(tie.data(), 5) == 1);
    const std::vector<float> all_nan = {nan, nan};
    CHECK_THROWS_AS(s.sample(all_nan.data(), 2), latte::Error);
    CHECK_THROWS_AS(s.sample(a.data(), 0), latte::Error);
}

TEST_CASE("sampler: the same seed gives the same sequence, different seeds differ", "[sampler]") {
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 2.0f);
    std::vector<float> logits(500);
    for (float& l : logits) l = nd(rng);
    SamplerParams p;  // the defaults: top-k 40, top-p 0.95, min-p 0.05, temp 0.8
    p.temp = 1.5f;
    p.min_p = 0.0f;
    Sampler a(p), b(p);
    p.seed += 1;
    Sampler c(p);
    std::vector<int32_t> sa, sb, sc;
    for (int i = 0; i < 300; ++i) {
        sa.push_back(a.sample(logits.data(), 500));
        sb.push_back(b.sample(logits.data(), 500));
        sc.push_back(c.sample(logits.data(), 500));
    }
    CHECK(sa == sb);
    CHECK(sa != sc);
    std::set<int32_t> distinct(sa.begin(), sa.end());
    CHECK(distinct.size() > 5);  // it really samples
}

TEST_CASE("sampler: top_k = 1 equals greedy", "[sampler]") {
    std::mt19937 rng(11);
    std::uniform_int_distribution<int> ud(0, 9);
    Sampler greedy(plain(0.0f));
    SamplerParams p = plain(1.0f);
    p.top_k = 1;
    Sampler k1(p);
    for (int trial = 0; trial < 200; ++trial) {
        std::vector<float> logits(64);
        for (float& l : logits) l = static_cast<float>(ud(rng));  // many ties
        CHECK(k1.sample(logits.data(), 64) == greedy.sample(logits.data(), 64));
    }
}

TEST_CASE("sampler: frequencies match the softmax with temperature", "[sampler]") {
    const std::vector<float> logits = {1.0f, 2.0f, 0.5f, 3.0f, -1.0f};
    const float temp = 0.7f;
    std::vector<double> p;
    double z = 0.0;
    for (float l : logits) z += std::exp(l / temp);
    for (float l : logits) p.push_back(std::exp(l / temp) / z);
    Sampler s(plain(temp, 2024));
    const std::vector<double> f = frequencies(s, logits, 20000);
    for (size_t i = 0; i < p.size(); ++i) CHECK(std::abs(f[i] - p[i]) < 0.02);
    // top-k 2 renormalizes over the two best tokens
    SamplerParams pk = plain(temp, 99);
    pk.top_k = 2;
    Sampler sk(pk);
    const std::vector<double> fk = frequencies(sk, logits, 20000);
    const double p3 = p[3] / (p[3] + p[1]);
    CHECK(std::abs(fk[3] - p3) < 0.02);
    CHECK(std::abs(fk[1] - (1.0 - p3)) < 0.02);
    CHECK(fk[0] == 0.0);
    CHECK(fk[2] == 0.0);
    CHECK(fk[4] == 0.0);
}

TEST_CASE("sampler: top_p drops the tail", "[sampler]") {
    const std::vector<float> logits = log_probs({0.15, 0.5, 0.05, 0.3});
    SamplerParams p = plain(1.0f, 5);
    p.top_p = 0.75f;  // 0.5 + 0.3 reaches it: keeps ids 1 and 3
    Sampler s(p);
    const std::vector<double> f = frequencies(s, logits, 20000);
    CHECK(f[0] == 0.0);
    CHECK(f[2] == 0.0);
    CHECK(std::abs(f[1] - 0.5 / 0.8) < 0.02);
    CHECK(std::abs(f[3] - 0.3 / 0.8) < 0.02);
    p.top_p = 0.4f;  // the best token alone reaches it
    Sampler one(p);
    const std::vector<double> f1 = frequencies(one, logits, 2000);
    CHECK(f1[1] == Approx(1.0));
    p.top_p = 0.9f;  // needs three tokens
    Sampler three(p);
    const std::vector<double> f3 = frequencies(three, logits, 20000);
    CHECK(f3[2] == 0.0);
    CHECK(std::abs(f3[0] - 0.15 / 0.95) < 0.02);
}

TEST_CASE("sampler: min_p drops tokens below min_p times the top probability", "[sampler]") {
    const std::vector<float> logits = log_probs({0.05, 0.3, 0.5, 0.15});
    SamplerParams p = plain(1.0f, 77);
    p.min_p = 0.25f;  // threshold 0.125: keeps 0.5, 0.3, 0.15
    Sampler s(p);
    const std::vector<double> f = frequencies(s, logits, 20000);
    CHECK(f[0] == 0.0);
    CHECK(std::abs(f[3] - 0.15 / 0.95) < 0.02);
    CHECK(std::abs(f[2] - 0.5 / 0.95) < 0.02);
    p.min_p = 0.35f;  // threshold 0.175: keeps 0.5, 0.3
    Sampler s2(p);
    const std::vector<double> f2 = frequencies(s2, logits, 20000);
    CHECK(f2[0] == 0.0);
    CHECK(f2[3] == 0.0);
    CHECK(std::abs(f2[1] - 0.3 / 0.8) < 0.02);
    p.min_p = 2.0f;  // nothing passes: the best token is still kept
    Sampler s3(p);
    CHECK(s3.sample(logits.data(), 4) == 2);
    // min-p applies to the probabilities after temperature: at temp 0.5, p ∝ p^2 so 0.15 falls
    // below 0.25 * max (0.0225 / 0.25 = 0.09 < 0.25) while 0.3 stays (0.36).
    p = plain(0.5f, 3);
    p.min_p = 0.25f;
    Sampler s4(p);
    const std::vector<double> f4 = frequencies(s4, logits, 5000);
    CHECK(f4[3] == 0.0);
    CHECK(f4[1] > 0.0);
}

TEST_CASE("sampler: infinite logits", "[sampler]") {
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> masked = {-inf, 0.0f, -inf, 0.0f};
    Sampler s(plain(1.0f, 8));
    const std::vector<double> f = frequencies(s, masked, 4000);
    CHECK(f[0] == 0.0);
    CHECK(f[2] == 0.0);
    CHECK(std::abs(f[1] - 0.5) < 0.05);
    const std::vector<float> forced = {1.0f, inf, 2.0f};
    Sampler s2(plain(1.0f, 9));
    for (int i = 0; i < 100; ++i) CHECK(s2.sample(forced.data(), 3) == 1);
}

TEST_CASE("sampler: repetition penalty divides positive and multiplies negative logits of recent tokens", "[sampler]") {
    // Greedy over {2, 1.5, -1, -1.2}: token 0 wins; penalty 2 on 0 makes it 1.0 < 1.5.
    const std::vector<float> l = {2.0f, 1.5f, -1.0f, -1.2f};
    SamplerParams p = plain(0.0f);
    p.repeat_penalty = 2.0f;
    Sampler s(p);
    s.accept(0);
    CHECK(s.sample(l.data(), 4) == 1);
    // Now 0 and 1 are both in the history: 1.0 vs 0.75; 0 wins again.
    CHECK(s.sample(l.data(), 4) == 0);
    REQUIRE(s.history().size() == 3);
    // Negative logits get more negative: among {-1 (penalized -> -2), -1.2}, -1.2 wins.
    const std::vector<float> neg = {-1.0f, -1.2f};
    Sampler n(p);
    n.accept(0);
    CHECK(n.sample(neg.data(), 2) == 1);
    // Counted once however often it occurs.
    Sampler once(p);
    for (int i = 0; i < 5; ++i) once.accept(0);
    const std::vector<float> l2 = {2.0f, 0.9f};
    CHECK(once.sample(l2.data(), 2) == 0);  // 2 / 2 = 1.0 > 0.9 (not 2 / 2^5)
}

TEST_CASE("sampler: repetition penalty looks back repeat_last_n tokens; 1 is off", "[sampler]") {
    const std::vector<float> l = {2.0f, 1.5f, 0.0f};
    SamplerParams p = plain(0.0f);
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = 2;
    Sampler s(p);
    s.accept(0);
    s.accept(2);
    s.accept(2);  // 0 has left the window
    CHECK(s.history().size() == 2);
    CHECK(s.sample(l.data(), 3) == 0);
    SamplerParams off = plain(0.0f);
    off.repeat_penalty = 1.0f;
    Sampler o(off);
    o.accept(0);
    CHECK(o.sample(l.data(), 3) == 0);
    SamplerParams bad = plain(0.0f);
    bad.repeat_penalty = 0.0f;
    Sampler b(bad);
    CHECK_THROWS_AS(b.sample(l.data(), 3), latte::Error);
    SamplerParams zero_n = plain(0.0f);
    zero_n.repeat_penalty = 2.0f;
    zero_n.repeat_last_n = 0;
    Sampler z(zero_n);
    z.accept(0);
    CHECK(z.history().empty());
    CHECK(z.sample(l.data(), 3) == 0);
}

// Token sampling: greedy, or top-k -> softmax(temp) -> top-p -> min-p -> a draw from the seeded RNG.
#include "latte/sampler.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>

#include "latte/error.h"

namespace latte {

Sampler::Sampler(const SamplerParams& p) : p_(p), rng_(p.seed) {}

namespace {
// Higher logit first; equal logits: lower id first (deterministic order).
bool better(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
}
}  // namespace

void Sampler::accept(int32_t token) {
    if (p_.repeat_last_n == 0) return;
    history_.push_back(token);
    if (p_.repeat_last_n > 0)
        while (history_.size() > static_cast<size_t>(p_.repeat_last_n)) history_.pop_front();
}

int32_t Sampler::sample(const float* logits, int32_t n_vocab) {
    if (n_vocab <= 0) throw Error("sampler: n_vocab is " + std::to_string(n_vocab) + ", expected > 0");
    if (logits == nullptr) throw Error("sampler: logits is null");
    if (!(p_.repeat_penalty > 0.0f))
        throw Error("sampler: repeat_penalty is " + std::to_string(p_.repeat_penalty) + ", expected > 0");
    if (p_.repeat_penalty != 1.0f && !history_.empty()) {
        penalized_.assign(logits, logits + n_vocab);
        std::vector<bool> seen(static_cast<size_t>(n_vocab), false);
        for (int32_t t : history_) {
            if (t < 0 || t >= n_vocab || seen[static_cast<size_t>(t)]) continue;
            seen[static_cast<size_t>(t)] = true;
            float& l = penalized_[static_cast<size_t>(t)];
            l = l > 0.0f ? l / p_.repeat_penalty : l * p_.repeat_penalty;
        }
        logits = penalized_.data();
    }
    const int32_t t = pick(logits, n_vocab);
    accept(t);
    return t;
}

int32_t Sampler::pick(const float* logits, int32_t n_vocab) {
    if (p_.temp <= 0.0f) {  // greedy: argmax, lowest id on ties, NaN ignored
        int32_t best = -1;
        for (int32_t i = 0; i < n_vocab; ++i)
            if (!std::isnan(logits[i]) && (best < 0 || logits[i] > logits[best])) best = i;
        if (best < 0) throw Error("sampler: every logit is NaN");
        return best;
    }

    // Candidates; NaN logits are dropped and infinities clamped so that the arithmetic stays finite.
    cand_.clear();
    cand_.reserve(static_cast<size_t>(n_vocab));
    for (int32_t i = 0; i < n_vocab; ++i)
        if (!std::isnan(logits[i])) cand_.emplace_back(std::clamp(logits[i], -FLT_MAX, FLT_MAX), i);
    if (cand_.empty()) throw Error("sampler: every logit is NaN");

    // top-k
    if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < cand_.size()) {
        std::nth_element(cand_.begin(), cand_.begin() + (p_.top_k - 1), cand_.end(), better);
        cand_.resize(static_cast<size_t>(p_.top_k));
    }

    // softmax with temperature over the top-k set: p_i = w_i / z with w_i = exp((l_i - l_max) / temp).
    float lmax = -FLT_MAX;
    for (const auto& c : cand_) lmax = std::max(lmax, c.first);
    const double inv_t = 1.0 / static_cast<double>(p_.temp);
    const auto weight = [&](float l) { return std::exp((static_cast<double>(l) - lmax) * inv_t); };
    double z = 0.0;
    for (const auto& c : cand_) z += weight(c.first);

    // min-p keeps p_i >= min_p * p_max, i.e. w_i >= min_p (the top candidate, w = 1, always stays). Both top-p
    // and min-p keep a prefix of the sorted candidates, so applying min-p first (without
    // renormalizing) and then top-p with the top-k normalizer z gives the same set as top-p then
    // min-p, and the sort below only sees the survivors.
    if (p_.min_p > 0.0f) {
        const double mp = p_.min_p;
        cand_.erase(std::remove_if(cand_.begin(), cand_.end(),
                                   [&](const auto& c) { return c.first != lmax && weight(c.first) < mp; }),
                    cand_.end());
    }
    std::sort(cand_.begin(), cand_.end(), better);

    // top-p: the smallest prefix whose probability reaches top_p (at least one candidate).
    if (p_.top_p < 1.0f) {
        const double target = static_cast<double>(p_.top_p) * z;
        double cum = 0.0;
        size_t keep = cand_.size();
        for (size_t i = 0; i < cand_.size(); ++i) {
            cum += weight(cand_[i].first);
            if (cum >= target) { keep = i + 1; break; }
        }
        cand_.resize(std::max<size_t>(keep, 1));
    }

    // Draw: u uniform in [0, sum of kept weights), from 53 random bits (portable across libraries).
    double sum = 0.0;
    for (const auto& c : cand_) sum += weight(c.first);
    const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * sum;
    double cum = 0.0;
    for (const auto& c : cand_) {
        cum += weight(c.first);
        if (u < cum) return c.second;
    }
    return cand_.back().second;
}

}  // namespace latte

// Token sampling over a logits row.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

namespace latte {

struct SamplerParams {
    float temp = 0.8f;     // <= 0: greedy (argmax, lowest id on ties)
    int32_t top_k = 40;    // <= 0: off
    float top_p = 0.95f;   // >= 1: off
    float min_p = 0.05f;   // <= 0: off
    uint64_t seed = 0xC0FFEE;
};

class Sampler {
public:
    explicit Sampler(const SamplerParams& p = {});
    int32_t sample(const float* logits, int32_t n_vocab);
    const SamplerParams& params() const { return p_; }

private:
    SamplerParams p_;
    std::mt19937_64 rng_;
    std::vector<std::pair<float, int32_t>> cand_;
};

}  // namespace latte

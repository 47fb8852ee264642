// Token sampling over a logits row.
#pragma once
#include <cstdint>
#include <deque>
#include <random>
#include <vector>

namespace latte {

struct SamplerParams {
    float temp = 0.8f;     // <= 0: greedy (argmax, lowest id on ties)
    int32_t top_k = 40;    // <= 0: off
    float top_p = 0.95f;   // >= 1: off
    float min_p = 0.05f;   // <= 0: off
    uint64_t seed = 0xC0FFEE;
    // Repetition penalty (llama.cpp's): the logit of a token among the last repeat_last_n tokens
    // (the accepted prompt and the sampled ones) is divided by repeat_penalty when positive and
    // multiplied by it when negative, once however often it occurs. 1 = off; repeat_last_n 0 = off,
    // -1 = the whole history.
    float repeat_penalty = 1.0f;
    int32_t repeat_last_n = 64;
};

class Sampler {
public:
    explicit Sampler(const SamplerParams& p = {});
    // Picks a token from the logits (with the repetition penalty applied to a copy) and appends it
    // to the history.
    int32_t sample(const float* logits, int32_t n_vocab);
    // Appends tokens the sampler did not pick (the prompt) to the history.
    void accept(int32_t token);
    void reset_history() { history_.clear(); }
    const std::deque<int32_t>& history() const { return history_; }
    const SamplerParams& params() const { return p_; }

private:
    SamplerParams p_;
    std::mt19937_64 rng_;
    std::vector<std::pair<float, int32_t>> cand_;
    std::deque<int32_t> history_;  // the last repeat_last_n tokens
    std::vector<float> penalized_;
    int32_t pick(const float* logits, int32_t n_vocab);
};

}  // namespace latte

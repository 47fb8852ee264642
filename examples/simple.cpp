// The C++ API in a few lines: load a model, decode a prompt, generate greedily.
//   simple MODEL.gguf [PROMPT] [N]
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "latte/latte.h"
#include "latte/sampler.h"

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s MODEL.gguf [PROMPT] [N]\n", argv[0]);
        return 2;
    }
    const char* prompt = argc > 2 ? argv[2] : "Hello";
    const int n_predict = argc > 3 ? std::atoi(argv[3]) : 16;
    try {
        auto model = latte::Model::load(argv[1]);
        latte::Context ctx(model, {.n_ctx = 512, .n_threads = 2, .mla = latte::MlaMode::Absorbed});
        latte::Sampler sampler({.temp = 0.0f});  // greedy
        const latte::Tokenizer& tok = model->tokenizer();
        std::vector<int32_t> ids = tok.encode(prompt, /*add_bos=*/true);
        ctx.decode(ids);
        std::cout << prompt;
        for (int i = 0; i < n_predict; ++i) {
            const int32_t t = sampler.sample(ctx.logits(), static_cast<int32_t>(model->hparams().n_vocab));
            if (t == tok.eos()) break;
            std::cout << tok.token_to_piece(t) << std::flush;
            ctx.decode({t});
        }
        std::cout << "\n";
        std::fprintf(stderr, "simple: %u tokens in the context\n", ctx.n_past());
    } catch (const latte::Error& e) {
        std::fprintf(stderr, "simple: error: %s\n", e.what());
        return 1;
    }
    return 0;
}

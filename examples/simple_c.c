/* The C API: load a model, decode a prompt, generate greedily; every call's status checked.
 *   simple_c MODEL.gguf [PROMPT] [N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "latte/latte_c.h"

int main(int argc, char** argv) {
    char err[512];
    latte_model* model = NULL;
    latte_context* ctx = NULL;
    latte_sampler* smp = NULL;
    int32_t toks[512];
    size_t n = 0;
    int rc = 1;
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf [PROMPT] [N]\n", argv[0]);
        return 2;
    }
    const char* prompt = argc > 2 ? argv[2] : "Hello";
    const int n_predict = argc > 3 ? atoi(argv[3]) : 16;

    if (latte_model_load(argv[1], &model, err, sizeof err) != LATTE_OK) {
        fprintf(stderr, "simple_c: error: %s\n", err);
        return 1;
    }
    latte_context_params cp = latte_context_default_params();
    cp.n_ctx = 512;
    cp.n_threads = 2;
    cp.mla = 1;
    latte_sampler_params sp = latte_sampler_default_params();
    sp.temp = 0.0f; /* greedy */
    if (latte_context_create(model, &cp, &ctx, err, sizeof err) != LATTE_OK ||
        latte_sampler_create(&sp, &smp, err, sizeof err) != LATTE_OK ||
        latte_tokenize(model, prompt, strlen(prompt), 1, toks, 512, &n, err, sizeof err) != LATTE_OK ||
        latte_decode(ctx, toks, n, err, sizeof err) != LATTE_OK) {
        fprintf(stderr, "simple_c: error: %s\n", err);
        goto done;
    }
    printf("%s", prompt);
    for (int i = 0; i < n_predict; ++i) {
        int32_t t;
        char piece[64];
        size_t len = 0;
        if (latte_sample(smp, ctx, &t, err, sizeof err) != LATTE_OK) goto fail;
        if (t == latte_model_eos(model)) break;
        if (latte_token_to_piece(model, t, piece, sizeof piece, &len) == LATTE_OK) fwrite(piece, 1, len, stdout);
        fflush(stdout);
        if (latte_decode(ctx, &t, 1, err, sizeof err) != LATTE_OK) goto fail;
    }
    printf("\n");
    fprintf(stderr, "simple_c: %u tokens in the context\n", latte_n_past(ctx));
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "simple_c: error: %s\n", err);
done:
    latte_sampler_free(smp);
    latte_context_free(ctx);
    latte_model_free(model);
    return rc;
}

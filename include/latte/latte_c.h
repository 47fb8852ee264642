/* latte — C API: load a deepseek2 GGUF, make a context, tokenize, decode, read logits, sample.
 *
 * Handles are opaque. Functions that can fail return an int status (LATTE_OK = 0, else one of the
 * LATTE_ERR_* codes) and, where they take one, write a NUL-terminated message naming the file,
 * flag or value into errbuf (truncated to errlen; errbuf may be NULL). Nothing here exits the
 * process or lets a C++ exception escape. A context must not be used from two threads at once.
 */
#ifndef LATTE_C_H
#define LATTE_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LATTE_OK 0
#define LATTE_ERR_INVALID_ARGUMENT 1 /* a NULL handle/pointer, a bad parameter or token id */
#define LATTE_ERR_MODEL 2            /* the file cannot be read or is not a usable deepseek2 GGUF */
#define LATTE_ERR_CONTEXT_FULL 3     /* decode would pass n_ctx */
#define LATTE_ERR_BUFFER_TOO_SMALL 4 /* the output did not fit: *n_out says how much is needed */
#define LATTE_ERR_OUT_OF_MEMORY 5
#define LATTE_ERR_INTERNAL 6

typedef struct latte_model latte_model;
typedef struct latte_context latte_context;
typedef struct latte_sampler latte_sampler;

#define LATTE_MLA_AUTO 4  /* latte_context_params.mla: mode 1 or 2 per ubatch by the cost model (-mla auto) */

typedef struct latte_context_params {
    uint32_t n_ctx;          /* context length (KV cache), default 4096 */
    uint32_t n_ubatch;       /* tokens per forward pass, default 512 */
    uint32_t n_threads;      /* 0 = the machine's physical cores */
    int mla;                 /* -mla mode 0..3, or LATTE_MLA_AUTO (the default) */
    int flash_attn;          /* 1 = tiled online-softmax attention (default), 0 = off */
    const char* cache_type;  /* "f32", "f16" (default), "bf16", "q8_0", "q8_KV" */
    uint32_t n_threads_batch; /* threads for prompt ubatches (more than one token); 0 = n_threads (default) */
} latte_context_params;

typedef struct latte_sampler_params {
    float temp;            /* <= 0: greedy; default 0.8 */
    int32_t top_k;         /* <= 0: off; default 40 */
    float top_p;           /* >= 1: off; default 0.95 */
    float min_p;           /* <= 0: off; default 0.05 */
    float repeat_penalty;  /* 1 = off (default) */
    int32_t repeat_last_n; /* tokens the penalty looks back over; default 64 */
    uint64_t seed;
} latte_sampler_params;

/* "0.1.0" */
const char* latte_version(void);
/* A short English description of a status code ("ok", "invalid argument", ...). */
const char* latte_status_string(int status);
/* The kernel level this process runs ("scalar", "avx2", "avx512", "amx", "neon": LATTE_ISA's, else
 * the best this CPU runs), written NUL-terminated into buf. LATTE_ERR_INVALID_ARGUMENT with a message
 * when LATTE_ISA names a level this CPU or build lacks (latte_model_load then fails the same way);
 * LATTE_ERR_BUFFER_TOO_SMALL when buflen < 8. */
int latte_kernel_level(char* buf, size_t buflen, char* errbuf, size_t errlen);

latte_context_params latte_context_default_params(void);
latte_sampler_params latte_sampler_default_params(void);

int latte_model_load(const char* path, latte_model** out, char* errbuf, size_t errlen);
void latte_model_free(latte_model* model); /* NULL is ignored; contexts keep the model alive */
int32_t latte_model_n_vocab(const latte_model* model); /* the logits row length; -1 for NULL */
int32_t latte_model_bos(const latte_model* model);
int32_t latte_model_eos(const latte_model* model);
/* The model's one-line description, copied into buf (NUL-terminated, truncated). */
void latte_model_describe(const latte_model* model, char* buf, size_t buflen);

/* Text -> token ids. At most n_max ids are written; *n_out is the full count. When n_max is too
 * small, returns LATTE_ERR_BUFFER_TOO_SMALL (call again with *n_out). add_bos: prepend BOS. */
int latte_tokenize(const latte_model* model, const char* text, size_t text_len, int add_bos, int32_t* tokens,
                   size_t n_max, size_t* n_out, char* errbuf, size_t errlen);
/* The bytes one token stands for (not NUL-terminated; *n_out is their count). */
int latte_token_to_piece(const latte_model* model, int32_t token, char* buf, size_t buflen, size_t* n_out);

int latte_context_create(latte_model* model, const latte_context_params* params, latte_context** out,
                         char* errbuf, size_t errlen);
void latte_context_free(latte_context* ctx);
/* Appends the tokens to the cache and runs them through the model; then the last token's logits
 * are available. */
int latte_decode(latte_context* ctx, const int32_t* tokens, size_t n_tokens, char* errbuf, size_t errlen);
/* The last decoded token's logits (latte_model_n_vocab floats), valid until the next decode;
 * NULL before the first decode. */
const float* latte_get_logits(const latte_context* ctx);
uint32_t latte_n_past(const latte_context* ctx);
uint32_t latte_n_ctx(const latte_context* ctx);
void latte_context_clear(latte_context* ctx);

int latte_sampler_create(const latte_sampler_params* params, latte_sampler** out, char* errbuf, size_t errlen);
void latte_sampler_free(latte_sampler* s);
/* Samples from the context's last logits; the token is remembered for the repetition penalty. */
int latte_sample(latte_sampler* s, const latte_context* ctx, int32_t* token, char* errbuf, size_t errlen);
/* Tells the sampler about tokens it did not pick (the prompt), for the repetition penalty. */
void latte_sampler_accept(latte_sampler* s, const int32_t* tokens, size_t n_tokens);

#ifdef __cplusplus
}
#endif

#endif /* LATTE_C_H */

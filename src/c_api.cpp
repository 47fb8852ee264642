// The C API (include/latte/latte_c.h) over the C++ one: every entry point catches everything and
// turns it into a status code and a message.
#include "latte/latte_c.h"

#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "latte/error.h"
#include "latte/latte.h"
#include "latte/sampler.h"

struct latte_model {
    std::shared_ptr<latte::Model> m;
};

struct latte_context {
    std::unique_ptr<latte::Context> ctx;
    bool have_logits = false;
};

struct latte_sampler {
    std::unique_ptr<latte::Sampler> s;
};

namespace {

void set_err(char* buf, size_t len, const std::string& msg) {
    if (!buf || len == 0) return;
    const size_t n = std::min(len - 1, msg.size());
    std::memcpy(buf, msg.data(), n);
    buf[n] = '\0';
}

// Runs f; maps exceptions to codes. `full` marks latte::Error messages about a full context.
template <class F>
int guarded(char* errbuf, size_t errlen, F&& f) {
    try {
        set_err(errbuf, errlen, "");
        return f();
    } catch (const latte::Error& e) {
        set_err(errbuf, errlen, e.what());
        return std::strstr(e.what(), "context full") ? LATTE_ERR_CONTEXT_FULL : LATTE_ERR_INVALID_ARGUMENT;
    } catch (const std::bad_alloc&) {
        set_err(errbuf, errlen, "out of memory");
        return LATTE_ERR_OUT_OF_MEMORY;
    } catch (const std::exception& e) {
        set_err(errbuf, errlen, std::string("internal error: ") + e.what());
        return LATTE_ERR_INTERNAL;
    } catch (...) {
        set_err(errbuf, errlen, "internal error: unknown exception");
        return LATTE_ERR_INTERNAL;
    }
}

int invalid(char* errbuf, size_t errlen, const std::string& msg) {
    set_err(errbuf, errlen, msg);
    return LATTE_ERR_INVALID_ARGUMENT;
}

}  // namespace

extern "C" {

const char* latte_version(void) { return "0.1.0"; }

const char* latte_status_string(int status) {
    switch (status) {
        case LATTE_OK: return "ok";
        case LATTE_ERR_INVALID_ARGUMENT: return "invalid argument";
        case LATTE_ERR_MODEL: return "cannot use the model file";
        case LATTE_ERR_CONTEXT_FULL: return "context full";
        case LATTE_ERR_BUFFER_TOO_SMALL: return "buffer too small";
        case LATTE_ERR_OUT_OF_MEMORY: return "out of memory";
        case LATTE_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

int latte_kernel_level(char* buf, size_t buflen, char* errbuf, size_t errlen) {
    if (!buf) return invalid(errbuf, errlen, "latte_kernel_level: buf is NULL");
    return guarded(errbuf, errlen, [&] {
        const std::string level = latte::kernel_level();
        if (buflen < 8) {  // every level's name fits in 8 bytes
            if (buflen) buf[0] = '\0';
            set_err(errbuf, errlen, "latte_kernel_level: buflen " + std::to_string(buflen) + " < 8");
            return LATTE_ERR_BUFFER_TOO_SMALL;
        }
        std::memcpy(buf, level.c_str(), level.size() + 1);
        return LATTE_OK;
    });
}

latte_context_params latte_context_default_params(void) {
    const latte::ContextParams d;
    return {d.n_ctx, d.n_ubatch, d.n_threads, static_cast<int>(d.mla), d.flash_attn ? 1 : 0, "f16", d.n_threads_batch};
}

latte_sampler_params latte_sampler_default_params(void) {
    const latte::SamplerParams d;
    return {d.temp, d.top_k, d.top_p, d.min_p, d.repeat_penalty, d.repeat_last_n, d.seed};
}

int latte_model_load(const char* path, latte_model** out, char* errbuf, size_t errlen) {
    if (!out) return invalid(errbuf, errlen, "latte_model_load: out is NULL");
    *out = nullptr;
    if (!path) return invalid(errbuf, errlen, "latte_model_load: path is NULL");
    int rc = guarded(errbuf, errlen, [&] {
        latte::ModelParams mp;
        mp.progress = false;
        auto m = latte::Model::load(path, mp);
        *out = new latte_model{std::move(m)};
        return LATTE_OK;
    });
    if (rc == LATTE_ERR_INVALID_ARGUMENT) {
        rc = LATTE_ERR_MODEL;  // anything the loader rejects is about the file
        if (errbuf && errlen && !std::strstr(errbuf, path)) {
            const std::string msg = std::string(path) + ": " + errbuf;
            set_err(errbuf, errlen, msg);
        }
    }
    return rc;
}

void latte_model_free(latte_model* model) { delete model; }

int32_t latte_model_n_vocab(const latte_model* model) {
    return model ? static_cast<int32_t>(model->m->hparams().n_vocab) : -1;
}
int32_t latte_model_bos(const latte_model* model) { return model ? model->m->tokenizer().bos() : -1; }
int32_t latte_model_eos(const latte_model* model) { return model ? model->m->tokenizer().eos() : -1; }

void latte_model_describe(const latte_model* model, char* buf, size_t buflen) {
    try {
        set_err(buf, buflen, model ? model->m->describe() : std::string());
    } catch (...) {
        set_err(buf, buflen, "");
    }
}

int latte_tokenize(const latte_model* model, const char* text, size_t text_len, int add_bos, int32_t* tokens,
                   size_t n_max, size_t* n_out, char* errbuf, size_t errlen) {
    if (!model || (!text && text_len) || !n_out || (!tokens && n_max))
        return invalid(errbuf, errlen, "latte_tokenize: NULL model, text, tokens or n_out");
    return guarded(errbuf, errlen, [&] {
        const auto ids = model->m->tokenizer().encode(std::string_view(text ? text : "", text_len), add_bos != 0,
                                                      /*parse_special=*/true);
        *n_out = ids.size();
        std::memcpy(tokens, ids.data(), std::min(n_max, ids.size()) * sizeof(int32_t));
        if (ids.size() > n_max) {
            set_err(errbuf, errlen, "latte_tokenize: " + std::to_string(ids.size()) + " tokens, room for " + std::to_string(n_max));
            return LATTE_ERR_BUFFER_TOO_SMALL;
        }
        return LATTE_OK;
    });
}

int latte_token_to_piece(const latte_model* model, int32_t token, char* buf, size_t buflen, size_t* n_out) {
    if (!model || !n_out || (!buf && buflen)) return LATTE_ERR_INVALID_ARGUMENT;
    if (token < 0 || token >= model->m->tokenizer().n_vocab()) return LATTE_ERR_INVALID_ARGUMENT;
    return guarded(nullptr, 0, [&] {
        const std::string p = model->m->tokenizer().token_to_piece(token);
        *n_out = p.size();
        std::memcpy(buf, p.data(), std::min(buflen, p.size()));
        return p.size() > buflen ? LATTE_ERR_BUFFER_TOO_SMALL : LATTE_OK;
    });
}

int latte_context_create(latte_model* model, const latte_context_params* params, latte_context** out, char* errbuf,
                         size_t errlen) {
    if (!out) return invalid(errbuf, errlen, "latte_context_create: out is NULL");
    *out = nullptr;
    if (!model) return invalid(errbuf, errlen, "latte_context_create: model is NULL");
    return guarded(errbuf, errlen, [&] {
        const latte_context_params p = params ? *params : latte_context_default_params();
        latte::ContextParams cp;
        cp.n_ctx = p.n_ctx;
        cp.n_ubatch = p.n_ubatch;
        cp.n_threads = p.n_threads;
        cp.n_threads_batch = p.n_threads_batch;
        static_assert(static_cast<int>(latte::MlaMode::Auto) == LATTE_MLA_AUTO, "the C API numbers auto as MlaMode does");
        cp.mla = p.mla == LATTE_MLA_AUTO ? latte::MlaMode::Auto : latte::parse_mla_mode(std::to_string(p.mla));
        cp.flash_attn = p.flash_attn != 0;
        cp.cache_type = latte::parse_type(p.cache_type ? p.cache_type : "f16");
        auto c = std::make_unique<latte::Context>(model->m, cp);
        *out = new latte_context{std::move(c), false};
        return LATTE_OK;
    });
}

void latte_context_free(latte_context* ctx) { delete ctx; }

int latte_decode(latte_context* ctx, const int32_t* tokens, size_t n_tokens, char* errbuf, size_t errlen) {
    if (!ctx || (!tokens && n_tokens)) return invalid(errbuf, errlen, "latte_decode: NULL context or tokens");
    if (n_tokens == 0) return invalid(errbuf, errlen, "latte_decode: no tokens");
    return guarded(errbuf, errlen, [&] {
        const int32_t n_vocab = static_cast<int32_t>(ctx->ctx->model().hparams().n_vocab);
        for (size_t i = 0; i < n_tokens; ++i)
            if (tokens[i] < 0 || tokens[i] >= n_vocab) {
                set_err(errbuf, errlen, "latte_decode: token " + std::to_string(tokens[i]) + " at " + std::to_string(i) +
                                            " is out of range, expected 0.." + std::to_string(n_vocab - 1));
                return LATTE_ERR_INVALID_ARGUMENT;
            }
        if (static_cast<uint64_t>(ctx->ctx->n_past()) + n_tokens > ctx->ctx->params().n_ctx) {
            set_err(errbuf, errlen, "latte_decode: context full: " + std::to_string(ctx->ctx->n_past()) + " cached + " +
                                        std::to_string(n_tokens) + " new > n_ctx " + std::to_string(ctx->ctx->params().n_ctx));
            return LATTE_ERR_CONTEXT_FULL;
        }
        ctx->ctx->decode(std::vector<int32_t>(tokens, tokens + n_tokens));
        ctx->have_logits = true;
        return LATTE_OK;
    });
}

const float* latte_get_logits(const latte_context* ctx) {
    if (!ctx || !ctx->have_logits) return nullptr;
    try {
        return ctx->ctx->logits(-1);
    } catch (...) {
        return nullptr;
    }
}

uint32_t latte_n_past(const latte_context* ctx) { return ctx ? ctx->ctx->n_past() : 0; }
uint32_t latte_n_ctx(const latte_context* ctx) { return ctx ? ctx->ctx->params().n_ctx : 0; }

void latte_context_clear(latte_context* ctx) {
    if (!ctx) return;
    ctx->ctx->clear();
    ctx->have_logits = false;
}

int latte_sampler_create(const latte_sampler_params* params, latte_sampler** out, char* errbuf, size_t errlen) {
    if (!out) return invalid(errbuf, errlen, "latte_sampler_create: out is NULL");
    *out = nullptr;
    const latte_sampler_params p = params ? *params : latte_sampler_default_params();
    if (!(p.repeat_penalty > 0.0f))
        return invalid(errbuf, errlen, "latte_sampler_create: repeat_penalty must be > 0, got " + std::to_string(p.repeat_penalty));
    return guarded(errbuf, errlen, [&] {
        latte::SamplerParams sp;
        sp.temp = p.temp;
        sp.top_k = p.top_k;
        sp.top_p = p.top_p;
        sp.min_p = p.min_p;
        sp.repeat_penalty = p.repeat_penalty;
        sp.repeat_last_n = p.repeat_last_n;
        sp.seed = p.seed;
        *out = new latte_sampler{std::make_unique<latte::Sampler>(sp)};
        return LATTE_OK;
    });
}

void latte_sampler_free(latte_sampler* s) { delete s; }

int latte_sample(latte_sampler* s, const latte_context* ctx, int32_t* token, char* errbuf, size_t errlen) {
    if (!s || !ctx || !token) return invalid(errbuf, errlen, "latte_sample: NULL sampler, context or token");
    const float* logits = latte_get_logits(ctx);
    if (!logits) return invalid(errbuf, errlen, "latte_sample: no logits yet (decode first)");
    return guarded(errbuf, errlen, [&] {
        *token = s->s->sample(logits, static_cast<int32_t>(ctx->ctx->model().hparams().n_vocab));
        return LATTE_OK;
    });
}

void latte_sampler_accept(latte_sampler* s, const int32_t* tokens, size_t n_tokens) {
    if (!s || !tokens) return;
    try {
        for (size_t i = 0; i < n_tokens; ++i) s->s->accept(tokens[i]);
    } catch (...) {
    }
}

}  // extern "C"

// Tests of the C API (include/latte/latte_c.h): status codes and messages instead of exceptions,
// and the same numbers as the C++ API.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "latte/latte.h"
#include "latte/latte_c.h"
#include "latte/sampler.h"

namespace {

struct CModel {
    latte_model* m = nullptr;
    CModel() {
        char err[256];
        REQUIRE(latte_model_load(LATTE_TINY_MODEL, &m, err, sizeof err) == LATTE_OK);
    }
    ~CModel() { latte_model_free(m); }
};

latte_context* make_ctx(latte_model* m, uint32_t n_ctx = 64) {
    latte_context_params p = latte_context_default_params();
    p.n_ctx = n_ctx;
    p.n_threads = 1;
    p.mla = 1;
    latte_context* c = nullptr;
    char err[256];
    REQUIRE(latte_context_create(m, &p, &c, err, sizeof err) == LATTE_OK);
    return c;
}

}  // namespace

TEST_CASE("capi: a bad model file is a status and a message, not an exception", "[capi]") {
    char err[256] = "junk";
    latte_model* m = reinterpret_cast<latte_model*>(0x1);
    CHECK(latte_model_load("/nonexistent/x.gguf", &m, err, sizeof err) == LATTE_ERR_MODEL);
    CHECK(m == nullptr);
    CHECK(std::string(err).find("/nonexistent/x.gguf") != std::string::npos);
    CHECK(latte_model_load(LATTE_SOURCE_DIR "/CMakeLists.txt", &m, err, sizeof err) == LATTE_ERR_MODEL);
    CHECK(std::string(err).find("CMakeLists.txt") != std::string::npos);
    char tiny[8];
    CHECK(latte_model_load("/nonexistent/x.gguf", &m, tiny, sizeof tiny) == LATTE_ERR_MODEL);
    CHECK(std::strlen(tiny) == 7);  // truncated, NUL-terminated
    CHECK(latte_model_load(nullptr, &m, err, sizeof err) == LATTE_ERR_INVALID_ARGUMENT);
    CHECK(latte_model_load(LATTE_TINY_MODEL, nullptr, nullptr, 0) == LATTE_ERR_INVALID_ARGUMENT);
    CHECK(std::string(latte_status_string(LATTE_ERR_CONTEXT_FULL)) == "context full");
}

TEST_CASE("capi: the kernel level is the C++ API's", "[capi]") {
    char buf[16] = "junk", err[256];
    REQUIRE(latte_kernel_level(buf, sizeof buf, err, sizeof err) == LATTE_OK);
    CHECK(std::string(buf) == latte::kernel_level());
    CHECK(std::string(err).empty());
    char small[4] = "abc";
    CHECK(latte_kernel_level(small, sizeof small, err, sizeof err) == LATTE_ERR_BUFFER_TOO_SMALL);
    CHECK(small[0] == '\0');
    CHECK(std::string(err).find("buflen 4") != std::string::npos);
    CHECK(latte_kernel_level(nullptr, 8, err, sizeof err) == LATTE_ERR_INVALID_ARGUMENT);
}

TEST_CASE("capi: NULL handles are refused", "[capi]") {
    char err[128];
    latte_context* c = nullptr;
    CHECK(latte_context_create(nullptr, nullptr, &c, err, sizeof err) == LATTE_ERR_INVALID_ARGUMENT);
    CHECK(latte_decode(nullptr, nullptr, 0, err, sizeof err) == LATTE_ERR_INVALID_ARGUMENT);
    CHECK(latte_get_logits(nullptr) == nullptr);
    CHECK(latte_model_n_vocab(nullptr) == -1);
    int32_t t;
    CHECK(latte_sample(nullptr, nullptr, &t, err, sizeof err) == LATTE_ERR_INVALID_ARGUMENT);
    latte_model_free(nullptr);
    latte_context_free(nullptr);
    latte_sampler_free(nullptr);
}

TEST_CASE("capi: tokenize matches the C++ tokenizer, with a too-small buffer reported", "[capi]") {
    CModel cm;
    auto model = latte::Model::load(LATTE_TINY_MODEL);
    const std::string text = "Hello, world! 123";
    const auto want = model->tokenizer().encode(text, true, true);
    std::vector<int32_t> ids(64);
    size_t n = 0;
    char err[128];
    REQUIRE(latte_tokenize(cm.m, text.data(), text.size(), 1, ids.data(), ids.size(), &n, err, sizeof err) == LATTE_OK);
    ids.resize(n);
    CHECK(ids == want);
    CHECK(ids.front() == latte_model_bos(cm.m));
    int32_t two[2];
    CHECK(latte_tokenize(cm.m, text.data(), text.size(), 1, two, 2, &n, err, sizeof err) == LATTE_ERR_BUFFER_TOO_SMALL);
    CHECK(n == want.size());
    std::string back;
    for (size_t i = 1; i < want.size(); ++i) {
        char piece[32];
        size_t len = 0;
        REQUIRE(latte_token_to_piece(cm.m, want[i], piece, sizeof piece, &len) == LATTE_OK);
        back.append(piece, len);
    }
    CHECK(back == text);
    size_t len = 0;
    char piece[4];
    CHECK(latte_token_to_piece(cm.m, -1, piece, sizeof piece, &len) == LATTE_ERR_INVALID_ARGUMENT);
    CHECK(latte_token_to_piece(cm.m, latte_model_n_vocab(cm.m) + 5, piece, sizeof piece, &len) == LATTE_ERR_INVALID_ARGUMENT);
}

TEST_CASE("capi: decode gives the C++ API's logits; errors keep the context usable", "[capi]") {
    CModel cm;
    latte_context* c = make_ctx(cm.m, 8);
    CHECK(latte_get_logits(c) == nullptr);  // nothing decoded yet
    const std::vector<int32_t> toks = {0, 5, 7, 9};
    char err[256];
    REQUIRE(latte_decode(c, toks.data(), toks.size(), err, sizeof err) == LATTE_OK);
    const float* lc = latte_get_logits(c);
    REQUIRE(lc != nullptr);
    CHECK(latte_n_past(c) == 4);

    auto model = latte::Model::load(LATTE_TINY_MODEL);
    latte::ContextParams p;
    p.n_ctx = 8;
    p.n_threads = 1;
    p.mla = latte::MlaMode::Absorbed;
    latte::Context ctx(model, p);
    ctx.decode(toks);
    const int n_vocab = latte_model_n_vocab(cm.m);
    REQUIRE(n_vocab == static_cast<int>(model->hparams().n_vocab));
    for (int i = 0; i < n_vocab; ++i) REQUIRE(lc[i] == ctx.logits()[i]);

    const int32_t bad = n_vocab;
    CHECK(latte_decode(c, &bad, 1, err, sizeof err) == LATTE_ERR_INVALID_ARGUMENT);
    CHECK(std::string(err).find("out of range") != std::string::npos);
    const std::vector<int32_t> five = {1, 2, 3, 4, 5};
    CHECK(latte_decode(c, five.data(), five.size(), err, sizeof err) == LATTE_ERR_CONTEXT_FULL);
    CHECK(std::string(err).find("context full") != std::string::npos);
    CHECK(latte_n_past(c) == 4);  // unchanged
    CHECK(latte_decode(c, five.data(), 4, err, sizeof err) == LATTE_OK);
    CHECK(latte_n_past(c) == 8);
    latte_context_clear(c);
    CHECK(latte_n_past(c) == 0);
    CHECK(latte_get_logits(c) == nullptr);

    // the default mode is -mla auto, and decodes
    const latte_context_params dp = latte_context_default_params();
    CHECK(dp.mla == LATTE_MLA_AUTO);
    latte_context* ca = nullptr;
    REQUIRE(latte_context_create(cm.m, &dp, &ca, err, sizeof err) == LATTE_OK);
    CHECK(latte_decode(ca, five.data(), 4, err, sizeof err) == LATTE_OK);
    latte_context_free(ca);
    latte_context_params badmla = dp;
    badmla.mla = 7;
    CHECK(latte_context_create(cm.m, &badmla, &ca, err, sizeof err) == LATTE_ERR_INVALID_ARGUMENT);
    CHECK(ca == nullptr);
    CHECK(std::string(err).find("7") != std::string::npos);

    latte_context_params badp = latte_context_default_params();
    badp.cache_type = "q9";
    latte_context* c2 = nullptr;
    CHECK(latte_context_create(cm.m, &badp, &c2, err, sizeof err) == LATTE_ERR_INVALID_ARGUMENT);
    CHECK(c2 == nullptr);
    CHECK(std::string(err).find("q9") != std::string::npos);
    latte_context_free(c);
}

TEST_CASE("capi: greedy sampling is the argmax; the repetition penalty is applied", "[capi]") {
    CModel cm;
    latte_context* c = make_ctx(cm.m);
    const int32_t toks[] = {0, 5, 7};
    char err[256];
    REQUIRE(latte_decode(c, toks, 3, err, sizeof err) == LATTE_OK);
    const float* l = latte_get_logits(c);
    const int n_vocab = latte_model_n_vocab(cm.m);
    int32_t best = 0;
    for (int i = 1; i < n_vocab; ++i)
        if (l[i] > l[best]) best = i;
    latte_sampler_params sp = latte_sampler_default_params();
    sp.temp = 0.0f;
    latte_sampler* s = nullptr;
    REQUIRE(latte_sampler_create(&sp, &s, err, sizeof err) == LATTE_OK);
    int32_t t = -1;
    REQUIRE(latte_sample(s, c, &t, err, sizeof err) == LATTE_OK);
    CHECK(t == best);
    latte_sampler_free(s);
    // A huge penalty on the argmax (accepted as if it were in the prompt) moves the pick elsewhere.
    sp.repeat_penalty = 1e30f;
    REQUIRE(latte_sampler_create(&sp, &s, err, sizeof err) == LATTE_OK);
    latte_sampler_accept(s, &best, 1);
    REQUIRE(latte_sample(s, c, &t, err, sizeof err) == LATTE_OK);
    CHECK(t != best);
    latte_sampler_free(s);
    sp.repeat_penalty = 0.0f;
    CHECK(latte_sampler_create(&sp, &s, err, sizeof err) == LATTE_ERR_INVALID_ARGUMENT);
    CHECK(s == nullptr);
    latte_context_free(c);
}

// latte against transformers (the model authors' computation as Hugging Face ships it).
//
// tests/data/oracle/NAME/ holds a small random DeepseekV3ForCausalLM / DeepseekV2ForCausalLM
// checkpoint, the GGUFs tools/convert_hf_to_gguf.py makes of it (model-f32.gguf, model-q8_0.gguf),
// fixed token ids (ids.i32) and the logits transformers computed for them (logits.f32). They are
// made by tools/make_oracle_fixtures.py; docs/ORACLE.md says how and what was measured.
// tests/data/tiny-en/ holds the held-out text and ids of the English demo model
// (models/latte-tiny-en.gguf) and the perplexity transformers computed on those ids.
//
// The error measure is max_i |latte_i - hf_i| / max_i |hf_i| over all the logits of a fixture.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "latte/gguf.h"
#include "latte/latte.h"
#include "latte/types.h"

using namespace latte;
namespace fs = std::filesystem;

namespace {

fs::path source_root() {
#ifdef LATTE_SOURCE_DIR
    return fs::path(LATTE_SOURCE_DIR);
#else
    return fs::path(__FILE__).parent_path().parent_path();
#endif
}

fs::path data_dir() {
#ifdef LATTE_TEST_DATA
    return fs::path(LATTE_TEST_DATA);
#else
    return source_root() / "tests" / "data";
#endif
}

// LATTE_ORACLE_DIR (a directory of fixture directories) replaces tests/data/oracle: for measuring
// fixtures that are not committed (tools/make_oracle_fixtures.py's x_* configurations).
fs::path oracle_dir() {
    if (const char* d = std::getenv("LATTE_ORACLE_DIR"); d && *d) return fs::path(d);
    return data_dir() / "oracle";
}

template <typename T>
std::vector<T> read_raw(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open " + p.string());
    std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (bytes.size() % sizeof(T) != 0) throw std::runtime_error(p.string() + ": size is not a multiple of the element");
    std::vector<T> v(bytes.size() / sizeof(T));
    std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
}

// "key value" lines.
std::map<std::string, std::string> read_info(const fs::path& p) {
    std::ifstream f(p);
    if (!f) throw std::runtime_error("cannot open " + p.string());
    std::map<std::string, std::string> kv;
    std::string line;
    while (std::getline(f, line)) {
        const size_t sp = line.find(' ');
        if (sp != std::string::npos) kv[line.substr(0, sp)] = line.substr(sp + 1);
    }
    return kv;
}

std::vector<int> parse_splits(const std::string& s) {
    std::vector<int> v;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) v.push_back(std::stoi(item));
    return v;
}

struct Fixture {
    std::string name;
    fs::path dir;
    std::vector<int32_t> ids;
    std::vector<float> logits;  // n_tokens × n_vocab
    std::vector<int> splits;
    int n_vocab = 0;
    bool agrees = true;
};

std::vector<Fixture> fixtures() {
    std::vector<Fixture> out;
    const fs::path root = oracle_dir();
    REQUIRE(fs::is_directory(root));
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(root))
        if (e.is_directory() && fs::exists(e.path() / "info.txt")) dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    for (const fs::path& d : dirs) {
        Fixture fx;
        fx.name = d.filename().string();
        fx.dir = d;
        const auto info = read_info(d / "info.txt");
        fx.n_vocab = std::stoi(info.at("n_vocab"));
        fx.splits = parse_splits(info.at("splits"));
        fx.agrees = info.count("agrees") == 0 || info.at("agrees") == "1";
        fx.ids = read_raw<int32_t>(d / "ids.i32");
        fx.logits = read_raw<float>(d / "logits.f32");
        REQUIRE(fx.logits.size() == fx.ids.size() * static_cast<size_t>(fx.n_vocab));
        int total = 0;
        for (int s : fx.splits) total += s;
        REQUIRE(total == static_cast<int>(fx.ids.size()));
        out.push_back(std::move(fx));
    }
    REQUIRE(!out.empty());
    return out;
}

ContextParams params(MlaMode mode, bool fa, GGMLType cache) {
    ContextParams p;
    p.n_ctx = 256;
    p.n_ubatch = 512;
    p.mla = mode;
    p.flash_attn = fa;
    p.cache_type = cache;
    return p;
}

// All the logits of the fixture's ids, decoded in its splits (the first split of 130 tokens makes
// mode 3 take its decompressed path; the later ones its absorbed path over the cached tokens).
std::vector<float> run(const std::shared_ptr<Model>& m, const Fixture& fx, const ContextParams& p) {
    Context ctx(m, p);
    std::vector<float> out;
    size_t at = 0;
    const size_t nv = static_cast<size_t>(fx.n_vocab);
    for (int s : fx.splits) {
        std::vector<int32_t> part(fx.ids.begin() + static_cast<long>(at), fx.ids.begin() + static_cast<long>(at + s));
        ctx.decode(part, true);
        for (int i = 0; i < s; ++i) {
            const float* l = ctx.logits(i);
            out.insert(out.end(), l, l + nv);
        }
        at += static_cast<size_t>(s);
    }
    return out;
}

double rel_err(const std::vector<float>& got, const std::vector<float>& ref) {
    REQUIRE(got.size() == ref.size());
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
        if (!std::isfinite(got[i])) return INFINITY;
        num = std::max(num, std::fabs(static_cast<double>(got[i]) - ref[i]));
        den = std::max(den, std::fabs(static_cast<double>(ref[i])));
    }
    return num / den;
}

const char* mode_name(MlaMode m) {
    switch (m) {
        case MlaMode::Full: return "0";
        case MlaMode::Absorbed: return "1";
        case MlaMode::Decompressed: return "2";
        case MlaMode::Hybrid: return "3";
        case MlaMode::Auto: return "auto";
    }
    return "?";
}

constexpr MlaMode kModes[] = {MlaMode::Full, MlaMode::Absorbed, MlaMode::Decompressed, MlaMode::Hybrid};

}  // namespace

TEST_CASE("oracle: latte's logits match transformers' with f32 weights in every -mla mode, -fa on and off",
          "[oracle]") {
    for (const Fixture& fx : fixtures()) {
        // model-bf16.gguf where only that is committed: the fixtures' weights are bf16 values, so the
        // bf16 file holds exactly the f32 file's numbers.
        const bool f32 = fs::exists(fx.dir / "model-f32.gguf");
        const auto m = Model::load((fx.dir / (f32 ? "model-f32.gguf" : "model-bf16.gguf")).string());
        REQUIRE(static_cast<int>(m->hparams().n_vocab) == fx.n_vocab);
        for (MlaMode mode : kModes) {
            for (bool fa : {false, true}) {
                const double e = rel_err(run(m, fx, params(mode, fa, GGMLType::F32)), fx.logits);
                std::printf("oracle %-20s %s weights, f32 cache, -mla %s -fa %-3s: max rel err %.3e%s\n",
                            fx.name.c_str(), f32 ? "f32" : "bf16", mode_name(mode), fa ? "on" : "off", e,
                            fx.agrees ? "" : " (known difference, not checked)");
                INFO(fx.name << " -mla " << mode_name(mode) << " -fa " << fa << ": max rel err " << e);
                if (fx.agrees) CHECK(e <= 1e-3);
            }
        }
    }
}

namespace {

// Error statistics over tokens: per token, max_j |latte - hf| / max |hf| (the whole fixture's max);
// and how often latte's top token is transformers' top token. With quantised weights or caches a
// few tokens flip a routing decision (an expert near the top-k boundary), which moves their logits
// a lot: the median and the 90th percentile show the error of the rest, the max that of the flips.
struct TokenStats {
    double max = 0, median = 0, p90 = 0, top1 = 0;
};

TokenStats token_stats(const std::vector<float>& got, const std::vector<float>& ref, int n_vocab) {
    REQUIRE(got.size() == ref.size());
    double den = 0.0;
    for (float v : ref) den = std::max(den, std::fabs(static_cast<double>(v)));
    const size_t nt = ref.size() / static_cast<size_t>(n_vocab);
    std::vector<double> e(nt);
    size_t same = 0;
    for (size_t t = 0; t < nt; ++t) {
        const float* g = &got[t * n_vocab];
        const float* r = &ref[t * n_vocab];
        double m = 0.0;
        for (int j = 0; j < n_vocab; ++j) m = std::max(m, std::isfinite(g[j]) ? std::fabs(static_cast<double>(g[j]) - r[j]) : INFINITY);
        e[t] = m / den;
        same += std::max_element(g, g + n_vocab) - g == std::max_element(r, r + n_vocab) - r;
    }
    std::sort(e.begin(), e.end());
    TokenStats s;
    s.max = e.back();
    s.median = e[nt / 2];
    s.p90 = e[std::min(nt - 1, nt * 9 / 10)];
    s.top1 = static_cast<double>(same) / static_cast<double>(nt);
    return s;
}

}  // namespace

TEST_CASE("oracle: q8_0 weights and q8_0/f16 caches stay close to transformers", "[oracle]") {
    // Random weights are harsh on quantisation (no structure, routing near ties); the bounds are
    // ~3x the medians measured when the fixtures were made (docs/ORACLE.md), and at least 80% of
    // latte's top tokens must be transformers'. The trained model's perplexity (below) is the
    // better measure of what q8_0 costs.
    struct Case { const char* weights; GGMLType cache; MlaMode mode; double median_bound; };
    const Case cases[] = {
        {"f32", GGMLType::F16, MlaMode::Absorbed, 2e-3},   {"f32", GGMLType::F16, MlaMode::Full, 2e-3},
        {"f32", GGMLType::Q8_0, MlaMode::Absorbed, 5e-2},  {"f32", GGMLType::Q8_0, MlaMode::Full, 5e-2},
        {"q8_0", GGMLType::F32, MlaMode::Absorbed, 1e-1},  {"q8_0", GGMLType::F32, MlaMode::Full, 1e-1},
        {"q8_0", GGMLType::Q8_0, MlaMode::Absorbed, 1e-1}, {"q8_0", GGMLType::Q8_0, MlaMode::Full, 1e-1},
        {"q8_0", GGMLType::Q8_0, MlaMode::Hybrid, 1e-1},
    };
    int n_checked = 0;
    for (const Fixture& fx : fixtures()) {
        if (!fs::exists(fx.dir / "model-q8_0.gguf") || !fs::exists(fx.dir / "model-f32.gguf")) continue;
        ++n_checked;
        std::map<std::string, std::shared_ptr<Model>> models;
        for (const Case& c : cases) {
            auto& m = models[c.weights];
            if (!m) m = Model::load((fx.dir / (std::string("model-") + c.weights + ".gguf")).string());
            const TokenStats s = token_stats(run(m, fx, params(c.mode, true, c.cache)), fx.logits, fx.n_vocab);
            std::printf("oracle %-20s %-4s weights, %-4s cache, -mla %s: token error median %.2e p90 %.2e max %.2e, "
                        "top-1 agreement %.1f%%\n", fx.name.c_str(), c.weights, type_name(c.cache), mode_name(c.mode),
                        s.median, s.p90, s.max, 100.0 * s.top1);
            INFO(fx.name << " " << c.weights << " weights, cache " << type_name(c.cache) << ", -mla "
                         << mode_name(c.mode) << ": median " << s.median << " top-1 " << s.top1);
            if (fx.agrees) {
                CHECK(s.median <= c.median_bound);
                CHECK(s.top1 >= 0.8);
            }
        }
    }
    CHECK(n_checked >= 1);
}

TEST_CASE("oracle: the converter's q8_0 blocks are the ones latte's (ggml's) quantiser makes", "[oracle]") {
    // tools/convert_hf_to_gguf.py quantises in numpy; every q8_0 tensor it wrote must equal, byte for
    // byte, latte's quantize_row of the same tensor in the f32 file.
    int n_tensors = 0;
    for (const Fixture& fx : fixtures()) {
        if (!fs::exists(fx.dir / "model-q8_0.gguf") || !fs::exists(fx.dir / "model-f32.gguf")) continue;
        const auto q = GGUFFile::open((fx.dir / "model-q8_0.gguf").string());
        const auto f = GGUFFile::open((fx.dir / "model-f32.gguf").string());
        for (const GGUFTensorInfo& t : q->tensors()) {
            const GGUFTensorInfo& r = f->tensor(t.name);
            REQUIRE(r.ne == t.ne);
            REQUIRE(r.type == GGMLType::F32);
            if (t.type != GGMLType::Q8_0) continue;
            const int64_t n = t.ne[0], rows = t.nrows();
            const size_t rb = row_bytes(GGMLType::Q8_0, n);
            std::vector<uint8_t> mine(rb);
            size_t bad = 0;
            for (int64_t i = 0; i < rows; ++i) {
                quantize_row(GGMLType::Q8_0, reinterpret_cast<const float*>(r.data) + i * n, mine.data(), n);
                bad += std::memcmp(mine.data(), t.data + static_cast<size_t>(i) * rb, rb) != 0;
            }
            INFO(fx.name << " " << t.name << ": " << bad << " of " << rows << " rows differ");
            CHECK(bad == 0);
            ++n_tensors;
        }
    }
    CHECK(n_tensors > 0);
}

TEST_CASE("oracle: the attn_k_b/attn_v_b layout gives transformers' logits too", "[oracle]") {
    // model-splitkvb-bf16.gguf: the converter's --split-kv-b layout (llama.cpp's MLA files), in bf16,
    // which holds the fixture's bf16 weights exactly.
    Fixture fx;
    for (const Fixture& f : fixtures())
        if (f.name == "v3_qlora_yarn") fx = f;
    REQUIRE(fx.name == "v3_qlora_yarn");
    const auto m = Model::load((fx.dir / "model-splitkvb-bf16.gguf").string());
    REQUIRE(m->hparams().split_kv_b);
    for (MlaMode mode : kModes) {
        for (bool fa : {false, true}) {
            const double e = rel_err(run(m, fx, params(mode, fa, GGMLType::F32)), fx.logits);
            std::printf("oracle v3_qlora_yarn k_b/v_b layout, bf16 weights, -mla %s -fa %-3s: max rel err %.3e\n",
                        mode_name(mode), fa ? "on" : "off", e);
            CHECK(e <= 1e-3);
        }
    }
}

namespace {

// LATTE_TINY_EN_MODEL replaces models/latte-tiny-en.gguf (to measure another conversion of it).
fs::path tiny_en_model() {
    if (const char* p = std::getenv("LATTE_TINY_EN_MODEL"); p && *p) return fs::path(p);
    return source_root() / "models" / "latte-tiny-en.gguf";
}

double perplexity(const std::shared_ptr<Model>& m, const std::vector<int32_t>& ids, const ContextParams& p) {
    Context ctx(m, p);
    ctx.decode(ids, true);
    const int nv = static_cast<int>(m->hparams().n_vocab);
    double nll = 0.0;
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
        const float* l = ctx.logits(static_cast<int32_t>(i));
        double mx = l[0];
        for (int j = 1; j < nv; ++j) mx = std::max(mx, static_cast<double>(l[j]));
        double s = 0.0;
        for (int j = 0; j < nv; ++j) s += std::exp(static_cast<double>(l[j]) - mx);
        nll -= static_cast<double>(l[ids[i + 1]]) - mx - std::log(s);
    }
    return std::exp(nll / static_cast<double>(ids.size() - 1));
}

}  // namespace

TEST_CASE("oracle: the tiny English model's held-out perplexity is transformers' within 1%", "[oracle]") {
    const fs::path d = data_dir() / "tiny-en";
    const auto info = read_info(d / "expected.txt");
    const double want = std::stod(info.at("heldout_ppl_f16_weights"));
    const auto ids = read_raw<int32_t>(d / "heldout.i32");
    const auto m = Model::load(tiny_en_model().string());
    REQUIRE(static_cast<size_t>(std::stoul(info.at("heldout_tokens"))) == ids.size());
    // The CLI's defaults (-mla 3, f16 cache) and f32: within 1%. A q8_0 cache: reported, within 3%.
    struct Run { MlaMode mode; GGMLType cache; double bound; };
    for (const Run& r : {Run{MlaMode::Hybrid, GGMLType::F16, 0.01}, Run{MlaMode::Absorbed, GGMLType::F32, 0.01},
                         Run{MlaMode::Full, GGMLType::F32, 0.01}, Run{MlaMode::Absorbed, GGMLType::Q8_0, 0.03},
                         Run{MlaMode::Full, GGMLType::Q8_0, 0.03}}) {
        ContextParams p = params(r.mode, true, r.cache);
        p.n_ctx = static_cast<uint32_t>(ids.size());
        const double got = perplexity(m, ids, p);
        std::printf("oracle tiny-en held-out perplexity (%zu ids), %s, -mla %s, %s cache: latte %.4f, "
                    "transformers %.4f (%+.3f%%)\n", ids.size(), tiny_en_model().filename().c_str(), mode_name(r.mode),
                    type_name(r.cache), got, want, 100.0 * (got / want - 1.0));
        INFO("latte " << got << " transformers " << want);
        CHECK(std::fabs(got / want - 1.0) <= r.bound);
    }
}

TEST_CASE("oracle: latte's tokenizer splits the held-out text as the Python tokenizer did", "[oracle]") {
    const fs::path d = data_dir() / "tiny-en";
    const auto want = read_raw<int32_t>(d / "heldout.i32");
    std::ifstream f(d / "heldout.txt", std::ios::binary);
    REQUIRE(f);
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const auto m = Model::load(tiny_en_model().string());
    const std::vector<int32_t> got = m->tokenizer().encode(text, true);
    // Agreement: the longest common prefix, and equal ids position by position.
    size_t prefix = 0;
    while (prefix < got.size() && prefix < want.size() && got[prefix] == want[prefix]) ++prefix;
    size_t same = 0;
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) same += got[i] == want[i];
    std::printf("oracle tiny-en tokenizer: latte %zu ids, Python %zu ids, common prefix %zu, equal positions %zu\n",
                got.size(), want.size(), prefix, same);
    // The text is plain ASCII prose, where latte's pre-tokenizer is exact: expect identical ids.
    CHECK(got.size() == want.size());
    CHECK(static_cast<double>(same) / static_cast<double>(want.size()) >= 0.99);
}

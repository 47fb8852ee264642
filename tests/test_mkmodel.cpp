// The random-weight model maker: tensor names and shapes as llama.cpp's converter writes them,
// every metadata key of docs/MODEL_FILES.md, deterministic bytes, the split kv_b layout holding the
// same weights, bad specs and bad flags.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "latte/error.h"
#include "latte/gguf.h"
#include "latte/mkmodel.h"
#include "latte/tokenizer.h"
#include "latte/types.h"

using namespace latte;
namespace fs = std::filesystem;

namespace {

using TensorList = std::vector<std::pair<std::string, std::vector<int64_t>>>;

struct TempDir {
    fs::path dir;
    TempDir() {
        dir = fs::temp_directory_path() / ("latte_mkmodel_test_" + std::to_string(::getpid()));
        fs::create_directories(dir);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
    std::string file(const std::string& name) const { return (dir / name).string(); }
};

std::vector<char> read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::vector<float> dequant(const GGUFTensorInfo& t) {
    std::vector<float> out(static_cast<size_t>(t.nelements()));
    const size_t rb = row_bytes(t.type, t.ne[0]);
    for (int64_t r = 0; r < t.nrows(); ++r)
        dequantize_row(t.type, t.data + r * rb, out.data() + r * t.ne[0], t.ne[0]);
    return out;
}

// A small spec shaped like tiny (q_lora, sigmoid gating), with a small vocabulary.
MkModelSpec small_tiny() {
    MkModelSpec s = mkmodel_preset("tiny");
    s.n_vocab = 300;
    s.n_layer = 2;
    return s;
}

}  // namespace

TEST_CASE("mkmodel: tensor names and shapes of a V2-Lite-like spec (q_lora 0, 2 layers, 1 dense)", "[mkmodel]") {
    MkModelSpec s = mkmodel_preset("v2-lite");
    s.n_vocab = 300;
    s.n_embd = 64;
    s.n_layer = 2;
    s.n_head = 2;
    s.n_ff = 96;
    s.n_ff_exp = 32;
    s.n_expert = 4;
    s.n_expert_used = 2;
    s.n_expert_shared = 2;
    s.n_layer_dense_lead = 1;
    const TensorList expected = {
        {"token_embd.weight", {64, 300}},
        {"blk.0.attn_norm.weight", {64}},
        {"blk.0.attn_q.weight", {64, 384}},
        {"blk.0.attn_kv_a_mqa.weight", {64, 576}},
        {"blk.0.attn_kv_a_norm.weight", {512}},
        {"blk.0.attn_kv_b.weight", {512, 512}},
        {"blk.0.attn_output.weight", {256, 64}},
        {"blk.0.ffn_norm.weight", {64}},
        {"blk.0.ffn_gate.weight", {64, 96}},
        {"blk.0.ffn_up.weight", {64, 96}},
        {"blk.0.ffn_down.weight", {96, 64}},
        {"blk.1.attn_norm.weight", {64}},
        {"blk.1.attn_q.weight", {64, 384}},
        {"blk.1.attn_kv_a_mqa.weight", {64, 576}},
        {"blk.1.attn_kv_a_norm.weight", {512}},
        {"blk.1.attn_kv_b.weight", {512, 512}},
        {"blk.1.attn_output.weight", {256, 64}},
        {"blk.1.ffn_norm.weight", {64}},
        {"blk.1.ffn_gate_inp.weight", {64, 4}},
        {"blk.1.ffn_gate_exps.weight", {64, 32, 4}},
        {"blk.1.ffn_up_exps.weight", {64, 32, 4}},
        {"blk.1.ffn_down_exps.weight", {32, 64, 4}},
        {"blk.1.ffn_gate_shexp.weight", {64, 64}},
        {"blk.1.ffn_up_shexp.weight", {64, 64}},
        {"blk.1.ffn_down_shexp.weight", {64, 64}},
        {"output_norm.weight", {64}},
        {"output.weight", {64, 300}},
    };
    CHECK(mkmodel_tensor_list(s) == expected);
    CHECK(mkmodel_param_count(s) > 0);
}

TEST_CASE("mkmodel: tensor names and shapes of a tiny-like spec (q_lora, sigmoid, both kv_b layouts)", "[mkmodel]") {
    MkModelSpec s = small_tiny();
    s.n_layer = 2;
    const TensorList expected = {
        {"token_embd.weight", {256, 300}},
        {"blk.0.attn_norm.weight", {256}},
        {"blk.0.attn_q_a.weight", {256, 128}},
        {"blk.0.attn_q_a_norm.weight", {128}},
        {"blk.0.attn_q_b.weight", {128, 768}},
        {"blk.0.attn_kv_a_mqa.weight", {256, 576}},
        {"blk.0.attn_kv_a_norm.weight", {512}},
        {"blk.0.attn_kv_b.weight", {512, 1024}},
        {"blk.0.attn_output.weight", {512, 256}},
        {"blk.0.ffn_norm.weight", {256}},
        {"blk.0.ffn_gate.weight", {256, 512}},
        {"blk.0.ffn_up.weight", {256, 512}},
        {"blk.0.ffn_down.weight", {512, 256}},
        {"blk.1.attn_norm.weight", {256}},
        {"blk.1.attn_q_a.weight", {256, 128}},
        {"blk.1.attn_q_a_norm.weight", {128}},
        {"blk.1.attn_q_b.weight", {128, 768}},
        {"blk.1.attn_kv_a_mqa.weight", {256, 576}},
        {"blk.1.attn_kv_a_norm.weight", {512}},
        {"blk.1.attn_kv_b.weight", {512, 1024}},
        {"blk.1.attn_output.weight", {512, 256}},
        {"blk.1.ffn_norm.weight", {256}},
        {"blk.1.ffn_gate_inp.weight", {256, 4}},
        {"blk.1.exp_probs_b.bias", {4}},
        {"blk.1.ffn_gate_exps.weight", {256, 256, 4}},
        {"blk.1.ffn_up_exps.weight", {256, 256, 4}},
        {"blk.1.ffn_down_exps.weight", {256, 256, 4}},
        {"blk.1.ffn_gate_shexp.weight", {256, 256}},
        {"blk.1.ffn_up_shexp.weight", {256, 256}},
        {"blk.1.ffn_down_shexp.weight", {256, 256}},
        {"output_norm.weight", {256}},
        {"output.weight", {256, 300}},
    };
    CHECK(mkmodel_tensor_list(s) == expected);

    s.split_kv_b = true;
    TensorList split = expected;
    for (size_t i = 0; i < split.size(); ++i) {
        if (split[i].first.find("attn_kv_b") == std::string::npos) continue;
        const std::string p = split[i].first.substr(0, 6);  // "blk.N."
        split[i] = {p + "attn_k_b.weight", {128, 512, 4}};
        split.insert(split.begin() + static_cast<std::ptrdiff_t>(i) + 1, {p + "attn_v_b.weight", {512, 128, 4}});
    }
    CHECK(mkmodel_tensor_list(s) == split);

    // No experts: every layer dense.
    s.split_kv_b = false;
    s.n_expert = 0;
    for (const auto& [name, ne] : mkmodel_tensor_list(s)) {
        CHECK(name.find("exps") == std::string::npos);
        CHECK(name.find("gate_inp") == std::string::npos);
    }
    CHECK(mkmodel_tensor_list(s).size() == 3 + 2 * 12);
}

TEST_CASE("mkmodel: the tiny preset file has every key and tensor of MODEL_FILES.md", "[mkmodel]") {
    TempDir tmp;
    MkModelSpec s = mkmodel_preset("tiny");
    s.n_vocab = 300;
    const std::string path = tmp.file("tiny.gguf");
    mkmodel_write(s, path, false);
    auto f = GGUFFile::open(path);
    CHECK(mkmodel_param_count(mkmodel_preset("tiny")) * 4 < 30u * 1000 * 1000);

    auto check_type = [&](const std::string& key, GGUFType t) {
        INFO(key);
        const GGUFValue* v = f->find(key);
        REQUIRE(v != nullptr);
        CHECK(v->type == t);
    };
    using T = GGUFType;
    check_type("general.architecture", T::STRING);
    CHECK(f->get_str("general.architecture") == "deepseek2");
    check_type("general.name", T::STRING);
    check_type("general.file_type", T::UINT32);
    CHECK(f->get_u32("general.file_type") == 0);
    CHECK_FALSE(f->has("general.quantization_version"));
    const std::vector<std::pair<std::string, uint32_t>> u32s = {
        {"deepseek2.context_length", 4096},
        {"deepseek2.embedding_length", 256},
        {"deepseek2.block_count", 3},
        {"deepseek2.feed_forward_length", 512},
        {"deepseek2.attention.head_count", 4},
        {"deepseek2.attention.head_count_kv", 4},
        {"deepseek2.expert_used_count", 2},
        {"deepseek2.leading_dense_block_count", 1},
        {"deepseek2.vocab_size", 300},
        {"deepseek2.attention.q_lora_rank", 128},
        {"deepseek2.attention.kv_lora_rank", 512},
        {"deepseek2.attention.key_length", 192},
        {"deepseek2.attention.value_length", 128},
        {"deepseek2.expert_feed_forward_length", 256},
        {"deepseek2.expert_count", 4},
        {"deepseek2.expert_shared_count", 1},
        {"deepseek2.expert_gating_func", 2},
        {"deepseek2.expert_group_count", 2},
        {"deepseek2.expert_group_used_count", 1},
        {"deepseek2.rope.dimension_count", 64},
        {"deepseek2.rope.scaling.original_context_length", 1024},
        {"tokenizer.ggml.bos_token_id", 0},
        {"tokenizer.ggml.eos_token_id", 1},
    };
    for (const auto& [k, v] : u32s) {
        check_type(k, T::UINT32);
        INFO(k);
        CHECK(f->get_u32(k) == v);
    }
    const std::vector<std::pair<std::string, float>> f32s = {
        {"deepseek2.rope.freq_base", 10000.0f},
        {"deepseek2.attention.layer_norm_rms_epsilon", 1e-6f},
        {"deepseek2.expert_weights_scale", 2.5f},
        {"deepseek2.rope.scaling.factor", 4.0f},
        {"deepseek2.rope.scaling.yarn_log_multiplier", 0.1f},
    };
    for (const auto& [k, v] : f32s) {
        check_type(k, T::FLOAT32);
        INFO(k);
        CHECK(f->get_f32(k) == v);
    }
    check_type("deepseek2.expert_weights_norm", T::BOOL);
    CHECK(f->get_bool("deepseek2.expert_weights_norm") == true);
    check_type("deepseek2.rope.scaling.type", T::STRING);
    CHECK(f->get_str("deepseek2.rope.scaling.type") == "yarn");
    CHECK_FALSE(f->has("deepseek2.attention.key_length_mla"));
    CHECK_FALSE(f->has("deepseek2.attention.value_length_mla"));

    // Tokenizer keys, equal to build_bpe_vocab's.
    const BpeVocab voc = build_bpe_vocab(300);
    check_type("tokenizer.ggml.model", T::STRING);
    CHECK(f->get_str("tokenizer.ggml.model") == "gpt2");
    check_type("tokenizer.ggml.pre", T::STRING);
    CHECK(f->get_str("tokenizer.ggml.pre") == "deepseek-v3");
    check_type("tokenizer.ggml.tokens", T::ARRAY);
    CHECK(f->find("tokenizer.ggml.tokens")->elem_type == T::STRING);
    CHECK(f->get_str_array("tokenizer.ggml.tokens") == voc.tokens);
    check_type("tokenizer.ggml.token_type", T::ARRAY);
    CHECK(f->find("tokenizer.ggml.token_type")->elem_type == T::INT32);
    const auto types = f->get_int_array("tokenizer.ggml.token_type");
    CHECK(std::vector<int32_t>(types.begin(), types.end()) == voc.types);
    check_type("tokenizer.ggml.merges", T::ARRAY);
    CHECK(f->get_str_array("tokenizer.ggml.merges") == voc.merges);
    check_type("tokenizer.ggml.add_bos_token", T::BOOL);
    CHECK(f->get_bool("tokenizer.ggml.add_bos_token") == true);
    check_type("tokenizer.ggml.add_eos_token", T::BOOL);
    CHECK(f->get_bool("tokenizer.ggml.add_eos_token") == false);
    CHECK_NOTHROW(Tokenizer::from_gguf(*f));

    // Tensors: names, shapes and types in write order, values as generated, sane statistics.
    const auto list = mkmodel_tensor_list(s);
    REQUIRE(f->tensors().size() == list.size());
    for (size_t i = 0; i < list.size(); ++i) {
        const GGUFTensorInfo& t = f->tensors()[i];
        INFO(list[i].first);
        CHECK(t.name == list[i].first);
        CHECK(t.ne == list[i].second);
        CHECK(t.type == GGMLType::F32);
        std::vector<float> want(static_cast<size_t>(t.nelements()));
        mkmodel_generate(s, t.name, t.ne, 0, want.size(), want.data());
        const std::vector<float> got = dequant(t);
        CHECK(got == want);
        double sum = 0, sq = 0;
        size_t non_finite = 0;
        for (float x : got) {
            non_finite += !std::isfinite(x);
            sum += x;
            sq += static_cast<double>(x) * x;
        }
        REQUIRE(non_finite == 0);
        const double n = static_cast<double>(got.size());
        const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
        if (t.ne.size() == 1 && t.name.find("exp_probs_b") == std::string::npos) {
            CHECK(std::fabs(mean - 1.0) < 0.05);
        } else if (t.name == "token_embd.weight") {
            CHECK(std::fabs(sd - 1.0) < 0.02);
        } else if (t.ne.size() > 1 && n > 10000) {
            CHECK(std::fabs(mean) < 0.05 / std::sqrt(static_cast<double>(t.ne[0])));
            CHECK(std::fabs(sd * std::sqrt(static_cast<double>(t.ne[0])) - 1.0) < 0.03);
        }
    }
}

TEST_CASE("mkmodel: the normal generator is deterministic, chunk-consistent and standard", "[mkmodel]") {
    MkModelSpec s = small_tiny();
    const std::vector<int64_t> ne = {1000, 1000};  // stddev 1/sqrt(1000)
    std::vector<float> all(1000000);
    mkmodel_generate(s, "x.weight", ne, 0, all.size(), all.data());
    // Any sub-range (crossing chunk boundaries, odd offsets) equals the same slice of the whole.
    for (uint64_t first : {0ull, 1ull, 65535ull, 65537ull, 131071ull, 500001ull}) {
        std::vector<float> part(70001);
        mkmodel_generate(s, "x.weight", ne, first, part.size(), part.data());
        INFO(first);
        CHECK(std::equal(part.begin(), part.end(), all.begin() + static_cast<std::ptrdiff_t>(first)));
    }
    double m1 = 0, m2 = 0, m4 = 0;
    int beyond3 = 0;
    for (float x : all) {
        const double z = x * std::sqrt(1000.0);
        m1 += z;
        m2 += z * z;
        m4 += z * z * z * z;
        beyond3 += std::fabs(z) > 3.0;
    }
    const double n = static_cast<double>(all.size());
    CHECK(std::fabs(m1 / n) < 0.01);
    CHECK(std::fabs(m2 / n - 1.0) < 0.01);
    CHECK(std::fabs(m4 / n - 3.0) < 0.05);                  // normal kurtosis
    CHECK(std::fabs(beyond3 / n - 0.0026998) < 0.0005);      // two-sided 3-sigma tail
    std::vector<float> other(1000);
    mkmodel_generate(s, "y.weight", ne, 0, other.size(), other.data());
    CHECK_FALSE(std::equal(other.begin(), other.end(), all.begin()));
}

TEST_CASE("mkmodel: files are deterministic: same spec same bytes, any thread count; seed changes them", "[mkmodel]") {
    TempDir tmp;
    MkModelSpec s = small_tiny();
    s.type = GGMLType::Q8_0;
    mkmodel_write(s, tmp.file("a.gguf"), false, 1);
    mkmodel_write(s, tmp.file("b.gguf"), false, 3);
    const auto a = read_bytes(tmp.file("a.gguf"));
    CHECK(a.size() > 1000000);
    CHECK(a == read_bytes(tmp.file("b.gguf")));
    CHECK_FALSE(fs::exists(tmp.file("a.gguf.tmp")));
    s.seed += 1;
    mkmodel_write(s, tmp.file("c.gguf"), false);
    const auto c = read_bytes(tmp.file("c.gguf"));
    CHECK(c.size() == a.size());
    CHECK(c != a);

    // The weight type: 1-D tensors and ffn_gate_inp stay f32; file_type and quantization_version.
    auto f = GGUFFile::open(tmp.file("c.gguf"));
    CHECK(f->get_u32("general.file_type") == 7);
    CHECK(f->get_u32("general.quantization_version") == 2);
    for (const auto& t : f->tensors()) {
        INFO(t.name);
        const bool keep_f32 = t.ne.size() == 1 || t.name.find("ffn_gate_inp") != std::string::npos;
        CHECK(t.type == (keep_f32 ? GGMLType::F32 : GGMLType::Q8_0));
    }
    const std::vector<std::pair<GGMLType, uint32_t>> fts = {
        {GGMLType::F32, 0}, {GGMLType::F16, 1}, {GGMLType::Q8_0, 7}, {GGMLType::Q4_0, 2}, {GGMLType::BF16, 32}};
    for (const auto& [t, ft] : fts) CHECK(mkmodel_file_type(t) == ft);
}

TEST_CASE("mkmodel: the split k_b/v_b layout holds the same weights as attn_kv_b", "[mkmodel]") {
    TempDir tmp;
    for (GGMLType type : {GGMLType::F32, GGMLType::Q8_0}) {
        INFO(type_name(type));
        MkModelSpec s = small_tiny();
        s.type = type;
        mkmodel_write(s, tmp.file("kvb.gguf"), false);
        s.split_kv_b = true;
        mkmodel_write(s, tmp.file("split.gguf"), false);
        auto a = GGUFFile::open(tmp.file("kvb.gguf"));
        auto b = GGUFFile::open(tmp.file("split.gguf"));
        CHECK(b->get_u32("deepseek2.attention.head_count_kv") == 1);
        CHECK(b->get_u32("deepseek2.attention.key_length") == 576);
        CHECK(b->get_u32("deepseek2.attention.value_length") == 512);
        CHECK(b->get_u32("deepseek2.attention.key_length_mla") == 192);
        CHECK(b->get_u32("deepseek2.attention.value_length_mla") == 128);
        const int64_t H = 4, L = 512, N = 128, V = 128;
        const float tol = type == GGMLType::F32 ? 0.0f : 0.004f;  // q8_0 quantises along different rows
        for (int il = 0; il < 2; ++il) {
            const std::string p = "blk." + std::to_string(il) + ".";
            const auto kv = dequant(a->tensor(p + "attn_kv_b.weight"));
            const GGUFTensorInfo& kbt = b->tensor(p + "attn_k_b.weight");
            const GGUFTensorInfo& vbt = b->tensor(p + "attn_v_b.weight");
            CHECK(kbt.ne == std::vector<int64_t>{N, L, H});
            CHECK(vbt.ne == std::vector<int64_t>{L, V, H});
            CHECK(kbt.type == type);
            const auto kb = dequant(kbt), vb = dequant(vbt);
            float max_k = 0, max_v = 0;
            for (int64_t h = 0; h < H; ++h)
                for (int64_t l = 0; l < L; ++l) {
                    for (int64_t n = 0; n < N; ++n)
                        max_k = std::max(max_k, std::fabs(kb[(h * L + l) * N + n] - kv[(h * (N + V) + n) * L + l]));
                    for (int64_t v = 0; v < V; ++v)
                        max_v = std::max(max_v, std::fabs(vb[(h * V + v) * L + l] - kv[(h * (N + V) + N + v) * L + l]));
                }
            CHECK(max_k <= tol);
            CHECK(max_v <= tol);
        }
        // Every other tensor is byte-identical.
        for (const auto& t : a->tensors()) {
            if (t.name.find("attn_kv_b") != std::string::npos) continue;
            const GGUFTensorInfo& u = b->tensor(t.name);
            INFO(t.name);
            REQUIRE(u.nbytes == t.nbytes);
            CHECK(std::equal(t.data, t.data + t.nbytes, u.data));
        }
    }
}

TEST_CASE("mkmodel: presets and bad specs", "[mkmodel]") {
    CHECK(mkmodel_preset("anchor").type == GGMLType::Q8_0);
    CHECK(mkmodel_param_count(mkmodel_preset("anchor")) == 392112128ull);  // + 4·kv_b = ANCHORS.md's 400.5 M
    for (const auto& n : mkmodel_preset_names()) CHECK_NOTHROW(mkmodel_validate(mkmodel_preset(n)));
    CHECK(mkmodel_preset("v3").n_expert == 256);
    CHECK(mkmodel_preset("v2-lite").q_lora_rank == 0);
    REQUIRE_THROWS_AS(mkmodel_preset("v4"), Error);
    REQUIRE_THROWS_WITH(mkmodel_preset("v4"), Catch::Contains("tiny") && Catch::Contains("v2-lite") &&
                                                  Catch::Contains("v3") && Catch::Contains("anchor"));

    auto bad = [](auto edit, const std::string& msg) {
        MkModelSpec s = small_tiny();
        edit(s);
        INFO(msg);
        REQUIRE_THROWS_AS(mkmodel_validate(s), Error);
        REQUIRE_THROWS_WITH(mkmodel_validate(s), Catch::Contains(msg));
        REQUIRE_THROWS_WITH(mkmodel_write(s, "/nonexistent/never.gguf", false), Catch::Contains(msg));
    };
    bad([](MkModelSpec& s) { s.n_expert_used = 5; }, "experts used 5 exceed experts 4");
    bad([](MkModelSpec& s) { s.n_expert = 6; s.n_expert_groups = 4; }, "must divide experts 6");
    bad([](MkModelSpec& s) { s.n_group_used = 3; }, "groups used 3");
    bad([](MkModelSpec& s) { s.n_expert_used = 3; }, "groups used");  // 1 group of 2 experts
    bad([](MkModelSpec& s) { s.n_vocab = 100; }, "vocab 100");
    bad([](MkModelSpec& s) { s.n_layer_dense_lead = 3; }, "dense layers 3 exceed layers 2");
    bad([](MkModelSpec& s) { s.type = GGMLType::Q8_0; s.n_ff = 100; }, "blk.0.ffn_down.weight has rows of 100");
    bad([](MkModelSpec& s) { s.type = GGMLType::Q4_0; s.n_embd = 200; }, "token_embd.weight has rows of 200");
    bad([](MkModelSpec& s) { s.type = GGMLType::Q2_K; }, "unsupported weight type");
    bad([](MkModelSpec& s) { s.n_head = 0; }, "heads must be > 0");
    bad([](MkModelSpec& s) { s.gating_func = 3; }, "gating");

    // Blocked types accept widths that are multiples of 32; no experts needs no expert knobs.
    MkModelSpec ok = small_tiny();
    ok.type = GGMLType::Q4_0;
    ok.n_ff = 96;
    CHECK_NOTHROW(mkmodel_validate(ok));
    ok.n_expert = 0;
    ok.n_expert_used = 9;
    CHECK_NOTHROW(mkmodel_validate(ok));
    // Writing to an unwritable place is an I/O error, not a crash.
    REQUIRE_THROWS_AS(mkmodel_write(small_tiny(), "/nonexistent/dir/x.gguf", false), Error);
}

#ifdef LATTE_MKMODEL
TEST_CASE("mkmodel: latte-mkmodel exits 2 on bad flags and writes a loadable file otherwise", "[mkmodel]") {
    TempDir tmp;
    const std::string tool = LATTE_MKMODEL;
    const std::string out = tmp.file("cli.gguf");
    auto run = [&](const std::string& args) {
        const int rc = std::system((tool + " " + args + " >/dev/null 2>&1").c_str());
        REQUIRE(WIFEXITED(rc));
        return WEXITSTATUS(rc);
    };
    CHECK(run("--preset tiny -o " + out + " --bogus") == 2);
    CHECK(run("--preset tiny") == 2);                                 // missing -o
    CHECK(run("--preset tiny -o") == 2);                              // missing value
    CHECK(run("--preset tiny -o " + out + " --layers 2x") == 2);      // bad number
    CHECK(run("--preset tiny -o " + out + " --type q2_k") == 2);
    CHECK(run("--preset nope -o " + out) == 2);
    CHECK(run("--preset tiny -o " + out + " --experts-used 9") == 2);
    CHECK(run("--preset tiny -o " + out + " --type q8_0 --ff 100") == 2);
    CHECK_FALSE(fs::exists(out));
    CHECK(run("--help") == 0);
    CHECK(run("--preset tiny -o " + out + " --vocab 300 --layers 2 --type q8_0 --split-kv-b --seed 7 --quiet") == 0);
    auto f = GGUFFile::open(out);
    CHECK(f->get_u32("deepseek2.block_count") == 2);
    CHECK(f->get_u32("deepseek2.vocab_size") == 300);
    CHECK(f->find_tensor("blk.0.attn_k_b.weight") != nullptr);
}
#endif

// latte-mkmodel: writes a deterministic random-weight deepseek2 GGUF (see include/latte/mkmodel.h).
// Exit status: 0 written, 2 bad command line or spec, 1 I/O or other failure.
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>

#include "latte/error.h"
#include "latte/mkmodel.h"
#include "latte/types.h"

namespace {

const char* kUsage =
    "usage: latte-mkmodel --preset NAME -o FILE [options]\n"
    "Writes a deepseek2 GGUF with deterministic random weights (same flags, same bytes).\n"
    "\n"
    "  --preset NAME          tiny | v2-lite | v3 | anchor (required)\n"
    "  -o, --output FILE      the file to write (required)\n"
    "  --type T               f32 | f16 | bf16 | q8_0 | q4_0 | q4_K | q5_K | q6_K (1-D tensors and\n"
    "                         ffn_gate_inp stay f32; with a K-quant, tensors whose rows are not a\n"
    "                         multiple of 256 are written as q8_0)\n"
    "  --seed S               random seed (default 42)\n"
    "  --layers N             layer count (the preset's dense-layer count is capped at N)\n"
    "  --dense-layers N       leading dense layers\n"
    "  --experts E            routed experts (0: every layer dense)\n"
    "  --experts-used K       experts per token\n"
    "  --shared-experts S     shared experts\n"
    "  --groups G             expert groups (must divide E)\n"
    "  --groups-used G        expert groups used\n"
    "  --gating softmax|sigmoid  expert gating (sigmoid adds exp_probs_b)\n"
    "  --vocab V              vocabulary size (>= 258)\n"
    "  --n-embd E             embedding width\n"
    "  --heads H              attention heads\n"
    "  --q-lora-rank R        query LoRA rank (0: plain attn_q)\n"
    "  --ff N                 dense FFN width\n"
    "  --ff-exp N             expert FFN width\n"
    "  --no-yarn              no YaRN rope scaling keys\n"
    "  --split-kv-b           write attn_k_b/attn_v_b (llama.cpp's MLA layout) instead of attn_kv_b\n"
    "  --quiet                no progress on stderr\n"
    "  -h, --help             this text\n"
    "Presets: tiny (test model, f32), v2-lite, v3 (full DeepSeek widths), anchor (ANCHORS.md, q8_0).\n";

struct UsageError {
    std::string msg;
};

template <class T>
T parse_num(const std::string& flag, const std::string& v) {
    uint64_t x = 0;
    const char* b = v.data();
    const char* e = b + v.size();
    auto [p, ec] = std::from_chars(b, e, x);
    if (v.empty() || ec != std::errc() || p != e || x > std::numeric_limits<T>::max())
        throw UsageError{"bad number '" + v + "' for " + flag};
    return static_cast<T>(x);
}

std::string human(uint64_t b) {
    char buf[64];
    if (b >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(b) / (1ull << 30));
    else std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(b) / (1ull << 20));
    return buf;
}

std::string human_params(uint64_t n) {
    char buf[64];
    if (n >= 1000000000ull) std::snprintf(buf, sizeof buf, "%.2f B", static_cast<double>(n) / 1e9);
    else std::snprintf(buf, sizeof buf, "%.2f M", static_cast<double>(n) / 1e6);
    return buf;
}

}  // namespace

int main(int argc, char** argv) {
    std::string preset, out;
    bool quiet = false;
    // Overrides, applied to the preset in a fixed order after parsing.
    std::optional<uint32_t> layers, dense, experts, used, shared, groups, groups_used, vocab, embd, heads, qlora, ff, ffexp,
        gating;
    std::optional<uint64_t> seed;
    std::optional<latte::GGMLType> type;
    bool no_yarn = false, split = false;
    try {
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            auto value = [&]() -> std::string {
                if (i + 1 >= argc) throw UsageError{"missing value for " + a};
                return argv[++i];
            };
            auto u32 = [&]() { const std::string v = value(); return parse_num<uint32_t>(a, v); };
            if (a == "-h" || a == "--help") {
                std::fputs(kUsage, stdout);
                return 0;
            } else if (a == "--preset") preset = value();
            else if (a == "-o" || a == "--output") out = value();
            else if (a == "--layers") layers = u32();
            else if (a == "--dense-layers") dense = u32();
            else if (a == "--experts") experts = u32();
            else if (a == "--experts-used") used = u32();
            else if (a == "--shared-experts") shared = u32();
            else if (a == "--groups") groups = u32();
            else if (a == "--groups-used") groups_used = u32();
            else if (a == "--vocab") vocab = u32();
            else if (a == "--n-embd") embd = u32();
            else if (a == "--heads") heads = u32();
            else if (a == "--q-lora-rank") qlora = u32();
            else if (a == "--ff") ff = u32();
            else if (a == "--ff-exp") ffexp = u32();
            else if (a == "--seed") { const std::string v = value(); seed = parse_num<uint64_t>(a, v); }
            else if (a == "--type") {
                const std::string v = value();
                try {
                    type = latte::parse_type(v);
                } catch (const latte::Error& e) {
                    throw UsageError{std::string("--type: ") + e.what()};
                }
            } else if (a == "--gating") {
                const std::string v = value();
                if (v == "softmax") gating = 1;
                else if (v == "sigmoid") gating = 2;
                else throw UsageError{"bad value '" + v + "' for --gating: expected softmax or sigmoid"};
            } else if (a == "--no-yarn") no_yarn = true;
            else if (a == "--split-kv-b") split = true;
            else if (a == "--quiet" || a == "-q") quiet = true;
            else throw UsageError{"unknown flag '" + a + "' (see --help)"};
        }
        if (preset.empty()) throw UsageError{"missing --preset (one of tiny, v2-lite, v3, anchor)"};
        if (out.empty()) throw UsageError{"missing -o FILE"};
    } catch (const UsageError& e) {
        std::fprintf(stderr, "latte-mkmodel: error: %s\n", e.msg.c_str());
        return 2;
    }

    latte::MkModelSpec s;
    try {
        s = latte::mkmodel_preset(preset);
        if (layers) {
            s.n_layer = *layers;
            if (!dense && s.n_layer_dense_lead > s.n_layer) s.n_layer_dense_lead = s.n_layer;
        }
        if (dense) s.n_layer_dense_lead = *dense;
        if (experts) s.n_expert = *experts;
        if (used) s.n_expert_used = *used;
        if (shared) s.n_expert_shared = *shared;
        if (groups) s.n_expert_groups = *groups;
        if (groups_used) s.n_group_used = *groups_used;
        if (vocab) s.n_vocab = *vocab;
        if (embd) s.n_embd = *embd;
        if (heads) s.n_head = *heads;
        if (qlora) s.q_lora_rank = *qlora;
        if (ff) s.n_ff = *ff;
        if (ffexp) s.n_ff_exp = *ffexp;
        if (gating) s.gating_func = *gating;
        if (seed) s.seed = *seed;
        if (type) s.type = *type;
        if (no_yarn) s.yarn = false;
        if (split) s.split_kv_b = true;
        latte::mkmodel_validate(s);
    } catch (const latte::Error& e) {
        std::fprintf(stderr, "latte-mkmodel: error: %s\n", e.what());
        return 2;
    }

    if (latte::mkmodel_is_k_quant(s.type)) {  // say which tensors fall back to q8_0
        size_t n_fb = 0;
        std::string first;
        for (const auto& [name, ne] : latte::mkmodel_tensor_list(s))
            if (latte::mkmodel_tensor_type(s, name, ne) == latte::GGMLType::Q8_0) {
                if (n_fb < 3) first += (n_fb ? ", " : "") + name + " (rows of " + std::to_string(ne[0]) + ")";
                ++n_fb;
            }
        if (n_fb > 0)
            std::fprintf(stderr, "latte-mkmodel: %zu tensors have rows that are not a multiple of 256 and are written "
                                 "as q8_0 instead of %s: %s%s\n",
                         n_fb, latte::type_name(s.type), first.c_str(), n_fb > 3 ? ", ..." : "");
    }
    try {
        latte::mkmodel_write(s, out, !quiet);
        std::error_code ec;
        const uint64_t size = std::filesystem::file_size(out, ec);
        std::printf("latte-mkmodel: wrote %s: %s (%llu bytes), %s params (%llu), %s, %u layers\n", out.c_str(),
                    human(size).c_str(), static_cast<unsigned long long>(size),
                    human_params(latte::mkmodel_param_count(s)).c_str(),
                    static_cast<unsigned long long>(latte::mkmodel_param_count(s)), latte::type_name(s.type), s.n_layer);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "latte-mkmodel: error: %s\n", e.what());
        return 1;
    }
    return 0;
}

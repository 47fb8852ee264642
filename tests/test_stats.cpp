// Context::last_decode_stats(): the bytes and flops a decode reads and does, counted from shapes.
// The MoE claim of issue 7 — token generation reads only the experts the router chose — is checked
// here exactly: one generated token reads every non-expert weight matrix once, n_expert_used of the
// n_expert routed experts of each MoE layer, and the shared experts.
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>
#include <unistd.h>
#include <vector>

#include "latte/latte.h"
#include "latte/mkmodel.h"

using namespace latte;

namespace {

struct TmpModel {
    std::string path;
    explicit TmpModel(const MkModelSpec& s) {
        path = "/tmp/latte-stats-" + std::to_string(getpid()) + ".gguf";
        mkmodel_write(s, path, false);
    }
    ~TmpModel() { std::remove(path.c_str()); }
};

bool ends_with(const std::string& s, const std::string& e) {
    return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}

}  // namespace

TEST_CASE("stats: a generated token reads only the routed experts' weights", "[forward][stats]") {
    MkModelSpec s = mkmodel_preset("tiny");
    s.n_layer = 3;
    s.n_layer_dense_lead = 1;
    s.n_expert = 16;
    s.n_expert_used = 3;
    s.n_expert_shared = 1;
    s.n_expert_groups = 1;
    s.n_group_used = 1;
    s.type = GGMLType::Q8_0;
    TmpModel tm(s);
    const auto model = Model::load(tm.path);
    const HParams& hp = model->hparams();

    // Expected weight bytes of one token: every 2-D weight once (not the embedding, which is a row
    // lookup, nor attn_kv_b, which the loader turns into f32 W_kb/W_vb), n_expert_used/n_expert of
    // each 3-D expert tensor, and the f16 W_kbᵀ/W_vb of every layer.
    double all = 0, expected = 0;
    for (const auto& [name, ne] : mkmodel_tensor_list(s)) {
        if (ne.size() < 2 || name == "token_embd.weight" || ends_with(name, "attn_kv_b.weight")) continue;
        const GGMLType t = mkmodel_tensor_type(s, name, ne);
        double bytes = static_cast<double>(row_bytes(t, ne[0]));
        for (size_t i = 1; i < ne.size(); ++i) bytes *= static_cast<double>(ne[i]);
        all += bytes;
        expected += ne.size() == 3 ? bytes * hp.n_expert_used / hp.n_expert : bytes;
    }
    // W_kbᵀ/W_vb of -mla 1: f16 from a quantised file (f32 only from an f32 one)
    const double wkvb = 2.0 * hp.n_head * (hp.d_nope + hp.d_v) * hp.kv_lora_rank * hp.n_layer;
    expected += wkvb;

    Context ctx(model, {.n_ctx = 64, .n_threads = 2, .mla = MlaMode::Absorbed, .cache_type = GGMLType::F16});
    std::vector<int32_t> prompt;
    for (int i = 0; i < 12; ++i) prompt.push_back(3 + 7 * i);
    ctx.decode(prompt);
    const auto pp = ctx.last_decode_stats();
    CHECK(pp.tokens == 12);
    CHECK(pp.ubatches == 1);
    // 12 tokens × 3 experts may use every expert, never more than all of them
    CHECK(static_cast<double>(pp.weight_bytes) <= all + wkvb);
    CHECK(static_cast<double>(pp.weight_bytes) >= expected);

    ctx.decode({5});
    const auto tg = ctx.last_decode_stats();
    CHECK(tg.tokens == 1);
    CHECK(static_cast<double>(tg.weight_bytes) == expected);
    CHECK(static_cast<double>(tg.weight_bytes) < all + wkvb);  // 13 of 16 experts' weights are not read
    // the KV cache: 13 latent rows (f16, kv_lora + rope wide) per layer
    CHECK(tg.kv_bytes == 13ull * 2 * (hp.kv_lora_rank + hp.n_rot) * hp.n_layer);
    // flops: 2 per weight of the matmuls (the f32 W_kb/W_vb are attention's, counted there)
    double mm = 0;
    for (const auto& [name, ne] : mkmodel_tensor_list(s)) {
        if (ne.size() < 2 || name == "token_embd.weight" || ends_with(name, "attn_kv_b.weight")) continue;
        const double w = static_cast<double>(ne[0]) * static_cast<double>(ne[1]);
        mm += ne.size() == 3 ? 2.0 * w * hp.n_expert_used : 2.0 * w;
    }
    CHECK(tg.matmul_flops == Approx(mm).epsilon(1e-12));
    CHECK(tg.attn_flops > 0);
    // phase times: each phase ran, and the phases (disjoint spans of the decode) fit in its total
    for (const auto& st : {pp, tg}) {
        CHECK(st.ns_attn_proj > 0);
        CHECK(st.ns_attn > 0);
        CHECK(st.ns_moe_route > 0);
        CHECK(st.ns_ffn > 0);
        CHECK(st.ns_head > 0);
        CHECK(st.ns_attn_proj + st.ns_attn + st.ns_moe_route + st.ns_ffn + st.ns_head <= st.ns_total);
    }
}

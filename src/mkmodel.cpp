// The deterministic random-weight model maker. See include/latte/mkmodel.h for the contract.
//
// The file is streamed through GGUFWriter::add_tensor_streamed: each tensor is generated,
// converted and written slab by slab, so files larger than memory can be made.
#include "latte/mkmodel.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>
#include <unistd.h>

#include "latte/error.h"
#include "latte/gguf.h"
#include "latte/tokenizer.h"

namespace latte {

namespace {

constexpr uint64_t kChunk = 1u << 16;     // elements per generator stream (fixed: part of the format)
constexpr uint64_t kSlabChunks = 64;      // chunks generated/converted per write (4 Mi elements)
constexpr uint64_t kAlign = 32;

// ---- random numbers ---------------------------------------------------------------------------
uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

uint64_t fnv1a64(const std::string& s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : s) {
        h ^= c;
        h *= 0x100000001b3ull;
    }
    return h;
}

struct Xoshiro256ss {
    uint64_t s[4];
    explicit Xoshiro256ss(uint64_t seed) {
        uint64_t x = seed;
        for (auto& w : s) {
            x = splitmix64(x);
            w = x;
        }
    }
    static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    uint64_t next() {
        const uint64_t r = rotl(s[1] * 5, 7) * 9;
        const uint64_t t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = rotl(s[3], 45);
        return r;
    }
};

// Box–Muller on 24-bit uniforms, in float, with our own log and sin/cos polynomials (fast, and
// the same bits wherever IEEE float arithmetic is: no libm, and contraction into FMA is off).
// One 64-bit draw gives a pair: u1 = (bits 40..63 + 1)·2^-24 in (0, 1], u2 = bits 16..39 as
// 24-bit turns; z0 = r·cos(2π·u2), z1 = r·sin(2π·u2), r = sqrt(-2 ln u1).
#if defined(__clang__)
#pragma clang fp contract(off)
#define LATTE_NO_CONTRACT
#elif defined(__GNUC__)
#define LATTE_NO_CONTRACT __attribute__((optimize("-ffp-contract=off", "-ftree-vectorize")))
#else
#define LATTE_NO_CONTRACT
#endif
constexpr int kBMBlock = 256;  // pairs per box_muller call (a fixed count: it vectorises)

// Macros, not functions: a function with its own optimize attribute does not inline others.
#define LATTE_F2U(f) __builtin_bit_cast(uint32_t, (f))
#define LATTE_U2F(u) __builtin_bit_cast(float, (u))

// Branch-free (random data would mispredict every branch), so the compiler can vectorise it.
LATTE_NO_CONTRACT
void box_muller(const uint64_t* x, float* z0, float* z1) {
    float rr[kBMBlock];
    for (int i = 0; i < kBMBlock; ++i) {
        const uint32_t k1 = static_cast<uint32_t>(x[i] >> 40);
        const uint32_t k2 = static_cast<uint32_t>(x[i] >> 16) & 0xFFFFFFu;
        // ln(u1) = e·ln2 + ln(m), m in [sqrt(1/2), sqrt(2)), ln(m) = 2·atanh((m-1)/(m+1)).
        const uint32_t b = LATTE_F2U(static_cast<float>(static_cast<int32_t>(k1 + 1)) * 0x1p-24f);
        uint32_t mb = (b & 0x7FFFFFu) | 0x3F800000u;  // m in [1, 2)
        const uint32_t big = mb > 0x3FB504F3u ? 1u : 0u;  // m > sqrt(2): halve it
        mb -= big << 23;
        const int32_t e = static_cast<int32_t>(b >> 23) - 127 + static_cast<int32_t>(big);
        const float m = LATTE_U2F(mb);
        const float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
        const float lnm = 2.0f * s * (1.0f + s2 * (1.0f / 3 + s2 * (1.0f / 5 + s2 * (1.0f / 7 + s2 * (1.0f / 9)))));
        const float ln = static_cast<float>(e) * 0.693147180559945f + lnm;
        const float r2 = -2.0f * ln;
        rr[i] = r2 > 0.0f ? r2 : 0.0f;
        // 2π·u2 = q·π/2 + a, q = round(4·u2) (mod 4), a in [-π/4, π/4).
        const uint32_t q = (k2 + (1u << 21)) >> 22;
        const int32_t f = static_cast<int32_t>(k2) - static_cast<int32_t>(q << 22);
        const float a = static_cast<float>(f) * (0x1p-22f * 1.57079632679489662f), a2 = a * a;
        const float sa = a * (1.0f + a2 * (-1.0f / 6 + a2 * (1.0f / 120 + a2 * (-1.0f / 5040 + a2 * (1.0f / 362880)))));
        const float ca = 1.0f + a2 * (-0.5f + a2 * (1.0f / 24 + a2 * (-1.0f / 720 + a2 * (1.0f / 40320))));
        const uint32_t odd = 0u - (q & 1u);                 // all ones when q is odd: swap sin and cos
        const uint32_t cneg = ((q + 1u) >> 1 & 1u) << 31;   // cos negative for q = 1, 2
        const uint32_t sneg = (q >> 1 & 1u) << 31;          // sin negative for q = 2, 3
        const uint32_t cb = LATTE_F2U(ca), sb = LATTE_F2U(sa);
        z0[i] = LATTE_U2F(((cb & ~odd) | (sb & odd)) ^ cneg);
        z1[i] = LATTE_U2F(((sb & ~odd) | (cb & odd)) ^ sneg);
    }
    // sqrt in its own loop: errno handling keeps it scalar and would stop the loop above vectorising.
    for (int i = 0; i < kBMBlock; ++i) {
        const float r = std::sqrt(rr[i]);
        z0[i] *= r;
        z1[i] *= r;
    }
}

// Fills out[0..n) with mean + stddev·N(0,1) from chunk `chunk` of the tensor's stream
// (elements 2i and 2i+1 are one Box–Muller pair; an odd tail keeps the cos one).
void gen_chunk(uint64_t tensor_seed, uint64_t chunk, double mean, double stddev, float* out, uint64_t n) {
    Xoshiro256ss rng(tensor_seed + chunk * 0xD1B54A32D192ED03ull);
    constexpr int kB = kBMBlock;
    uint64_t x[kB] = {};
    float z0[kB], z1[kB];
    const float fm = static_cast<float>(mean), fs = static_cast<float>(stddev);
    for (uint64_t i = 0; i < n; i += 2 * kB) {
        const uint64_t pairs = std::min<uint64_t>(kB, (n - i + 1) / 2);
        for (uint64_t j = 0; j < pairs; ++j) x[j] = rng.next();
        box_muller(x, z0, z1);
        float* o = out + i;
        const uint64_t m = std::min<uint64_t>(2 * kB, n - i);
        for (uint64_t j = 0; j < m / 2; ++j) {
            o[2 * j] = fm + fs * z0[j];
            o[2 * j + 1] = fm + fs * z1[j];
        }
        if (m & 1) o[m - 1] = fm + fs * z0[m / 2];
    }
}

uint64_t tensor_seed(uint64_t seed, const std::string& name) { return splitmix64(seed ^ fnv1a64(name)); }

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The distribution of a tensor's values.
void tensor_dist(const std::string& name, const std::vector<int64_t>& ne, double& mean, double& stddev) {
    if (ends_with(name, "exp_probs_b.bias")) {
        mean = 0.0;
        stddev = 0.1;
    } else if (ne.size() == 1) {  // norm weights
        mean = 1.0;
        stddev = 0.1;
    } else if (name == "token_embd.weight") {
        mean = 0.0;
        stddev = 1.0;
    } else {
        mean = 0.0;
        stddev = 1.0 / std::sqrt(static_cast<double>(ne[0]));
    }
}

uint64_t nelements(const std::vector<int64_t>& ne) {
    uint64_t n = 1;
    for (int64_t d : ne) n *= static_cast<uint64_t>(d);
    return n;
}

// Runs fn(i) for i in [0, n) on up to n_threads threads (work handed out one index at a time).
template <class F>
void parallel_for(uint64_t n, unsigned n_threads, F&& fn) {
    const unsigned nt = static_cast<unsigned>(std::min<uint64_t>(n, std::max(1u, n_threads)));
    if (nt <= 1) {
        for (uint64_t i = 0; i < n; ++i) fn(i);
        return;
    }
    std::atomic<uint64_t> next{0};
    auto worker = [&]() {
        for (uint64_t i; (i = next.fetch_add(1)) < n;) fn(i);
    };
    std::vector<std::thread> ts;
    ts.reserve(nt - 1);
    for (unsigned t = 1; t < nt; ++t) ts.emplace_back(worker);
    worker();
    for (auto& t : ts) t.join();
}

// A spec with the "no experts" case spelled out: every layer dense, no routing.
MkModelSpec effective(const MkModelSpec& s) {
    MkModelSpec e = s;
    if (e.n_expert == 0) {
        e.n_layer_dense_lead = e.n_layer;
        e.n_expert_used = 0;
        e.n_expert_shared = 0;
        e.n_expert_groups = 1;
        e.n_group_used = 1;
    }
    return e;
}

std::string human_bytes(uint64_t b) {
    char buf[64];
    if (b >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(b) / (1ull << 30));
    else std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1ull << 20));
    return buf;
}

// ---- metadata ----------------------------------------------------------------------------------
void put_metadata(GGUFWriter& w, const MkModelSpec& s) {
    const std::string a = "deepseek2.";
    auto u32 = [&](const std::string& k, uint32_t v) { w.set(k, GGUFValue::u32(v)); };
    auto f32 = [&](const std::string& k, float v) { w.set(k, GGUFValue::f32(v)); };
    auto str = [&](const std::string& k, const std::string& v) { w.set(k, GGUFValue::str(v)); };
    auto boolean = [&](const std::string& k, bool v) { w.set(k, GGUFValue::boolean(v)); };
    str("general.architecture", "deepseek2");
    str("general.name", s.name);
    u32("general.file_type", mkmodel_file_type(s.type));
    if (s.type != GGMLType::F32 && s.type != GGMLType::F16 && s.type != GGMLType::BF16)
        u32("general.quantization_version", 2);
    u32(a + "context_length", s.n_ctx_train);
    u32(a + "embedding_length", s.n_embd);
    u32(a + "block_count", s.n_layer);
    u32(a + "feed_forward_length", s.n_ff);
    u32(a + "attention.head_count", s.n_head);
    u32(a + "attention.head_count_kv", s.split_kv_b ? 1 : s.n_head);
    f32(a + "rope.freq_base", s.rope_freq_base);
    f32(a + "attention.layer_norm_rms_epsilon", s.rms_eps);
    u32(a + "expert_used_count", s.n_expert_used);
    u32(a + "leading_dense_block_count", s.n_layer_dense_lead);
    u32(a + "vocab_size", s.n_vocab);
    if (s.q_lora_rank > 0) u32(a + "attention.q_lora_rank", s.q_lora_rank);
    u32(a + "attention.kv_lora_rank", s.kv_lora_rank);
    if (s.split_kv_b) {
        u32(a + "attention.key_length", s.kv_lora_rank + s.n_rot);
        u32(a + "attention.value_length", s.kv_lora_rank);
        u32(a + "attention.key_length_mla", s.d_nope + s.n_rot);
        u32(a + "attention.value_length_mla", s.d_v);
    } else {
        u32(a + "attention.key_length", s.d_nope + s.n_rot);
        u32(a + "attention.value_length", s.d_v);
    }
    u32(a + "expert_feed_forward_length", s.n_ff_exp);
    u32(a + "expert_count", s.n_expert);
    u32(a + "expert_shared_count", s.n_expert_shared);
    f32(a + "expert_weights_scale", s.expert_weights_scale);
    boolean(a + "expert_weights_norm", s.expert_weights_norm);
    u32(a + "expert_gating_func", s.gating_func);
    u32(a + "expert_group_count", s.n_expert_groups);
    u32(a + "expert_group_used_count", s.n_group_used);
    u32(a + "rope.dimension_count", s.n_rot);
    if (s.yarn) {
        str(a + "rope.scaling.type", "yarn");
        f32(a + "rope.scaling.factor", s.rope_factor);
        u32(a + "rope.scaling.original_context_length", s.n_ctx_orig);
        f32(a + "rope.scaling.yarn_log_multiplier", s.yarn_log_mul);
    }
    const BpeVocab voc = build_bpe_vocab(static_cast<int32_t>(s.n_vocab));
    if (voc.tokens.size() != s.n_vocab || voc.types.size() != s.n_vocab)
        throw Error("mkmodel: build_bpe_vocab(" + std::to_string(s.n_vocab) + ") returned " +
                    std::to_string(voc.tokens.size()) + " tokens");
    str("tokenizer.ggml.model", "gpt2");
    str("tokenizer.ggml.pre", "deepseek-v3");
    w.set("tokenizer.ggml.tokens", GGUFValue::str_array(voc.tokens));
    w.set("tokenizer.ggml.token_type", GGUFValue::i32_array(voc.types));
    w.set("tokenizer.ggml.merges", GGUFValue::str_array(voc.merges));
    u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(voc.bos));
    u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(voc.eos));
    boolean("tokenizer.ggml.add_bos_token", true);
    boolean("tokenizer.ggml.add_eos_token", false);
}


uint64_t tensor_bytes(GGMLType t, uint64_t n) {
    const TypeInfo& ti = type_info(t);
    return n / static_cast<uint64_t>(ti.block_size) * ti.type_size;
}

// The split layout's attn_k_b / attn_v_b values, rearranged from attn_kv_b's.
std::vector<float> derived_split(const MkModelSpec& s, const std::string& name, unsigned n_threads) {
    const std::string layer = name.substr(0, name.rfind(".attn_"));  // "blk.i"
    const int64_t L = s.kv_lora_rank, N = s.d_nope, V = s.d_v, H = s.n_head;
    const std::vector<int64_t> kv_ne = {L, H * (N + V)};
    const uint64_t n = nelements(kv_ne);
    std::vector<float> kv(n);
    const std::string kv_name = layer + ".attn_kv_b.weight";
    const uint64_t nchunks = (n + kChunk - 1) / kChunk;
    parallel_for(nchunks, n_threads, [&](uint64_t c) {
        const uint64_t first = c * kChunk;
        mkmodel_generate(s, kv_name, kv_ne, first, std::min(kChunk, n - first), kv.data() + first);
    });
    std::vector<float> out;
    if (ends_with(name, "attn_k_b.weight")) {  // {N, L, H}: slice h row l col n = W_kb_h[n][l]
        out.resize(static_cast<size_t>(N * L * H));
        for (int64_t h = 0; h < H; ++h)
            for (int64_t nn = 0; nn < N; ++nn) {
                const float* row = kv.data() + (h * (N + V) + nn) * L;
                for (int64_t l = 0; l < L; ++l) out[static_cast<size_t>((h * L + l) * N + nn)] = row[l];
            }
    } else {  // attn_v_b {L, V, H}: slice h row v = W_vb_h row v
        out.resize(static_cast<size_t>(L * V * H));
        for (int64_t h = 0; h < H; ++h)
            std::memcpy(out.data() + h * V * L, kv.data() + (h * (N + V) + N) * L, sizeof(float) * V * L);
    }
    return out;
}

}  // namespace

// ---- presets ----------------------------------------------------------------------------------
std::vector<std::string> mkmodel_preset_names() { return {"tiny", "v2-lite", "v3", "anchor"}; }

MkModelSpec mkmodel_preset(const std::string& name) {
    MkModelSpec s;  // the defaults are the tiny preset
    s.name = "latte-random-" + name;
    if (name == "tiny") return s;
    // Shared by the real-width presets.
    s.kv_lora_rank = 512;
    s.n_rot = 64;
    s.d_nope = 128;
    s.d_v = 128;
    s.yarn = true;
    s.rope_factor = 40.0f;
    s.n_ctx_orig = 4096;
    s.n_ctx_train = 163840;
    s.rope_freq_base = 10000.0f;
    s.rms_eps = 1e-6f;
    if (name == "v2-lite") {
        s.n_vocab = 102400; s.n_embd = 2048; s.n_layer = 27; s.n_head = 16; s.q_lora_rank = 0;
        s.n_ff = 10944; s.n_ff_exp = 1408; s.n_expert = 64; s.n_expert_used = 6; s.n_expert_shared = 2;
        s.n_layer_dense_lead = 1; s.gating_func = 1; s.expert_weights_norm = false;
        s.expert_weights_scale = 1.0f; s.n_expert_groups = 1; s.n_group_used = 1; s.yarn_log_mul = 0.0707f;
        return s;
    }
    if (name == "v3") {
        s.n_vocab = 129280; s.n_embd = 7168; s.n_layer = 61; s.n_head = 128; s.q_lora_rank = 1536;
        s.n_ff = 18432; s.n_ff_exp = 2048; s.n_expert = 256; s.n_expert_used = 8; s.n_expert_shared = 1;
        s.n_layer_dense_lead = 3; s.gating_func = 2; s.expert_weights_norm = true;
        s.expert_weights_scale = 2.5f; s.n_expert_groups = 8; s.n_group_used = 4; s.yarn_log_mul = 0.1f;
        return s;
    }
    if (name == "anchor") {
        s.n_vocab = 960; s.n_embd = 2048; s.n_layer = 4; s.n_head = 16; s.q_lora_rank = 1536;
        s.n_ff = 10944; s.n_ff_exp = 1408; s.n_expert = 8; s.n_expert_used = 4; s.n_expert_shared = 2;
        s.n_layer_dense_lead = 1; s.gating_func = 1; s.expert_weights_norm = false;
        s.expert_weights_scale = 1.0f; s.n_expert_groups = 1; s.n_group_used = 1; s.yarn_log_mul = 0.0707f;
        s.type = GGMLType::Q8_0;
        return s;
    }
    std::string list;
    for (const auto& p : mkmodel_preset_names()) list += (list.empty() ? "" : ", ") + p;
    throw Error("unknown preset '" + name + "': expected one of " + list);
}

// ---- shapes -----------------------------------------------------------------------------------
std::vector<std::pair<std::string, std::vector<int64_t>>> mkmodel_tensor_list(const MkModelSpec& spec) {
    const MkModelSpec s = effective(spec);
    const int64_t E = s.n_embd, H = s.n_head, L = s.kv_lora_rank, R = s.n_rot, N = s.d_nope, V = s.d_v;
    const int64_t Q = s.q_lora_rank, X = s.n_expert, F = s.n_ff, FE = s.n_ff_exp;
    std::vector<std::pair<std::string, std::vector<int64_t>>> t;
    t.push_back({"token_embd.weight", {E, static_cast<int64_t>(s.n_vocab)}});
    for (uint32_t il = 0; il < s.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        t.push_back({p + "attn_norm.weight", {E}});
        if (Q > 0) {
            t.push_back({p + "attn_q_a.weight", {E, Q}});
            t.push_back({p + "attn_q_a_norm.weight", {Q}});
            t.push_back({p + "attn_q_b.weight", {Q, H * (N + R)}});
        } else {
            t.push_back({p + "attn_q.weight", {E, H * (N + R)}});
        }
        t.push_back({p + "attn_kv_a_mqa.weight", {E, L + R}});
        t.push_back({p + "attn_kv_a_norm.weight", {L}});
        if (s.split_kv_b) {
            t.push_back({p + "attn_k_b.weight", {N, L, H}});
            t.push_back({p + "attn_v_b.weight", {L, V, H}});
        } else {
            t.push_back({p + "attn_kv_b.weight", {L, H * (N + V)}});
        }
        t.push_back({p + "attn_output.weight", {H * V, E}});
        t.push_back({p + "ffn_norm.weight", {E}});
        if (il < s.n_layer_dense_lead) {
            t.push_back({p + "ffn_gate.weight", {E, F}});
            t.push_back({p + "ffn_up.weight", {E, F}});
            t.push_back({p + "ffn_down.weight", {F, E}});
        } else {
            t.push_back({p + "ffn_gate_inp.weight", {E, X}});
            if (s.gating_func == 2) t.push_back({p + "exp_probs_b.bias", {X}});
            t.push_back({p + "ffn_gate_exps.weight", {E, FE, X}});
            t.push_back({p + "ffn_up_exps.weight", {E, FE, X}});
            t.push_back({p + "ffn_down_exps.weight", {FE, E, X}});
            if (s.n_expert_shared > 0) {
                const int64_t FS = FE * s.n_expert_shared;
                t.push_back({p + "ffn_gate_shexp.weight", {E, FS}});
                t.push_back({p + "ffn_up_shexp.weight", {E, FS}});
                t.push_back({p + "ffn_down_shexp.weight", {FS, E}});
            }
        }
    }
    t.push_back({"output_norm.weight", {E}});
    t.push_back({"output.weight", {E, static_cast<int64_t>(s.n_vocab)}});
    return t;
}

GGMLType mkmodel_tensor_type(const MkModelSpec& spec, const std::string& name, const std::vector<int64_t>& ne) {
    if (ne.size() == 1 || ends_with(name, "ffn_gate_inp.weight")) return GGMLType::F32;
    // K-quants need rows of whole 256-blocks: other rows fall back to q8_0 (as llama.cpp's quantizer does).
    if (mkmodel_is_k_quant(spec.type) && ne[0] % 256 != 0) return GGMLType::Q8_0;
    return spec.type;
}

uint64_t mkmodel_param_count(const MkModelSpec& spec) {
    uint64_t n = 0;
    for (const auto& [name, ne] : mkmodel_tensor_list(spec)) n += nelements(ne);
    return n;
}

bool mkmodel_is_k_quant(GGMLType t) {
    return t == GGMLType::Q4_K || t == GGMLType::Q5_K || t == GGMLType::Q6_K;
}

uint32_t mkmodel_file_type(GGMLType t) {
    switch (t) {
        case GGMLType::F32: return 0;
        case GGMLType::F16: return 1;
        case GGMLType::Q8_0: return 7;
        case GGMLType::Q4_0: return 2;
        case GGMLType::BF16: return 32;
        case GGMLType::Q4_K: return 14;  // llama.cpp's MOSTLY_Q4_K_S
        case GGMLType::Q5_K: return 16;  // MOSTLY_Q5_K_S
        case GGMLType::Q6_K: return 18;  // MOSTLY_Q6_K
        default: throw Error(std::string("unsupported weight type '") + type_name(t) +
                             "': expected one of f32, f16, bf16, q8_0, q4_0, q4_K, q5_K, q6_K");
    }
}

void mkmodel_validate(const MkModelSpec& spec) {
    auto fail = [](const std::string& m) { throw Error("invalid model spec: " + m); };
    auto need_pos = [&](uint32_t v, const char* what) {
        if (v == 0) fail(std::string(what) + " must be > 0");
    };
    mkmodel_file_type(spec.type);  // throws for unsupported types
    if (spec.n_vocab < 258)
        fail("vocab " + std::to_string(spec.n_vocab) + " is too small: it must be >= 258 (2 special + 256 byte tokens)");
    need_pos(spec.n_embd, "n_embd");
    need_pos(spec.n_layer, "layers");
    need_pos(spec.n_head, "heads");
    need_pos(spec.kv_lora_rank, "kv_lora_rank");
    need_pos(spec.n_rot, "rope dims");
    need_pos(spec.d_nope, "nope dims");
    need_pos(spec.d_v, "v dims");
    if (spec.n_rot % 2 != 0) fail("rope dims " + std::to_string(spec.n_rot) + " must be even");
    if (spec.n_layer_dense_lead > spec.n_layer)
        fail("dense layers " + std::to_string(spec.n_layer_dense_lead) + " exceed layers " + std::to_string(spec.n_layer));
    if (spec.gating_func != 1 && spec.gating_func != 2)
        fail("gating function " + std::to_string(spec.gating_func) + " must be 1 (softmax) or 2 (sigmoid)");
    if (!(spec.rms_eps > 0.0f)) fail("rms eps must be > 0");
    if (!(spec.rope_freq_base > 0.0f)) fail("rope freq base must be > 0");
    if (spec.yarn) {
        if (!(spec.rope_factor >= 1.0f)) fail("YaRN factor must be >= 1");
        need_pos(spec.n_ctx_orig, "YaRN original context length");
    }
    need_pos(spec.n_ctx_train, "context length");
    const MkModelSpec s = effective(spec);
    const bool any_dense = s.n_layer_dense_lead > 0;
    const bool any_moe = s.n_expert > 0 && s.n_layer_dense_lead < s.n_layer;
    if (any_dense) need_pos(s.n_ff, "dense FFN width (--ff)");
    if (s.n_expert > 0) {
        const std::string E = std::to_string(s.n_expert);
        if (any_moe) need_pos(s.n_ff_exp, "expert FFN width (--ff-exp)");
        if (s.n_expert_used == 0) fail("experts used must be > 0 when there are experts");
        if (s.n_expert_used > s.n_expert)
            fail("experts used " + std::to_string(s.n_expert_used) + " exceed experts " + E + " (set --experts-used)");
        if (s.n_expert_groups == 0 || s.n_expert % s.n_expert_groups != 0)
            fail("expert groups " + std::to_string(s.n_expert_groups) + " must divide experts " + E + " (set --groups)");
        if (s.n_group_used == 0 || s.n_group_used > s.n_expert_groups)
            fail("groups used " + std::to_string(s.n_group_used) + " must be in 1.." + std::to_string(s.n_expert_groups) +
                 " (set --groups-used)");
        const uint32_t per_group = s.n_expert / s.n_expert_groups;
        if (s.n_expert_used > s.n_group_used * per_group)
            fail("experts used " + std::to_string(s.n_expert_used) + " exceed the " +
                 std::to_string(s.n_group_used * per_group) + " experts of the " + std::to_string(s.n_group_used) +
                 " groups used");
        if (s.n_expert_groups > 1 && per_group < 2)
            fail("with expert groups, each group needs >= 2 experts (group scores sum the top 2): " + E +
                 " experts in " + std::to_string(s.n_expert_groups) + " groups");
    }
    // Row lengths against the type's block size; int64 shapes must not overflow.
    for (const auto& [name, ne] : mkmodel_tensor_list(s)) {
        long double n = 1;
        for (int64_t d : ne) n *= static_cast<long double>(d);
        if (n > 9.0e18L) fail("tensor " + name + " is too large");
        const GGMLType t = mkmodel_tensor_type(s, name, ne);  // a K-quant's q8_0 fallback included
        const TypeInfo& ti = type_info(t);
        if (t != GGMLType::F32 && ti.block_size > 1 && ne[0] % ti.block_size != 0)
            fail(std::string("type ") + ti.name + " needs every row length to be a multiple of " +
                 std::to_string(ti.block_size) + ": tensor " + name + " has rows of " + std::to_string(ne[0]) +
                 " (n_embd, FFN widths, q_lora_rank and kv_lora_rank must be multiples of " +
                 std::to_string(ti.block_size) + ")");
    }
}

// ---- values -----------------------------------------------------------------------------------
void mkmodel_generate(const MkModelSpec& spec, const std::string& name, const std::vector<int64_t>& ne,
                      uint64_t first, uint64_t count, float* out) {
    double mean = 0, stddev = 1;
    tensor_dist(name, ne, mean, stddev);
    const uint64_t ts = tensor_seed(spec.seed, name);
    const uint64_t end = first + count;
    std::vector<float> tmp;
    for (uint64_t c = first / kChunk; c * kChunk < end; ++c) {
        const uint64_t c0 = c * kChunk, c1 = c0 + kChunk;
        const uint64_t a = std::max(first, c0), b = std::min(end, c1);
        if (a == c0 && b == c1) {
            gen_chunk(ts, c, mean, stddev, out + (a - first), kChunk);
        } else {  // partial chunk: generate its prefix up to b, keep [a, b)
            tmp.resize(b - c0);
            gen_chunk(ts, c, mean, stddev, tmp.data(), b - c0);
            std::memcpy(out + (a - first), tmp.data() + (a - c0), sizeof(float) * (b - a));
        }
    }
}

// ---- the writer -------------------------------------------------------------------------------
// Metadata and tensor infos go through GGUFWriter; each tensor's bytes are generated, converted and
// emitted slab by slab at write time, so memory stays small whatever the model's size.
void mkmodel_write(const MkModelSpec& spec_in, const std::string& path, bool progress, unsigned n_threads) {
    mkmodel_validate(spec_in);
    const MkModelSpec s = effective(spec_in);
    if (n_threads == 0) n_threads = std::max(1u, std::thread::hardware_concurrency());

    GGUFWriter w(static_cast<uint32_t>(kAlign));
    put_metadata(w, s);
    const auto list = mkmodel_tensor_list(s);
    const bool tty = progress && isatty(fileno(stderr));
    size_t done = 0, last_decile = 0;
    uint64_t bytes_done = 0;
    for (const auto& [name_ref, ne_ref] : list) {
        const std::string name = name_ref;
        const std::vector<int64_t> ne = ne_ref;
        const GGMLType type = mkmodel_tensor_type(s, name, ne);
        const uint64_t n = nelements(ne);
        w.add_tensor_streamed(name, ne, type, [&, name, ne, type, n](const GGUFWriter::Emit& emit) {
            if (tty) {
                std::fprintf(stderr, "\rlatte-mkmodel: writing tensor %zu/%zu (%s)\x1b[K", done + 1, list.size(),
                             name.c_str());
                std::fflush(stderr);
            }
            std::vector<float> src;
            if (s.split_kv_b && (ends_with(name, ".attn_k_b.weight") || ends_with(name, ".attn_v_b.weight")))
                src = derived_split(s, name, n_threads);
            std::vector<float> fbuf;
            std::vector<uint8_t> obuf;
            const uint64_t slab = kChunk * kSlabChunks;
            for (uint64_t s0 = 0; s0 < n; s0 += slab) {
                const uint64_t sn = std::min(slab, n - s0);
                const uint64_t nchunks = (sn + kChunk - 1) / kChunk;
                if (src.empty()) fbuf.resize(sn);
                obuf.resize(tensor_bytes(type, sn));
                parallel_for(nchunks, n_threads, [&](uint64_t c) {
                    const uint64_t off = c * kChunk, len = std::min(kChunk, sn - off);
                    const float* vals;
                    if (src.empty()) {
                        mkmodel_generate(s, name, ne, s0 + off, len, fbuf.data() + off);
                        vals = fbuf.data() + off;
                    } else {
                        vals = src.data() + s0 + off;
                    }
                    quantize_row(type, vals, obuf.data() + tensor_bytes(type, off), static_cast<int64_t>(len));
                });
                emit(obuf.data(), obuf.size());
            }
            ++done;
            bytes_done += tensor_bytes(type, n);
            if (progress && !tty) {
                const size_t decile = done * 10 / list.size();
                if (decile != last_decile) {
                    last_decile = decile;
                    std::fprintf(stderr, "latte-mkmodel: %zu/%zu tensors written (%s)\n", done, list.size(),
                                 human_bytes(bytes_done).c_str());
                }
            }
        });
    }

    const std::string tmp_path = path + ".tmp";
    try {
        w.write(tmp_path);
        if (tty) std::fprintf(stderr, "\rlatte-mkmodel: %zu/%zu tensors written\x1b[K\n", list.size(), list.size());
        std::error_code ec;
        std::filesystem::rename(tmp_path, path, ec);
        if (ec) throw Error("latte-mkmodel: cannot rename '" + tmp_path + "' to '" + path + "': " + ec.message());
    } catch (...) {
        if (tty) std::fprintf(stderr, "\n");
        std::error_code ec;
        std::filesystem::remove(tmp_path, ec);
        throw;
    }
}

}  // namespace latte

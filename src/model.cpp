// Loading a deepseek2 GGUF: hyperparameters, tensors with their expected shapes, derived weights.
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>
#include <thread>

#include "kernels/dispatch.h"
#include "model_impl.h"

namespace latte {

Matrix Matrix::rows(int64_t first, int64_t count) const {
    if ((type == GGMLType::Q8_0_R16 || type == GGMLType::Q4_0_R16) && (first % 16 != 0 || count % 16 != 0))
        throw Error("internal: rows [" + std::to_string(first) + ", +" + std::to_string(count) + ") of " +
                    type_name(type) + " matrix " + name + " do not fall on 16-row groups");
    Matrix m = *this;
    m.data = row(first);
    m.n_out = count;
    return m;
}

AnonBuffer::AnonBuffer(size_t n) : size(n) {
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        throw Error("cannot allocate " + std::to_string(n) + " bytes for repacked weights: " + std::strerror(errno) +
                    " (--no-repack keeps the file's layout)");
    data = static_cast<uint8_t*>(p);
    // Transparent huge pages where the system allows them (madvise mode): fewer faults while
    // repacking, fewer TLB misses while streaming the weights. Best effort.
    if (n >= (2u << 20)) (void)::madvise(p, n, MADV_HUGEPAGE);
}
AnonBuffer::~AnonBuffer() {
    if (data) ::munmap(data, size);
}

namespace {

// Repacking Q8_0 / Q4_0 matrices into q8_0_r16 / q4_0_r16 (issue 7, latte/types.h), and Q4_K / Q5_K /
// Q6_K into q4_K_r / q5_K_r / q6_K_r (any contiguous matrix). A Q8_0 / Q4_0 matrix qualifies when its
// row count and its slice unit (the rows forward.cpp takes as one matrix: an expert's rows of a
// 3-D tensor) are multiples of 16 and its rows are contiguous. In a file read into writable memory
// (--no-mmap, --hugepages, --hugetlb) the groups are permuted in place (same bytes: huge pages,
// locking and NUMA placement are kept); a mapped file is left untouched and the repacked copy
// goes to anonymous memory (locked too under --mlock).
void repack_weights(ModelImpl& m, const ModelParams& p) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string& mode = m.file->load_info().mode;
    const bool in_place = mode.rfind("read", 0) == 0;
    std::vector<std::pair<Matrix*, int64_t>> cand;  // matrix, slice unit
    auto add = [&](Matrix& w, int64_t unit) { cand.push_back({&w, unit}); };
    add(m.output, m.output.n_out);
    const int64_t E = m.hp.n_embd, F = m.hp.n_ff_exp;
    for (Layer& l : m.layers) {
        for (Matrix* w : {&l.wq, &l.wq_a, &l.wq_b, &l.wkv_a_mqa, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down, &l.gate_inp,
                          &l.gate_shexp, &l.up_shexp, &l.down_shexp})
            add(*w, w->n_out);
        // attn_kv_b's per-head slices start at rows h·(N+V) and h·(N+V)+N
        add(l.wkv_b, m.hp.d_nope % 16 == 0 && m.hp.d_v % 16 == 0 ? 16 : 1);
        add(l.gate_exps, F);
        add(l.up_exps, F);
        add(l.down_exps, E);
    }
    // Q4_K / Q5_K / Q6_K (issue 7): each 256-block rearranged in place in its row (q4_K_r, q5_K_r,
    // q6_K_r: the scales decoded for the kernels; rows stay independent, so no slice constraint).
    // Job: groups of 16 rows (r16) or rows (K-quants).
    struct Job { GGMLType t; const uint8_t* src; uint8_t* dst; int64_t n_in, groups; };
    std::vector<Job> jobs;
    for (auto [w, unit] : cand) {
        const bool kq = w->type == GGMLType::Q4_K || w->type == GGMLType::Q5_K || w->type == GGMLType::Q6_K;
        if (w->empty() || w->row_stride != row_bytes(w->type, w->n_in)) continue;
        if (!kq && ((w->type != GGMLType::Q8_0 && w->type != GGMLType::Q4_0) || w->n_out % 16 != 0 || unit <= 0 ||
                    unit % 16 != 0))
            continue;
        const size_t bytes = w->row_stride * static_cast<size_t>(w->n_out);
        uint8_t* dst;
        if (in_place) {
            dst = const_cast<uint8_t*>(w->data);
        } else {
            m.repack_bufs.push_back(std::make_unique<AnonBuffer>(bytes));
            dst = m.repack_bufs.back()->data;
            if (p.mlock) ::mlock(dst, bytes);  // best effort, as the file's own lock
        }
        const size_t gbytes = (kq ? 1 : 16) * w->row_stride;
        const int64_t ng = kq ? w->n_out : w->n_out / 16,
                      chunk = std::max<int64_t>(1, static_cast<int64_t>((4u << 20) / gbytes));
        for (int64_t g = 0; g < ng; g += chunk)
            jobs.push_back({w->type, w->data + g * gbytes, dst + g * gbytes, w->n_in, std::min(chunk, ng - g)});
        w->data = dst;
        w->type = kq ? kr_type(w->type) : r16_type(w->type);
        ++m.n_repacked;
        m.repacked_bytes += bytes;
        if (kq) {
            ++m.n_repacked_kq;
            m.repacked_kq_bytes += bytes;
        }
    }
    std::atomic<size_t> next{0};
    auto work = [&] {
        std::vector<uint8_t> tmp;
        for (size_t i; (i = next.fetch_add(1)) < jobs.size();) {
            const Job& j = jobs[i];
            if (j.t == GGMLType::Q4_K || j.t == GGMLType::Q5_K || j.t == GGMLType::Q6_K) {  // block by block, in place too
                repack_k(j.t, j.src, j.dst, j.n_in * j.groups);
                continue;
            }
            const size_t n = row_bytes(j.t, j.n_in) * 16 * static_cast<size_t>(j.groups);
            if (j.src == j.dst) {  // in place: through a copy of the chunk
                tmp.assign(j.src, j.src + n);
                repack_r16(j.t, tmp.data(), j.n_in, 16 * j.groups, j.dst);
            } else {
                repack_r16(j.t, j.src, j.n_in, 16 * j.groups, j.dst);
            }
        }
    };
    const unsigned nt = std::max(1u, std::min({std::thread::hardware_concurrency(), 32u,
                                                static_cast<unsigned>(std::max<size_t>(1, jobs.size()))}));
    std::vector<std::thread> th;
    for (unsigned i = 1; i < nt; ++i) th.emplace_back(work);
    work();
    for (std::thread& t : th) t.join();
    m.repacked_in_place = in_place && m.n_repacked > 0;
    m.repack_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string shape_str(const std::vector<int64_t>& ne) {
    std::string s = "{";
    for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
    return s + "}";
}

class Loader {
public:
    explicit Loader(const GGUFFile& f) : f_(f) {}

    const GGUFTensorInfo& get(const std::string& name, const std::vector<int64_t>& ne) {
        const GGUFTensorInfo* t = f_.find_tensor(name);
        if (!t) throw Error(f_.path() + ": tensor '" + name + "' is missing (expected shape " + shape_str(ne) + ")");
        if (t->ne != ne)
            throw Error(f_.path() + ": tensor '" + name + "' has shape " + shape_str(t->ne) + ", expected " +
                        shape_str(ne) + " for the model's hyperparameters");
        if (!type_info(t->type).convertible)
            throw Error(f_.path() + ": tensor '" + name + "' has type " + type_name(t->type) +
                        ", which latte cannot compute yet (supported: f32, f16, bf16, q8_0, q4_0, q4_K, q5_K, q6_K)");
        n_params_ += static_cast<uint64_t>(t->nelements());
        return *t;
    }
    Matrix matrix(const std::string& name, std::vector<int64_t> ne) {
        const GGUFTensorInfo& t = get(name, ne);
        Matrix m;
        m.name = name;
        m.type = t.type;
        m.n_in = ne[0];
        m.n_out = t.nrows();
        m.data = t.data;
        m.row_stride = row_bytes(t.type, ne[0]);
        return m;
    }
    std::vector<float> vec(const std::string& name, int64_t n) {
        const GGUFTensorInfo& t = get(name, {n});
        std::vector<float> v(static_cast<size_t>(n));
        dequantize_row(t.type, t.data, v.data(), n);
        return v;
    }
    bool has(const std::string& name) const { return f_.find_tensor(name) != nullptr; }
    uint64_t n_params() const { return n_params_; }

private:
    const GGUFFile& f_;
    uint64_t n_params_ = 0;
};

void require(bool ok, const GGUFFile& f, const std::string& what) {
    if (!ok) throw Error(f.path() + ": " + what);
}

}  // namespace

HParams read_hparams(const GGUFFile& f) {
    HParams hp;
    hp.arch = f.get_str("general.architecture");
    require(hp.arch == "deepseek2", f, "general.architecture is '" + hp.arch + "', expected 'deepseek2'");
    hp.name = f.get_str_or("general.name", "");
    const std::string a = "deepseek2.";
    hp.n_ctx_train = f.get_u32(a + "context_length");
    hp.n_embd = f.get_u32(a + "embedding_length");
    hp.n_layer = f.get_u32(a + "block_count");
    hp.n_head = f.get_u32(a + "attention.head_count");
    hp.n_head_kv = f.get_u32_or(a + "attention.head_count_kv", hp.n_head);
    hp.n_ff = f.get_u32(a + "feed_forward_length");
    hp.rms_eps = f.get_f32(a + "attention.layer_norm_rms_epsilon");
    hp.rope_freq_base = f.get_f32_or(a + "rope.freq_base", 10000.0f);
    hp.n_rot = f.get_u32(a + "rope.dimension_count");
    hp.q_lora_rank = f.get_u32_or(a + "attention.q_lora_rank", 0);
    hp.kv_lora_rank = f.get_u32(a + "attention.kv_lora_rank");
    hp.n_layer_dense_lead = f.get_u32_or(a + "leading_dense_block_count", 0);
    hp.n_expert = f.get_u32_or(a + "expert_count", 0);
    hp.n_expert_used = f.get_u32_or(a + "expert_used_count", 0);
    hp.n_expert_shared = f.get_u32_or(a + "expert_shared_count", 0);
    hp.n_ff_exp = f.get_u32_or(a + "expert_feed_forward_length", 0);
    hp.expert_weights_scale = f.get_f32_or(a + "expert_weights_scale", 1.0f);
    hp.expert_weights_norm = f.get_bool_or(a + "expert_weights_norm", false);
    hp.gating_func = f.get_u32_or(a + "expert_gating_func", 1);  // older files: softmax
    hp.n_expert_groups = f.get_u32_or(a + "expert_group_count", 1);
    hp.n_group_used = f.get_u32_or(a + "expert_group_used_count", hp.n_expert_groups);

    // Head sizes: the k_b/v_b layout stores the MLA sizes under *_mla and 576/512 in key/value_length.
    if (f.has(a + "attention.key_length_mla")) {
        hp.split_kv_b = true;
        const uint32_t k = f.get_u32(a + "attention.key_length_mla");
        const uint32_t v = f.get_u32(a + "attention.value_length_mla");
        require(k > hp.n_rot, f, "attention.key_length_mla must exceed rope.dimension_count");
        hp.d_nope = k - hp.n_rot;
        hp.d_v = v;
    } else {
        const uint32_t k = f.get_u32(a + "attention.key_length");
        require(k > hp.n_rot, f, "deepseek2.attention.key_length (" + std::to_string(k) +
                                     ") must exceed rope.dimension_count (" + std::to_string(hp.n_rot) + ")");
        hp.d_nope = k - hp.n_rot;
        hp.d_v = f.get_u32(a + "attention.value_length");
    }

    const std::string st = f.get_str_or(a + "rope.scaling.type", "none");
    if (st == "yarn") {
        hp.rope_yarn = true;
        hp.rope_factor = f.get_f32(a + "rope.scaling.factor");
        hp.n_ctx_orig = f.get_u32(a + "rope.scaling.original_context_length");
        hp.yarn_log_mul = f.get_f32_or(a + "rope.scaling.yarn_log_multiplier", 0.0f);
        hp.yarn_beta_fast = f.get_f32_or(a + "rope.scaling.yarn_beta_fast", 32.0f);
        hp.yarn_beta_slow = f.get_f32_or(a + "rope.scaling.yarn_beta_slow", 1.0f);
        require(hp.rope_factor >= 1.0f, f, "rope.scaling.factor must be >= 1");
        require(hp.n_ctx_orig > 0, f, "rope.scaling.original_context_length must be positive");
    } else if (st != "none") {
        throw Error(f.path() + ": deepseek2.rope.scaling.type '" + st + "' is not supported (expected 'yarn' or 'none')");
    }

    // Sanity: sizes a forward can run with.
    require(hp.n_layer >= 1 && hp.n_layer <= 1024, f, "deepseek2.block_count out of range");
    require(hp.n_embd >= 1 && hp.n_embd <= 1 << 16, f, "deepseek2.embedding_length out of range");
    require(hp.n_head >= 1 && hp.n_head <= 1024, f, "deepseek2.attention.head_count out of range");
    require(hp.n_rot >= 2 && hp.n_rot % 2 == 0 && hp.n_rot <= 1024, f, "deepseek2.rope.dimension_count must be even");
    require(hp.kv_lora_rank >= 1 && hp.kv_lora_rank <= 1 << 14, f, "deepseek2.attention.kv_lora_rank out of range");
    require(hp.d_v >= 1 && hp.d_v <= 1 << 12, f, "deepseek2.attention.value_length out of range");
    require(hp.n_layer_dense_lead <= hp.n_layer, f, "leading_dense_block_count exceeds block_count");
    require(hp.gating_func == 1 || hp.gating_func == 2, f,
            "deepseek2.expert_gating_func is " + std::to_string(hp.gating_func) + ", expected 1 (softmax) or 2 (sigmoid)");
    if (hp.n_expert > 0) {
        require(hp.n_expert_used >= 1 && hp.n_expert_used <= hp.n_expert, f,
                "deepseek2.expert_used_count must be in [1, expert_count]");
        require(hp.n_ff_exp >= 1, f, "deepseek2.expert_feed_forward_length is missing or zero");
        require(hp.n_expert_groups >= 1 && hp.n_expert % hp.n_expert_groups == 0, f,
                "deepseek2.expert_group_count must divide expert_count");
        require(hp.n_group_used >= 1 && hp.n_group_used <= hp.n_expert_groups, f,
                "deepseek2.expert_group_used_count must be in [1, expert_group_count]");
        require(static_cast<uint64_t>(hp.n_group_used) * (hp.n_expert / hp.n_expert_groups) >= hp.n_expert_used, f,
                "the used expert groups hold fewer experts than expert_used_count");
    }
    const std::vector<std::string> toks = f.get_str_array("tokenizer.ggml.tokens");
    hp.n_vocab = static_cast<uint32_t>(toks.size());
    if (f.has(a + "vocab_size"))
        require(f.get_u32(a + "vocab_size") == hp.n_vocab, f, "deepseek2.vocab_size differs from the token list's length");
    return hp;
}

std::vector<float> rope_frequencies(const HParams& hp) {
    const int half = static_cast<int>(hp.n_rot / 2);
    std::vector<float> f(half);
    const double base = hp.rope_freq_base, dim = hp.n_rot;
    if (!hp.rope_yarn) {
        for (int i = 0; i < half; ++i) f[i] = static_cast<float>(std::pow(base, -2.0 * i / dim));
        return f;
    }
    // YaRN (as the model authors' DeepseekV3YarnRotaryEmbedding and ggml's rope_yarn): blend the
    // interpolated (÷factor) and extrapolated frequencies by a linear ramp between the correction
    // dims of beta_fast and beta_slow.
    auto corr_dim = [&](double n_rot) {
        return dim * std::log(hp.n_ctx_orig / (n_rot * 2.0 * M_PI)) / (2.0 * std::log(base));
    };
    double low = std::floor(corr_dim(hp.yarn_beta_fast));
    double high = std::ceil(corr_dim(hp.yarn_beta_slow));
    low = std::max(0.0, low);
    high = std::min(dim - 1, high);
    if (low == high) high += 0.001;
    for (int i = 0; i < half; ++i) {
        const double extra = std::pow(base, -2.0 * i / dim);
        const double inter = extra / hp.rope_factor;
        const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
        const double extra_w = 1.0 - ramp;  // ramp 0 (low dims, fast rotation) keeps extrapolation
        f[i] = static_cast<float>(inter * (1.0 - extra_w) + extra * extra_w);
    }
    return f;
}

float attention_scale(const HParams& hp) {
    double mscale = 1.0;
    if (hp.rope_yarn && hp.yarn_log_mul != 0.0f) mscale = 1.0 + hp.yarn_log_mul * std::log(hp.rope_factor);
    return static_cast<float>(mscale * mscale / std::sqrt(static_cast<double>(hp.d_qk())));
}

std::shared_ptr<Model> Model::load(const std::string& path, const ModelParams& p) {
    const auto t0 = std::chrono::steady_clock::now();
    // The kernel level (LATTE_ISA, or the best this CPU runs) is resolved before the file is read:
    // a level this CPU or build lacks is an error now, not after minutes of loading a large model.
    kernel_level();
    std::shared_ptr<Model> model(new Model());
    model->impl_ = std::make_unique<ModelImpl>();
    ModelImpl& m = *model->impl_;
    GGUFOpenOptions oo;
    oo.use_mmap = p.use_mmap;
    oo.mlock = p.mlock;
    oo.populate = p.populate;
    oo.progress = p.progress;
    oo.numa_interleave = p.numa_interleave;
    if (p.hugepages == "thp") oo.hugepages = HugePages::Thp;
    else if (p.hugepages == "hugetlb") oo.hugepages = HugePages::HugeTlb;
    else if (p.hugepages != "off" && !p.hugepages.empty())
        throw Error("ModelParams::hugepages '" + p.hugepages + "': expected off, thp or hugetlb");
    m.file = GGUFFile::open(path, oo);
    const GGUFFile& f = *m.file;
    m.hp = read_hparams(f);
    HParams& hp = m.hp;
    m.tokenizer = Tokenizer::from_gguf(f);

    const int64_t E = hp.n_embd, H = hp.n_head, L = hp.kv_lora_rank, R = hp.n_rot, N = hp.d_nope, V = hp.d_v;
    const int64_t DK = N + R;
    Loader ld(f);
    m.tok_embd = ld.matrix("token_embd.weight", {E, hp.n_vocab});
    m.output_norm = ld.vec("output_norm.weight", E);
    m.output = ld.matrix("output.weight", {E, hp.n_vocab});
    m.layers.resize(hp.n_layer);
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        Layer& l = m.layers[il];
        const std::string b = "blk." + std::to_string(il) + ".";
        l.attn_norm = ld.vec(b + "attn_norm.weight", E);
        if (hp.q_lora_rank > 0) {
            l.wq_a = ld.matrix(b + "attn_q_a.weight", {E, hp.q_lora_rank});
            l.q_a_norm = ld.vec(b + "attn_q_a_norm.weight", hp.q_lora_rank);
            l.wq_b = ld.matrix(b + "attn_q_b.weight", {hp.q_lora_rank, H * DK});
        } else {
            l.wq = ld.matrix(b + "attn_q.weight", {E, H * DK});
        }
        l.wkv_a_mqa = ld.matrix(b + "attn_kv_a_mqa.weight", {E, L + R});
        l.kv_a_norm = ld.vec(b + "attn_kv_a_norm.weight", L);
        l.wkb.resize(static_cast<size_t>(H * N * L));
        l.wvb.resize(static_cast<size_t>(H * V * L));
        if (!hp.split_kv_b && !ld.has(b + "attn_kv_b.weight") && ld.has(b + "attn_k_b.weight")) hp.split_kv_b = true;
        GGMLType kvb_src = GGMLType::F32;  // the file's type of W_kb/W_vb
        if (!hp.split_kv_b) {
            // attn_kv_b {L, H·(N+V)}: per head N rows of W_kb_h then V rows of W_vb_h.
            const Matrix kvb = ld.matrix(b + "attn_kv_b.weight", {L, H * (N + V)});
            kvb_src = kvb.type;
            l.wkv_b = kvb;
            for (int64_t h = 0; h < H; ++h) {
                for (int64_t i = 0; i < N; ++i)
                    dequantize_row(kvb.type, kvb.row(h * (N + V) + i), &l.wkb[static_cast<size_t>((h * N + i) * L)], L);
                for (int64_t i = 0; i < V; ++i)
                    dequantize_row(kvb.type, kvb.row(h * (N + V) + N + i), &l.wvb[static_cast<size_t>((h * V + i) * L)], L);
            }
        } else {
            // attn_k_b {N, L, H}: slice h holds W_kb_hᵀ (L rows of N); attn_v_b {L, V, H}: W_vb_h.
            const Matrix kb = ld.matrix(b + "attn_k_b.weight", {N, L, H});
            const Matrix vb = ld.matrix(b + "attn_v_b.weight", {L, V, H});
            kvb_src = kb.type == GGMLType::F32 && vb.type == GGMLType::F32 ? GGMLType::F32 : vb.type;
            std::vector<float> row(static_cast<size_t>(N));
            for (int64_t h = 0; h < H; ++h) {
                for (int64_t j = 0; j < L; ++j) {
                    dequantize_row(kb.type, kb.row(h * L + j), row.data(), N);
                    for (int64_t i = 0; i < N; ++i) l.wkb[static_cast<size_t>((h * N + i) * L + j)] = row[static_cast<size_t>(i)];
                }
                for (int64_t i = 0; i < V; ++i)
                    dequantize_row(vb.type, vb.row(h * V + i), &l.wvb[static_cast<size_t>((h * V + i) * L)], L);
            }
        }
        l.wkbT.resize(l.wkb.size());
        for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < N; ++i)
                for (int64_t j = 0; j < L; ++j)
                    l.wkbT[static_cast<size_t>((h * L + j) * N + i)] = l.wkb[static_cast<size_t>((h * N + i) * L + j)];
        {
            // -mla 1's per-token products (query absorption, W_vb) read these every generated
            // token: from a quantised or 16-bit file they are kept as f16 (half the bytes; the
            // rounding, 2^-11 relative, is below the q8 activation quantisation of every other
            // matmul), from an f32 file as f32.
            if (kvb_src != GGMLType::F32) {
                l.wkbT16.resize(l.wkbT.size());
                l.wvb16.resize(l.wvb.size());
                for (size_t i = 0; i < l.wkbT.size(); ++i) l.wkbT16[i] = fp32_to_fp16(l.wkbT[i]);
                for (size_t i = 0; i < l.wvb.size(); ++i) l.wvb16[i] = fp32_to_fp16(l.wvb[i]);
                std::vector<float>().swap(l.wkbT);
            }
        }
        l.wo = ld.matrix(b + "attn_output.weight", {H * V, E});
        l.ffn_norm = ld.vec(b + "ffn_norm.weight", E);
        l.moe = hp.layer_is_moe(il);
        if (!l.moe) {
            l.ffn_gate = ld.matrix(b + "ffn_gate.weight", {E, hp.n_ff});
            l.ffn_up = ld.matrix(b + "ffn_up.weight", {E, hp.n_ff});
            l.ffn_down = ld.matrix(b + "ffn_down.weight", {hp.n_ff, E});
        } else {
            const int64_t X = hp.n_expert, F = hp.n_ff_exp;
            l.gate_inp = ld.matrix(b + "ffn_gate_inp.weight", {E, X});
            if (ld.has(b + "exp_probs_b.bias")) l.exp_probs_b = ld.vec(b + "exp_probs_b.bias", X);
            l.gate_exps = ld.matrix(b + "ffn_gate_exps.weight", {E, F, X});
            l.up_exps = ld.matrix(b + "ffn_up_exps.weight", {E, F, X});
            l.down_exps = ld.matrix(b + "ffn_down_exps.weight", {F, E, X});
            if (hp.n_expert_shared > 0) {
                const int64_t S = F * hp.n_expert_shared;
                l.gate_shexp = ld.matrix(b + "ffn_gate_shexp.weight", {E, S});
                l.up_shexp = ld.matrix(b + "ffn_up_shexp.weight", {E, S});
                l.down_shexp = ld.matrix(b + "ffn_down_shexp.weight", {S, E});
            }
        }
    }
    if (m.tokenizer.n_vocab() != static_cast<int32_t>(hp.n_vocab))
        throw Error(f.path() + ": tokenizer has " + std::to_string(m.tokenizer.n_vocab()) + " tokens, model " +
                    std::to_string(hp.n_vocab));
    m.rope_inv_freq = rope_frequencies(hp);
    m.attn_scale = attention_scale(hp);
    m.n_params = ld.n_params();
    if (p.repack) repack_weights(m, p);
    m.load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (p.verbose) {
        std::fprintf(stderr, "latte: loaded %s in %.1f ms: %s\n", path.c_str(), m.load_ms, model->describe().c_str());
        std::fprintf(stderr, "%s\n", model->load_report().c_str());
    }
    return model;
}

std::string Model::load_report() const {
    const GGUFFile& f = *impl_->file;
    const GGUFLoadInfo& li = f.load_info();
    std::map<std::string, std::pair<int, uint64_t>> types;  // type -> tensors, bytes
    for (const GGUFTensorInfo& t : f.tensors()) {
        auto& x = types[type_name(t.type)];
        ++x.first;
        x.second += t.nbytes;
    }
    auto mib = [](uint64_t b) {
        std::ostringstream o;
        o.setf(std::ios::fixed);
        o.precision(1);
        o << static_cast<double>(b) / (1024.0 * 1024.0) << " MiB";
        return o.str();
    };
    std::ostringstream s;
    s << "load: " << f.path() << ": " << mib(f.file_size()) << ", " << f.tensors().size() << " tensors (";
    bool first = true;
    for (const auto& [name, x] : types) {
        s << (first ? "" : ", ") << x.first << " " << name << " " << mib(x.second);
        first = false;
    }
    s.setf(std::ios::fixed);
    s.precision(1);
    s << "), " << impl_->load_ms << " ms (" << li.mode << " " << li.ms << " ms)";
    s << "\nload: huge pages " << mib(li.huge_bytes) << ", locked " << mib(li.locked_bytes) << ", resident "
      << mib(li.resident_bytes);
    const int n_kr = impl_->n_repacked_kq;
    const uint64_t kr_bytes = impl_->repacked_kq_bytes;
    const char* where = impl_->repacked_in_place ? "in place" : "anonymous memory; the mapped file is not touched";
    if (impl_->n_repacked > n_kr)
        s << "\nload: repacked " << impl_->n_repacked - n_kr << " q8_0/q4_0 matrices ("
          << mib(impl_->repacked_bytes - kr_bytes) << ") to 16-row groups (q8_0_r16/q4_0_r16)";
    if (n_kr > 0)
        s << "\nload: repacked " << n_kr << " K-quant matrices (" << mib(kr_bytes)
          << ") to q4_K_r/q5_K_r/q6_K_r (scales decoded per block)";
    if (impl_->n_repacked > 0) s << " in " << impl_->repack_ms << " ms in all (" << where << ")";
    for (const std::string& n : li.notes) s << "\nload: " << n;
    return s.str();
}

Model::~Model() = default;
const HParams& Model::hparams() const { return impl_->hp; }
const Tokenizer& Model::tokenizer() const { return impl_->tokenizer; }
uint64_t Model::n_params() const { return impl_->n_params; }
uint64_t Model::file_size() const { return impl_->file->file_size(); }

std::string Model::describe() const {
    const HParams& hp = impl_->hp;
    std::ostringstream s;
    s << hp.arch << (hp.name.empty() ? "" : " '" + hp.name + "'") << ": " << hp.n_layer << " layers, n_embd "
      << hp.n_embd << ", " << hp.n_head << " heads, q_lora " << hp.q_lora_rank << ", kv_lora " << hp.kv_lora_rank
      << ", " << hp.n_expert << " experts (" << hp.n_expert_used << " used, " << hp.n_expert_shared << " shared), "
      << "vocab " << hp.n_vocab << ", " << impl_->n_params / 1e6 << " M params, weights "
      << type_name(impl_->tok_embd.type) << ", " << impl_->file->file_size() / (1024.0 * 1024.0) << " MiB";
    return s.str();
}

std::string kernel_level() { return kernels::isa_name(kernels::active().isa); }

MlaMode parse_mla_mode(const std::string& s) {
    if (s == "0") return MlaMode::Full;
    if (s == "1") return MlaMode::Absorbed;
    if (s == "2") return MlaMode::Decompressed;
    if (s == "3") return MlaMode::Hybrid;
    if (s == "auto" || s == "4") return MlaMode::Auto;
    throw Error("-mla '" + s + "': expected 0, 1, 2, 3 or auto");
}

}  // namespace latte

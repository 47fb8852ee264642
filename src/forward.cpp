// The reference forward of the deepseek2 architecture (scalar, plain, threaded over output rows),
// and the Context that owns the KV cache. DESIGN.md §1 is the math this follows.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <optional>

#include "grown.h"
#include "kv_cache.h"
#include "mla_attention.h"
#include "mla_cost.h"
#include "model_impl.h"
#include "threadpool.h"

namespace latte {
namespace {

// Y (n × W.n_out) = X (n × W.n_in) · Wᵀ through the kernel table's weight matmul (kernels/dispatch.h,
// GemmFn): the activation is prepared once (quantised to q8 for Q8_0/Q4_0 weights on SIMD levels),
// then threads take blocks of kRows output rows, each block reading its weight rows once for all
// n tokens. A result element is computed by the same operations whatever block or thread computes
// it, so logits do not depend on the thread count.
void matmul(const Matrix& W, const float* X, int64_t n, float* Y, ThreadPool& pool) {
    constexpr int64_t kRows = 16;
    const kernels::KernelTable& kt = kernels::active();
    const int64_t n_in = W.n_in, n_out = W.n_out;
    const size_t a_row = kt.gemm_act_size(W.type, n_in);
    static thread_local std::vector<uint8_t> act_buf;  // grow-only: no allocation once warm
    const void* act = nullptr;
    if (a_row > 0) {
        uint8_t* a = grown(act_buf, a_row * static_cast<size_t>(n));
        if (n >= 16)
            pool.parallel_for(n, [&](int64_t b, int64_t e, unsigned) {
                kt.gemm_act_prep(W.type, X + b * n_in, n_in, n_in, e - b, a + static_cast<size_t>(b) * a_row);
            });
        else
            kt.gemm_act_prep(W.type, X, n_in, n_in, n, a);
        act = a;
    }
    const int64_t n_blocks = (n_out + kRows - 1) / kRows;
    pool.parallel_for(n_blocks, [&](int64_t b, int64_t e, unsigned) {
        const int64_t j0 = b * kRows, j1 = std::min(n_out, e * kRows);
        kt.gemm(W.type, W.row(j0), W.row_stride, n_in, j1 - j0, X, n_in, act, n, Y + j0, n_out);
    });
}

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* y) {
    double ss = 0.0;
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * inv * w[i];
}

// ggml's "normal" rope: adjacent pairs (2i, 2i+1) rotated by pos·inv_freq[i].
void rope(float* x, int n_rot, const float* inv_freq, int pos) {
    for (int i = 0; i < n_rot / 2; ++i) {
        const float theta = static_cast<float>(pos) * inv_freq[i];
        const float c = std::cos(theta), s = std::sin(theta);
        const float x0 = x[2 * i], x1 = x[2 * i + 1];
        x[2 * i] = x0 * c - x1 * s;
        x[2 * i + 1] = x0 * s + x1 * c;
    }
}

// The same rotation with cos/sin of pos·inv_freq[i] computed once per token (cs: n_rot/2 pairs),
// shared by the token's key and every head's query: the values rope() would compute.
void rope_table(int n_rot, const float* inv_freq, int pos, float* cs) {
    for (int i = 0; i < n_rot / 2; ++i) {
        const float theta = static_cast<float>(pos) * inv_freq[i];
        cs[2 * i] = std::cos(theta);
        cs[2 * i + 1] = std::sin(theta);
    }
}
void rope_cs(float* x, int n_rot, const float* cs) {
    for (int i = 0; i < n_rot / 2; ++i) {
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float x0 = x[2 * i], x1 = x[2 * i + 1];
        x[2 * i] = x0 * c - x1 * s;
        x[2 * i + 1] = x0 * s + x1 * c;
    }
}

float silu(float v) { return v / (1.0f + std::exp(-v)); }

// attn_kv_b in a type the -mla 2 decompression reads directly (its rows sliced per head: the r16
// types' 16-row groups fit, a head's 128 + 128 rows being whole groups; K-quant rows, repacked or
// not, are independent). Other types keep the f32 W_kb/W_vb made at load.
bool kvb_direct(const Matrix& w) {
    switch (w.type) {
        case GGMLType::F32: case GGMLType::F16: case GGMLType::BF16: case GGMLType::Q8_0: case GGMLType::Q4_0:
        case GGMLType::Q8_0_R16: case GGMLType::Q4_0_R16: case GGMLType::Q4_K: case GGMLType::Q5_K:
        case GGMLType::Q6_K: case GGMLType::Q4_K_R: case GGMLType::Q5_K_R: case GGMLType::Q6_K_R: return !w.empty();
        default: return false;
    }
}

// Per-token work of a ubatch (norms, residual adds, rope) over the pool when there is enough of
// it; a token's result never depends on which thread computes it.
template <class F>
void per_token(ThreadPool& pool, int n, int64_t width, F&& fn) {
    if (n >= 2 && static_cast<int64_t>(n) * width >= 8192) pool.parallel_for(n, [&](int64_t b, int64_t e, unsigned) {
        for (int64_t t = b; t < e; ++t) fn(static_cast<int>(t));
    });
    else
        for (int t = 0; t < n; ++t) fn(t);
}

// Adds the wall time from construction to destruction to a DecodeStats ns counter.
class PhaseClock {
public:
    explicit PhaseClock(uint64_t& acc) : acc_(acc), t0_(std::chrono::steady_clock::now()) {}
    ~PhaseClock() {
        acc_ += static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_).count());
    }
    PhaseClock(const PhaseClock&) = delete;
    PhaseClock& operator=(const PhaseClock&) = delete;

private:
    uint64_t& acc_;
    std::chrono::steady_clock::time_point t0_;
};

}  // namespace

class ContextImpl {
public:
    ContextImpl(std::shared_ptr<Model> model, const ContextParams& p);

    void decode(const std::vector<int32_t>& tokens, bool all_logits);
    void run_ubatch(const int32_t* tok, int n, bool all_logits, float* logits_out);
    void attention(int il, int n, const float* cur, float* out);
    void ffn_dense(const Layer& l, int n, const float* cur, float* out);
    void ffn_moe(const Layer& l, int n, const float* cur, float* out);
    struct FfnUnit {
        const Matrix* gate;
        const Matrix* up;
        const Matrix* down;
        int64_t row0, c;  // rows [row0, row0 + c) of the gathered input/output
    };
    void ffn_units(const std::vector<FfnUnit>& units, int64_t n_rows, const float* X, float* Y);

    std::shared_ptr<Model> model;
    const ModelImpl& m;
    ContextParams params;
    MlaDims dims;
    KVCache cache;  // before the pool: a cache that cannot be had is refused before threads start
    std::unique_ptr<ThreadPool> own_pool;  // null with ContextParams::shared_pool
    ThreadPool& pool;
    int n_past = 0;
    std::vector<float> logits;  // n_logits × n_vocab
    int n_logits = 0;
    MlaPath ub_path = MlaPath::Absorbed;  // the current ubatch's attention path
    std::vector<int> paths;               // per ubatch of the last decode
    Context::DecodeStats stats;           // of the last decode
    void mm(const Matrix& W, const float* X, int64_t n, float* Y) {
        count_matmul(W, n);
        matmul(W, X, n, Y, pool);
    }
    void count_matmul(const Matrix& W, int64_t n) {
        stats.weight_bytes += static_cast<uint64_t>(W.n_out) * W.row_stride;
        stats.matmul_flops += 2.0 * static_cast<double>(n) * static_cast<double>(W.n_in) * static_cast<double>(W.n_out);
    }
    // FFN scratch (grow-only: no allocation once warm)
    std::vector<uint8_t> ffn_act[2], ffn_dact;
    std::vector<float> ffn_h, moe_x, moe_y;
    // ubatch and attention buffers (grow-only: src/grown.h)
    std::vector<float> ub_x, ub_cur, ub_tmp, at_q, at_qa, at_kva, at_c, at_kpe, at_o;
};

namespace {

ContextParams checked(ContextParams p, const HParams& hp) {
    if (p.n_ctx == 0) throw Error("context size (-c) must be positive");
    if (p.n_ubatch == 0) throw Error("ubatch size (-ub) must be positive");
    // n_threads 0: the pool picks one thread per physical core of the CPUs it may use.
    if (p.n_threads > 1024) throw Error("thread count " + std::to_string(p.n_threads) + " is too large");
    if (p.n_threads_batch > 1024)
        throw Error("batch thread count " + std::to_string(p.n_threads_batch) + " is too large");
    // Positions are ints throughout (cache rows, masks, RoPE): refuse what they cannot address.
    constexpr uint32_t kMaxCtx = 0x7fffffffu;  // INT32_MAX
    if (p.n_ctx > kMaxCtx)
        throw Error("context size (-c) " + std::to_string(p.n_ctx) + " is beyond what the KV cache can address (" +
                    std::to_string(kMaxCtx) + " tokens)");
    if (hp.n_ctx_train > 0 && p.n_ctx > hp.n_ctx_train)
        std::fprintf(stderr, "latte: warning: context size %u exceeds the model's trained context %u: quality past it "
                     "is not what the model was trained for\n", p.n_ctx, hp.n_ctx_train);
    return p;
}

PoolParams pool_params(const ContextParams& p) {
    PoolParams pp;
    pp.n_threads = p.n_threads == 0 ? 0 : std::max(p.n_threads, p.n_threads_batch);  // -t / -tb: the larger
    pp.cpu_mask = p.cpu_mask;
    pp.cpu_range = p.cpu_range;
    pp.numa = parse_numa(p.numa);
    pp.smt = p.smt;
    return pp;
}

MlaDims dims_of(const HParams& hp) {
    MlaDims d;
    d.n_head = static_cast<int>(hp.n_head);
    d.kv_lora = static_cast<int>(hp.kv_lora_rank);
    d.n_rot = static_cast<int>(hp.n_rot);
    d.d_nope = static_cast<int>(hp.d_nope);
    d.d_v = static_cast<int>(hp.d_v);
    return d;
}

}  // namespace

ContextImpl::ContextImpl(std::shared_ptr<Model> mdl, const ContextParams& p)
    : model(std::move(mdl)),
      m(model->impl()),
      params(checked(p, m.hp)),
      dims(dims_of(m.hp)),
      cache(dims, static_cast<int>(m.hp.n_layer), static_cast<int>(params.n_ctx), params.mla == MlaMode::Full,
            params.cache_type, params.cache_type_v),
      own_pool(params.shared_pool ? nullptr : std::make_unique<ThreadPool>(pool_params(params))),
      pool(own_pool ? *own_pool : ThreadPool::process_pool(pool_params(params))) {
    // -t / -tb as llama.cpp: one-token ubatches run on n_threads, longer ones on n_threads_batch
    // (0: n_threads), each on the first threads of the pool (ThreadPool::set_active). With -t 0 the
    // pool has its default size and -tb is clamped to it.
    const uint32_t size = pool.size();
    params.n_threads = params.n_threads ? std::min(params.n_threads, size) : size;
    params.n_threads_batch = params.n_threads_batch ? std::min(params.n_threads_batch, size) : params.n_threads;
    params.cache_type_v = cache.v_type();  // -ctv: the V type in use (cache_type in the latent modes)
}

// SwiGLU feed-forward units (an expert, the shared experts, a dense FFN) run together in three pool
// jobs whatever their number: (1) every unit's gate and up rows, blocks of 16 rows, with
// h = silu(g)·u written straight away; (2) h quantised for the down matmuls; (3) every unit's
// down rows. Unit u reads rows [row0, row0 + c) of the gathered input X (n_rows × n_in) and writes
// the same rows of Y (n_rows × down.n_out). TG of a MoE layer was 3·(experts used + 1) jobs plus
// serial copies; now it is 3 (and 2 activation preparations), so synchronisation stops dominating
// at high thread counts. Each output element is still computed by one gemm call over its unit's
// rows and tokens, whatever the split: results do not depend on the thread count.
void ContextImpl::ffn_units(const std::vector<FfnUnit>& units, int64_t n_rows, const float* X, float* Y) {
    constexpr int64_t kRows = 16;
    const kernels::KernelTable& kt = kernels::active();
    if (units.empty()) return;
    const int64_t n_in = units[0].gate->n_in, n_out = units[0].down->n_out;
    // Activations of X for each weight type the gate/up matrices use (usually one).
    struct Act { GGMLType t; size_t row; std::vector<uint8_t>* buf; };
    std::vector<Act> acts;
    auto act_for = [&](GGMLType t) -> const uint8_t* {
        for (const Act& a : acts)
            if (a.t == t) return a.row ? a.buf->data() : nullptr;
        return nullptr;
    };
    for (const FfnUnit& u : units)
        for (const Matrix* w : {u.gate, u.up}) {
            bool have = false;
            for (const Act& a : acts) have |= a.t == w->type;
            if (have) continue;
            const size_t row = kt.gemm_act_size(w->type, n_in);
            std::vector<uint8_t>& buf = ffn_act[acts.size() % 2];
            if (acts.size() >= 2) throw Error("internal: more than two weight types in one FFN");
            acts.push_back({w->type, row, &buf});
            if (row == 0) continue;
            uint8_t* a = grown(buf, row * static_cast<size_t>(n_rows));
            if (n_rows >= 16)
                pool.parallel_for(n_rows, [&](int64_t b, int64_t e, unsigned) {
                    kt.gemm_act_prep(w->type, X + b * n_in, n_in, n_in, e - b, a + static_cast<size_t>(b) * row);
                });
            else
                kt.gemm_act_prep(w->type, X, n_in, n_in, n_rows, a);
        }
    for (const FfnUnit& u : units) {
        count_matmul(*u.gate, u.c);
        count_matmul(*u.up, u.c);
        count_matmul(*u.down, u.c);
    }
    // Per unit: first block index, where its h rows and down activations live.
    const size_t nu = units.size();
    std::vector<int64_t> blk0(nu + 1, 0), dblk0(nu + 1, 0);
    std::vector<size_t> h_off(nu + 1, 0), da_off(nu + 1, 0);
    for (size_t i = 0; i < nu; ++i) {
        const FfnUnit& u = units[i];
        const int64_t F = u.gate->n_out;
        blk0[i + 1] = blk0[i] + (F + kRows - 1) / kRows;
        dblk0[i + 1] = dblk0[i] + (n_out + kRows - 1) / kRows;
        h_off[i + 1] = h_off[i] + static_cast<size_t>(u.c * F);
        da_off[i + 1] = da_off[i] + kt.gemm_act_size(u.down->type, F) * static_cast<size_t>(u.c);
    }
    float* H = grown(ffn_h, h_off[nu]);
    uint8_t* DA = grown(ffn_dact, da_off[nu]);
    // Runs fn(unit, first block, end block) for the blocks [b, e) of a flattened block range.
    auto by_unit = [&](const std::vector<int64_t>& first, int64_t b, int64_t e, auto&& fn) {
        size_t i = static_cast<size_t>(std::upper_bound(first.begin(), first.end(), b) - first.begin()) - 1;
        while (b < e) {
            const int64_t ue = std::min(e, first[i + 1]);
            fn(i, b - first[i], ue - first[i]);
            b = ue;
            ++i;
        }
    };
    // (1) gate and up, h = silu(g)·u
    pool.parallel_for(blk0[nu], [&](int64_t b, int64_t e, unsigned) {
        static thread_local std::vector<float> g, up;
        by_unit(blk0, b, e, [&](size_t i, int64_t kb, int64_t ke) {
            const FfnUnit& u = units[i];
            const int64_t F = u.gate->n_out, j0 = kb * kRows, j1 = std::min(F, ke * kRows), w = j1 - j0;
            const size_t need = static_cast<size_t>(u.c * w);
            grown(g, need);
            grown(up, need);
            const float* x = X + u.row0 * n_in;
            const uint8_t* ag = act_for(u.gate->type);
            const uint8_t* au = act_for(u.up->type);
            const size_t rg = kt.gemm_act_size(u.gate->type, n_in), ru = kt.gemm_act_size(u.up->type, n_in);
            kt.gemm(u.gate->type, u.gate->row(j0), u.gate->row_stride, n_in, w, x, n_in,
                    ag ? ag + static_cast<size_t>(u.row0) * rg : nullptr, u.c, g.data(), w);
            kt.gemm(u.up->type, u.up->row(j0), u.up->row_stride, n_in, w, x, n_in,
                    au ? au + static_cast<size_t>(u.row0) * ru : nullptr, u.c, up.data(), w);
            float* h = H + h_off[i];
            for (int64_t t = 0; t < u.c; ++t)
                for (int64_t j = 0; j < w; ++j) h[t * F + j0 + j] = silu(g[t * w + j]) * up[t * w + j];
        });
    });
    // (2) the down matmuls' activations, one unit-row at a time
    std::vector<int64_t> rfirst(nu + 1, 0);
    for (size_t i = 0; i < nu; ++i) rfirst[i + 1] = rfirst[i] + units[i].c;
    auto prep_down = [&](int64_t b, int64_t e, unsigned) {
        by_unit(rfirst, b, e, [&](size_t i, int64_t r0, int64_t r1) {
            const FfnUnit& u = units[i];
            const int64_t F = u.gate->n_out;
            const size_t row = kt.gemm_act_size(u.down->type, F);
            if (row == 0) return;
            kt.gemm_act_prep(u.down->type, H + h_off[i] + r0 * F, F, F, r1 - r0, DA + da_off[i] + row * r0);
        });
    };
    if (da_off[nu] > 0) {
        if (rfirst[nu] >= 16) pool.parallel_for(rfirst[nu], prep_down);
        else prep_down(0, rfirst[nu], 0);
    }
    // (3) down
    pool.parallel_for(dblk0[nu], [&](int64_t b, int64_t e, unsigned) {
        by_unit(dblk0, b, e, [&](size_t i, int64_t kb, int64_t ke) {
            const FfnUnit& u = units[i];
            const int64_t F = u.gate->n_out, j0 = kb * kRows, j1 = std::min(n_out, ke * kRows);
            const bool q = kt.gemm_act_size(u.down->type, F) > 0;
            kt.gemm(u.down->type, u.down->row(j0), u.down->row_stride, F, j1 - j0, H + h_off[i], F,
                    q ? DA + da_off[i] : nullptr, u.c, Y + u.row0 * n_out + j0, n_out);
        });
    });
}

void ContextImpl::ffn_dense(const Layer& l, int n, const float* cur, float* out) {
    PhaseClock clk(stats.ns_ffn);
    ffn_units({FfnUnit{&l.ffn_gate, &l.ffn_up, &l.ffn_down, 0, n}}, n, cur, out);
}

void ContextImpl::ffn_moe(const Layer& l, int n, const float* cur, float* out) {
    const HParams& hp = m.hp;
    const int64_t E = hp.n_embd, X = hp.n_expert, F = hp.n_ff_exp, K = hp.n_expert_used;
    auto route_clk = std::make_optional<PhaseClock>(stats.ns_moe_route);
    // Router in f32.
    std::vector<float> logits(static_cast<size_t>(n * X));
    mm(l.gate_inp, cur, n, logits.data());
    // Routing, token by token (in parallel for a long ubatch): the K chosen experts and weights.
    std::vector<int> chosen(static_cast<size_t>(n * K));
    std::vector<float> chosen_w(static_cast<size_t>(n * K));
    const int64_t G = hp.n_expert_groups, per_group = X / G;
    per_token(pool, n, X * 64, [&](int t) {
        static thread_local std::vector<float> probs, sel;
        static thread_local std::vector<int> idx;
        probs.resize(static_cast<size_t>(X));
        sel.resize(static_cast<size_t>(X));
        idx.resize(static_cast<size_t>(X));
        const float* lg = &logits[static_cast<size_t>(t * X)];
        if (hp.gating_func == 2) {
            for (int64_t e = 0; e < X; ++e) probs[e] = 1.0f / (1.0f + std::exp(-lg[e]));
        } else {
            const float mx = *std::max_element(lg, lg + X);
            double sum = 0.0;
            for (int64_t e = 0; e < X; ++e) sum += (probs[e] = std::exp(lg[e] - mx));
            for (int64_t e = 0; e < X; ++e) probs[e] = static_cast<float>(probs[e] / sum);
        }
        // Selection scores: the bias counts for choosing only.
        for (int64_t e = 0; e < X; ++e) sel[e] = probs[e] + (l.exp_probs_b.empty() ? 0.0f : l.exp_probs_b[e]);
        if (G > 1 && static_cast<int64_t>(hp.n_group_used) < G) {
            // Keep the best groups. A group's score: V3 (sigmoid, "noaux_tc") sums its best two
            // selection scores; V2 (softmax, "group_limited_greedy") takes its best one. GGUF has
            // no key for the routing method, so the gating function tells them apart, as the
            // model authors' code pairs them (tests/data/oracle/v2_group_limited checks V2's).
            std::vector<std::pair<float, int>> gs(static_cast<size_t>(G));
            for (int64_t g = 0; g < G; ++g) {
                std::vector<float> v(sel.begin() + g * per_group, sel.begin() + (g + 1) * per_group);
                std::sort(v.begin(), v.end(), std::greater<float>());
                const bool top2 = hp.gating_func == 2 && v.size() > 1;
                gs[g] = {top2 ? v[0] + v[1] : v[0], static_cast<int>(g)};
            }
            std::stable_sort(gs.begin(), gs.end(), [](auto& a, auto& b) { return a.first > b.first; });
            for (int64_t k = hp.n_group_used; k < G; ++k)
                for (int64_t e = gs[k].second * per_group; e < (gs[k].second + 1) * per_group; ++e)
                    sel[e] = -INFINITY;
        }
        std::iota(idx.begin(), idx.end(), 0);
        std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return sel[a] > sel[b]; });
        float wsum = 0.0f;
        for (int64_t k = 0; k < K; ++k) wsum += probs[idx[k]];
        for (int64_t k = 0; k < K; ++k) {
            float w = probs[idx[k]];
            if (hp.expert_weights_norm) w /= wsum;
            w *= hp.expert_weights_scale;
            chosen[t * K + k] = idx[k];
            chosen_w[t * K + k] = w;
        }
    });
    std::vector<std::vector<std::pair<int, float>>> by_expert(static_cast<size_t>(X));  // (token, weight)
    for (int t = 0; t < n; ++t)
        for (int64_t k = 0; k < K; ++k) by_expert[chosen[t * K + k]].push_back({t, chosen_w[t * K + k]});
    // Gather the tokens of every used expert (then all tokens for the shared experts) into one
    // buffer, run all of them through ffn_units, and add each token's rows back with its weights
    // in a fixed order (expert id order, shared last): the same sums whatever the thread count.
    std::vector<Matrix> slices;  // gate, up, down of each used expert (views, no copy)
    slices.reserve(static_cast<size_t>(3 * X));
    std::vector<FfnUnit> units;
    std::vector<int64_t> row_of(static_cast<size_t>(n * K), -1);  // (token, k-th expert) -> gathered row
    std::vector<float> w_of(static_cast<size_t>(n * K), 0.0f);
    std::vector<int> k_fill(static_cast<size_t>(n), 0);
    int64_t rows = 0;
    for (int64_t e = 0; e < X; ++e) {
        const auto& toks = by_expert[e];
        if (toks.empty()) continue;
        slices.push_back(l.gate_exps.rows(e * F, F));
        slices.push_back(l.up_exps.rows(e * F, F));
        slices.push_back(l.down_exps.rows(e * E, E));
        units.push_back(FfnUnit{nullptr, nullptr, nullptr, rows, static_cast<int64_t>(toks.size())});
        for (const auto& [t, w] : toks) {
            const int k = k_fill[t]++;
            row_of[t * K + k] = rows;
            w_of[t * K + k] = w;
            ++rows;
        }
    }
    for (size_t i = 0; i < units.size(); ++i) {
        units[i].gate = &slices[3 * i];
        units[i].up = &slices[3 * i + 1];
        units[i].down = &slices[3 * i + 2];
    }
    const int64_t shared_row = rows;
    if (hp.n_expert_shared > 0) {
        units.push_back(FfnUnit{&l.gate_shexp, &l.up_shexp, &l.down_shexp, rows, n});
        rows += n;
    }
    float* xg = grown(moe_x, static_cast<size_t>(rows * E));
    float* yb = grown(moe_y, static_cast<size_t>(rows * E));
    per_token(pool, n, E * (K + 1), [&](int t) {
        for (int k = 0; k < k_fill[t]; ++k) std::copy(cur + t * E, cur + (t + 1) * E, xg + row_of[t * K + k] * E);
        if (hp.n_expert_shared > 0) std::copy(cur + t * E, cur + (t + 1) * E, xg + (shared_row + t) * E);
    });
    route_clk.reset();
    {
        PhaseClock clk(stats.ns_ffn);
        ffn_units(units, rows, xg, yb);
    }
    PhaseClock combine_clk(stats.ns_moe_route);
    const float* yg = yb;
    auto combine = [&](int64_t b, int64_t e, unsigned) {
        for (int64_t t = b; t < e; ++t) {
            float* o = out + t * E;
            std::fill(o, o + E, 0.0f);
            // k runs in expert id order: rows were handed out expert by expert
            for (int k = 0; k < k_fill[t]; ++k) {
                const float w = w_of[t * K + k];
                const float* y = yg + row_of[t * K + k] * E;
                for (int64_t j = 0; j < E; ++j) o[j] += w * y[j];
            }
            if (hp.n_expert_shared > 0) {
                const float* y = yg + (shared_row + t) * E;
                for (int64_t j = 0; j < E; ++j) o[j] += y[j];
            }
        }
    };
    if (n >= 8) pool.parallel_for(n, combine);
    else combine(0, n, 0);
}

void ContextImpl::attention(int il, int n, const float* cur, float* out) {
    const HParams& hp = m.hp;
    const Layer& l = m.layers[il];
    const int64_t H = hp.n_head, L = hp.kv_lora_rank, R = hp.n_rot, N = hp.d_nope, DK = N + R, V = hp.d_v;
    auto proj_clk = std::make_optional<PhaseClock>(stats.ns_attn_proj);
    float* q = grown(at_q, static_cast<size_t>(n * H * DK));
    if (hp.q_lora_rank > 0) {
        const int64_t Q = hp.q_lora_rank;
        float* qa = grown(at_qa, static_cast<size_t>(n * Q));
        mm(l.wq_a, cur, n, qa);
        per_token(pool, n, Q, [&](int t) { rms_norm(&qa[t * Q], l.q_a_norm.data(), Q, hp.rms_eps, &qa[t * Q]); });
        mm(l.wq_b, qa, n, q);
    } else {
        mm(l.wq, cur, n, q);
    }
    float* kva = grown(at_kva, static_cast<size_t>(n * (L + R)));
    float* c = grown(at_c, static_cast<size_t>(n * L));
    float* kpe = grown(at_kpe, static_cast<size_t>(n * R));
    mm(l.wkv_a_mqa, cur, n, kva);
    per_token(pool, n, H * R * 8, [&](int t) {
        const int pos = n_past + t;
        float cs[2 * 256];
        rms_norm(&kva[t * (L + R)], l.kv_a_norm.data(), L, hp.rms_eps, &c[t * L]);
        std::copy(&kva[t * (L + R) + L], &kva[t * (L + R) + L + R], &kpe[t * R]);
        if (R > 256) {  // (no DeepSeek model: rope 64)
            rope(&kpe[t * R], static_cast<int>(R), m.rope_inv_freq.data(), pos);
            for (int64_t h = 0; h < H; ++h) rope(&q[(t * H + h) * DK + N], static_cast<int>(R), m.rope_inv_freq.data(), pos);
            return;
        }
        rope_table(static_cast<int>(R), m.rope_inv_freq.data(), pos, cs);
        rope_cs(&kpe[t * R], static_cast<int>(R), cs);
        for (int64_t h = 0; h < H; ++h) rope_cs(&q[(t * H + h) * DK + N], static_cast<int>(R), cs);
    });
    const MlaWeights w{l.wkb.data(), l.wvb.data(), l.wkbT.empty() ? nullptr : l.wkbT.data(),
                       l.wkbT16.empty() ? nullptr : l.wkbT16.data(), l.wvb16.empty() ? nullptr : l.wvb16.data(),
                       kvb_direct(l.wkv_b) ? l.wkv_b.data : nullptr, l.wkv_b.row_stride, l.wkv_b.type};
    proj_clk.reset();
    const MlaPath path = ub_path;
    float* o = grown(at_o, static_cast<size_t>(n * H * V));
    {
        PhaseClock clk(stats.ns_attn);
        mla_store(cache, il, n_past, n, c, kpe, w, pool);
        mla_attend(path, params.flash_attn, cache, il, n_past, n, q, w, m.attn_scale, o, pool);
    }
    {
        const double n_kv = n_past + n, vis = static_cast<double>(n) * (n_past + (n + 1) / 2.0);  // visible rows
        if (path == MlaPath::Full) {
            stats.kv_bytes += static_cast<uint64_t>(n_kv) * (cache.k_row_bytes() + cache.v_row_bytes());
            stats.attn_flops += 2.0 * H * vis * (DK + V);
        } else {
            stats.kv_bytes += static_cast<uint64_t>(n_kv) * cache.k_row_bytes();
            // W_kbᵀ and W_vb (f16 or f32) in -mla 1; attn_kv_b (or f32 W_kb, W_vb) for -mla 2
            if (path == MlaPath::Decompressed && kvb_direct(l.wkv_b))
                stats.weight_bytes += static_cast<uint64_t>(l.wkv_b.n_out) * l.wkv_b.row_stride;
            else
                stats.weight_bytes += static_cast<uint64_t>((path == MlaPath::Absorbed && !l.wkbT16.empty() ? 2 : 4) *
                                                            H * (N + V) * L);
            if (path == MlaPath::Absorbed)
                stats.attn_flops += 2.0 * H * vis * ((L + R) + L) + 2.0 * n * H * (N + V) * L;
            else
                stats.attn_flops += 2.0 * L * (N + V) * H * n_kv + 2.0 * H * vis * (DK + V);
        }
    }
    PhaseClock clk(stats.ns_attn_proj);
    mm(l.wo, o, n, out);
}

void ContextImpl::run_ubatch(const int32_t* tok, int n, bool all_logits, float* logits_out) {
    const HParams& hp = m.hp;
    const int64_t E = hp.n_embd;
    switch (params.mla) {
        case MlaMode::Full: ub_path = MlaPath::Full; break;
        case MlaMode::Absorbed: ub_path = MlaPath::Absorbed; break;
        case MlaMode::Decompressed: ub_path = MlaPath::Decompressed; break;
        case MlaMode::Hybrid: ub_path = n >= kHybridSwitchTokens ? MlaPath::Decompressed : MlaPath::Absorbed; break;
        case MlaMode::Auto: {
            const Matrix& kvb = m.layers.front().wkv_b;  // mode 2 decompresses with it when it can
            ub_path = mla_auto_path(kernels::active(), params.cache_type, dims, n, n_past,
                                    kvb_direct(kvb) ? kvb.type : GGMLType::F32);
            break;
        }
    }
    paths.push_back(static_cast<int>(ub_path));
    pool.set_active(n > 1 ? params.n_threads_batch : params.n_threads);
    ++stats.ubatches;
    float* x = grown(ub_x, static_cast<size_t>(n * E));
    float* cur = grown(ub_cur, static_cast<size_t>(n * E));
    float* tmp = grown(ub_tmp, static_cast<size_t>(n * E));
    per_token(pool, n, E, [&](int t) { dequantize_row(m.tok_embd.type, m.tok_embd.row(tok[t]), &x[t * E], E); });
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const Layer& l = m.layers[il];
        // the residual add of the previous block is fused into the norm that reads x
        per_token(pool, n, E, [&](int t) {
            float* xt = &x[t * E];
            if (il > 0)
                for (int64_t i = 0; i < E; ++i) xt[i] += tmp[t * E + i];
            rms_norm(xt, l.attn_norm.data(), E, hp.rms_eps, &cur[t * E]);
        });
        attention(static_cast<int>(il), n, cur, tmp);
        per_token(pool, n, E, [&](int t) {
            float* xt = &x[t * E];
            for (int64_t i = 0; i < E; ++i) xt[i] += tmp[t * E + i];
            rms_norm(xt, l.ffn_norm.data(), E, hp.rms_eps, &cur[t * E]);
        });
        if (l.moe) ffn_moe(l, n, cur, tmp);
        else ffn_dense(l, n, cur, tmp);
    }
    if (hp.n_layer > 0)
        per_token(pool, n, E, [&](int t) {
            for (int64_t i = 0; i < E; ++i) x[t * E + i] += tmp[t * E + i];
        });
    const int first = all_logits ? 0 : n - 1, n_out = n - first;
    PhaseClock clk(stats.ns_head);
    for (int t = first; t < n; ++t) rms_norm(&x[t * E], m.output_norm.data(), E, hp.rms_eps, &cur[(t - first) * E]);
    mm(m.output, cur, n_out, logits_out);
    n_past += n;
}

void ContextImpl::decode(const std::vector<int32_t>& tokens, bool all_logits) {
    const int n = static_cast<int>(tokens.size());
    if (n == 0) throw Error("decode: no tokens");
    const int32_t n_vocab = static_cast<int32_t>(m.hp.n_vocab);
    for (int32_t t : tokens)
        if (t < 0 || t >= n_vocab)
            throw Error("decode: token id " + std::to_string(t) + " is outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
    if (static_cast<int64_t>(n_past) + n > static_cast<int64_t>(params.n_ctx))
        throw Error("context full: " + std::to_string(n_past) + " tokens cached + " + std::to_string(n) + " new > n_ctx " +
                    std::to_string(params.n_ctx));
    n_logits = all_logits ? n : 1;
    paths.clear();
    stats = Context::DecodeStats{};
    stats.tokens = static_cast<uint32_t>(n);
    logits.assign(static_cast<size_t>(n_logits) * n_vocab, 0.0f);
    PhaseClock clk(stats.ns_total);
    const int ub = static_cast<int>(params.n_ubatch);
    for (int i0 = 0; i0 < n; i0 += ub) {
        const int nb = std::min(ub, n - i0);
        const bool last = i0 + nb == n;
        if (all_logits) {
            run_ubatch(&tokens[i0], nb, true, &logits[static_cast<size_t>(i0) * n_vocab]);
        } else if (last) {
            run_ubatch(&tokens[i0], nb, false, logits.data());
        } else {
            std::vector<float> scratch(static_cast<size_t>(n_vocab));
            run_ubatch(&tokens[i0], nb, false, scratch.data());
        }
    }
}

Context::Context(std::shared_ptr<Model> model, const ContextParams& p)
    : impl_(std::make_unique<ContextImpl>(std::move(model), p)) {}
Context::~Context() = default;
void Context::decode(const std::vector<int32_t>& tokens, bool all_logits) { impl_->decode(tokens, all_logits); }
const float* Context::logits(int32_t i) const {
    const int32_t n = impl_->n_logits;
    const int32_t k = i < 0 ? n + i : i;
    if (k < 0 || k >= n) throw Error("logits: index " + std::to_string(i) + " out of range (" + std::to_string(n) + " rows kept)");
    return impl_->logits.data() + static_cast<size_t>(k) * impl_->m.hp.n_vocab;
}
uint32_t Context::n_past() const { return static_cast<uint32_t>(impl_->n_past); }
void Context::clear() { impl_->n_past = 0; }
void Context::truncate(uint32_t n) {
    if (n > static_cast<uint32_t>(impl_->n_past))
        throw Error("truncate: " + std::to_string(n) + " is more than the " + std::to_string(impl_->n_past) +
                    " cached tokens");
    impl_->n_past = static_cast<int>(n);
}
uint64_t Context::kv_cache_bytes() const { return impl_->cache.bytes(); }
const ContextParams& Context::params() const { return impl_->params; }
const Model& Context::model() const { return *impl_->model; }
std::string Context::threads_report() const { return impl_->pool.describe(); }
std::vector<int> Context::last_paths() const { return impl_->paths; }
Context::DecodeStats Context::last_decode_stats() const { return impl_->stats; }

}  // namespace latte

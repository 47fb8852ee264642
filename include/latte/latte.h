// latte — public C++ API: load a deepseek2 GGUF, make a context, decode, read logits.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "latte/error.h"
#include "latte/tokenizer.h"
#include "latte/types.h"

namespace latte {

// Hyperparameters read from the GGUF metadata (deepseek2.* keys), validated at load.
struct HParams {
    std::string arch, name;
    uint32_t n_vocab = 0, n_ctx_train = 0, n_embd = 0, n_layer = 0;
    uint32_t n_head = 0, n_head_kv = 0;
    uint32_t n_ff = 0;              // dense FFN width (feed_forward_length)
    uint32_t n_ff_exp = 0;          // routed/shared expert width (expert_feed_forward_length)
    uint32_t n_expert = 0, n_expert_used = 0, n_expert_shared = 0;
    uint32_t n_layer_dense_lead = 0;
    uint32_t n_expert_groups = 1, n_group_used = 1;
    uint32_t q_lora_rank = 0, kv_lora_rank = 0;
    uint32_t n_rot = 0;             // rope dims (64)
    uint32_t d_nope = 0, d_v = 0;   // 128, 128 (per head)
    float rms_eps = 1e-6f;
    float rope_freq_base = 10000.0f;
    float expert_weights_scale = 1.0f;
    bool expert_weights_norm = false;
    uint32_t gating_func = 1;       // 1 softmax, 2 sigmoid
    bool rope_yarn = false;
    float rope_factor = 1.0f;
    uint32_t n_ctx_orig = 0;
    float yarn_log_mul = 0.0f;
    float yarn_beta_fast = 32.0f, yarn_beta_slow = 1.0f;
    bool split_kv_b = false;        // file carries attn_k_b/attn_v_b instead of attn_kv_b

    uint32_t d_qk() const { return d_nope + n_rot; }  // 192
    bool layer_is_moe(uint32_t il) const { return n_expert > 0 && il >= n_layer_dense_lead; }
};

struct ModelParams {
    bool use_mmap = true;   // false: read the file into memory (--no-mmap)
    bool verbose = false;   // print the load report on stderr
    std::string hugepages = "off";  // off | thp (--hugepages) | hugetlb (--hugetlb)
    bool mlock = false;     // lock the weights in memory (--mlock)
    bool populate = false;  // fault every page in at load (--populate; implied by --mlock)
    bool progress = true;   // progress bar while reading/populating, only when stderr is a TTY
    bool numa_interleave = false;  // interleave the weights' pages over NUMA nodes (--numa interleave)
    // Repack Q8_0/Q4_0 weight matrices (rows % 16 == 0) at load into 16-row interleaved groups
    // (q8_0_r16/q4_0_r16, issue 7) for the matmul kernels; false keeps the file's layout (--no-repack).
    bool repack = true;
};

class ModelImpl;
class Model {
public:
    // Throws latte::Error naming the file, key or tensor on any problem, and, before reading the
    // file, naming the kernel level when LATTE_ISA asks for one this CPU or build lacks.
    static std::shared_ptr<Model> load(const std::string& path, const ModelParams& p = {});
    ~Model();
    const HParams& hparams() const;
    const Tokenizer& tokenizer() const;
    uint64_t n_params() const;
    uint64_t file_size() const;
    std::string describe() const;  // one line: arch, layers, heads, types, size
    // What loading did: file size, tensors and their types, time, huge pages obtained, memory
    // locked, NUMA (a few lines, no trailing newline).
    std::string load_report() const;
    ModelImpl& impl() { return *impl_; }
    const ModelImpl& impl() const { return *impl_; }

private:
    Model() = default;
    std::unique_ptr<ModelImpl> impl_;
};

// The MLA modes (ik_llama.cpp's -mla numbering).
enum class MlaMode : int {
    Full = 0,          // full K (n_head*192) and V (n_head*128) cache, MHA
    Absorbed = 1,      // latent [c, k_pe] cache, MQA over 576/512
    Decompressed = 2,  // latent cache, decompressed per ubatch, MHA 192/128
    Hybrid = 3,        // ubatch >= kHybridSwitchTokens: 2, else 1
    Auto = 4,          // per ubatch, the cheaper of 1 and 2 by a cost model with measured kernel rates
};
constexpr int kHybridSwitchTokens = 128;
MlaMode parse_mla_mode(const std::string& s);  // "0".."3" or "auto"; throws latte::Error

// The kernel level every model and context of this process runs: scalar, avx2, avx512, amx or neon;
// LATTE_ISA's level when it is set, else the best this CPU and build run. Resolved once, at the
// first call (Model::load makes one). Throws latte::Error naming the level when LATTE_ISA asks for
// one this CPU or build lacks, or is not a level's name.
std::string kernel_level();

// Every member has a default (written out, so that designated initializers naming only some
// members compile without -Wmissing-field-initializers warnings under -Wextra).
struct ContextParams {
    uint32_t n_ctx = 4096;
    uint32_t n_ubatch = 512;
    uint32_t n_threads = 0;                 // 0: the machine's physical cores
    // Threads for ubatches of more than one token (prompt processing; llama.cpp's -tb), 0: n_threads.
    // The pool has max(n_threads, n_threads_batch) threads; each ubatch runs on the first n of them.
    uint32_t n_threads_batch = 0;
    MlaMode mla = MlaMode::Auto;
    bool flash_attn = true;                 // online-softmax tiles instead of the full score row
    GGMLType cache_type = GGMLType::F16;    // f32, f16, bf16, q8_0, q8_KV (K rows; the latent rows in -mla 1/2/3)
    // V rows' type in -mla 0 (llama.cpp's -ctv; unset: cache_type). Ignored in the latent modes
    // (-mla 1/2/3/auto), whose V is the first kv_lora values of the latent (K) row; params() then
    // reports cache_type here.
    std::optional<GGMLType> cache_type_v{};
    // The thread pool (src/threadpool.h): pinned one per physical core by default.
    std::string cpu_mask{};                 // hex mask of CPUs (--cpu-mask)
    std::string cpu_range{};                // "0-7,16-23" (--cpu-range)
    std::string numa = "none";              // none | distribute | isolate | interleave (--numa)
    bool smt = false;                       // default CPU set includes SMT siblings
    // true: use the process-wide pool (made by the first such context with these options; later
    // ones must ask for the same thread count or 0); contexts sharing it must not decode at the
    // same time from different threads (refused with latte::Error). false: a pool of its own.
    bool shared_pool = false;
};

class ContextImpl;
class Context {
public:
    // Throws latte::Error for bad parameters (context beyond what memory allows, bad cache type).
    Context(std::shared_ptr<Model> model, const ContextParams& p);
    ~Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    // Appends tokens at positions n_past().. and runs them through the model in ubatches.
    // all_logits: keep every token's logits; otherwise only the last token's.
    void decode(const std::vector<int32_t>& tokens, bool all_logits = false);
    // Logits of the i-th token of the last decode (i < 0: from the end; -1 = last).
    const float* logits(int32_t i = -1) const;
    uint32_t n_past() const;
    void clear();  // empties the KV cache
    // Keeps the first n tokens of the cache (n <= n_past()); the next decode continues at position n
    // (llama.cpp's seq_rm of the tail). Throws latte::Error when n > n_past().
    void truncate(uint32_t n);
    uint64_t kv_cache_bytes() const;
    const ContextParams& params() const;
    const Model& model() const;
    // The thread pool: CPUs, pinning, spin, NUMA (one line each, no trailing newline).
    std::string threads_report() const;
    // The attention path (0 full, 1 absorbed, 2 decompressed) each ubatch of the last decode took,
    // in order (-mla 3 and auto choose per ubatch).
    std::vector<int> last_paths() const;
    // What the last decode() read and computed, counted from the shapes (for bytes and flops per
    // token beside a speed): weight bytes of every matmul (a matrix once per ubatch; MoE: only the
    // experts the router used), KV cache bytes attention read, and their flops (2 per multiply-add;
    // attention counts the causally visible rows, plus -mla 2's decompression and -mla 1's query
    // absorption).
    struct DecodeStats {
        uint32_t tokens = 0, ubatches = 0;
        uint64_t weight_bytes = 0, kv_bytes = 0;
        double matmul_flops = 0, attn_flops = 0;
        // Wall time by phase, ns (steady clock on the calling thread around each phase's pool jobs):
        // attention projections (q, kv_a, o with their norms and RoPE), attention (cache store and
        // the -mla path: absorption or decompression, the attention kernels), MoE routing (router,
        // top-k, gather, weighted combine), FFN matmuls (dense FFN, experts, shared experts), the
        // output head, and the whole decode (the rest of it: embeddings, residual adds and norms).
        uint64_t ns_attn_proj = 0, ns_attn = 0, ns_moe_route = 0, ns_ffn = 0, ns_head = 0, ns_total = 0;
    };
    DecodeStats last_decode_stats() const;

private:
    std::unique_ptr<ContextImpl> impl_;
};

}  // namespace latte

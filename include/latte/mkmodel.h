// The deterministic random-weight model maker (latte-mkmodel): writes a deepseek2 GGUF file with
// the metadata keys and tensor names of docs/MODEL_FILES.md, filled with random normal weights.
//
// Values are a pure function of (seed, tensor name, element index): each tensor's generator is
// seeded from splitmix64(seed ^ fnv1a64(name)); the tensor is cut into fixed chunks of
// kMkModelChunk elements, each with its own xoshiro256** stream seeded from the tensor seed and
// the chunk index, and normals come from our own Box–Muller. The file is therefore identical for
// any thread count and any machine with an IEEE libm whose log/sin/cos agree (glibc's do).
//
// Scales (they keep activations finite through every layer):
//   1-D norm weights        1 + 0.1·N(0,1)      exp_probs_b.bias   0.1·N(0,1)
//   token_embd.weight       N(0,1)              every other matrix N(0, 1/sqrt(ne0))
// (ne0 is the row length = the input width, so output and ffn_gate_inp get N(0, 1/sqrt(n_embd))).
//
// The split layout (split_kv_b) stores the very same W_kb/W_vb values as attn_kv_b for the same
// seed: they are generated under the name blk.i.attn_kv_b.weight and then rearranged.
//
// Memory: the writer streams, tensor by tensor and slab by slab (a few tens of MB at a time), so
// any preset can be written if the disk holds it (the v3 preset is ~700 GB as q8_0). The one
// exception is the split layout, which holds one layer's kv_b in f32 (n_head·256·512 floats).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "latte/types.h"

namespace latte {

struct MkModelSpec {
    std::string name = "latte-random";  // general.name
    uint32_t n_vocab = 1024;
    uint32_t n_embd = 256;
    uint32_t n_layer = 3;
    uint32_t n_head = 4;
    uint32_t q_lora_rank = 128;       // 0: plain attn_q
    uint32_t kv_lora_rank = 512;
    uint32_t n_rot = 64;              // rope dims per head
    uint32_t d_nope = 128;            // per head
    uint32_t d_v = 128;               // per head
    uint32_t n_ff = 512;              // dense FFN width
    uint32_t n_ff_exp = 256;          // routed/shared expert width
    uint32_t n_expert = 4;            // 0: every layer dense
    uint32_t n_expert_used = 2;
    uint32_t n_expert_shared = 1;
    uint32_t n_layer_dense_lead = 1;
    uint32_t gating_func = 2;         // 1 softmax, 2 sigmoid (sigmoid files carry exp_probs_b)
    bool expert_weights_norm = true;
    float expert_weights_scale = 2.5f;
    uint32_t n_expert_groups = 2;
    uint32_t n_group_used = 1;
    bool yarn = true;
    float rope_factor = 4.0f;
    uint32_t n_ctx_orig = 1024;
    float yarn_log_mul = 0.1f;
    uint32_t n_ctx_train = 4096;
    float rope_freq_base = 10000.0f;
    float rms_eps = 1e-6f;
    GGMLType type = GGMLType::F32;    // every tensor but 1-D ones and ffn_gate_inp (always f32)
    uint64_t seed = 42;
    bool split_kv_b = false;          // attn_k_b/attn_v_b (head_count_kv 1) instead of attn_kv_b
};

// The presets: "tiny", "v2-lite", "v3", "anchor". Throws latte::Error listing them otherwise.
MkModelSpec mkmodel_preset(const std::string& name);
std::vector<std::string> mkmodel_preset_names();

// Throws latte::Error naming the offending knob (and tensor, for row lengths that the type's
// block size does not divide) when the spec cannot make a valid file.
void mkmodel_validate(const MkModelSpec& spec);

// Tensor names and ggml shapes ({ne0, ne1, ...}) in write order.
std::vector<std::pair<std::string, std::vector<int64_t>>> mkmodel_tensor_list(const MkModelSpec& spec);
// The element type a tensor is written with (F32 for 1-D tensors and ffn_gate_inp).
GGMLType mkmodel_tensor_type(const MkModelSpec& spec, const std::string& name, const std::vector<int64_t>& ne);
// Total number of weights (elements of all tensors).
uint64_t mkmodel_param_count(const MkModelSpec& spec);
// Q4_K, Q5_K, Q6_K: their tensors whose rows are not a multiple of 256 are written as q8_0.
bool mkmodel_is_k_quant(GGMLType t);
// general.file_type for a weight type: 0 f32, 1 f16, 7 q8_0, 2 q4_0, 32 bf16, 14 q4_K (llama.cpp's
// Q4_K_S), 16 q5_K (Q5_K_S), 18 q6_K.
uint32_t mkmodel_file_type(GGMLType t);

// Validates, then writes the file (to PATH.tmp, renamed to PATH when complete). progress: a
// progress line on stderr. n_threads 0: hardware concurrency; the bytes do not depend on it.
// Throws latte::Error on a bad spec or an I/O failure.
void mkmodel_write(const MkModelSpec& spec, const std::string& path, bool progress, unsigned n_threads = 0);

// The values of tensor `name` (as if written in f32, before any conversion) for elements
// [first, first + count): exposed for tests. The split layout's attn_k_b/attn_v_b are derived
// from attn_kv_b; ask for attn_kv_b to get their source values.
void mkmodel_generate(const MkModelSpec& spec, const std::string& name, const std::vector<int64_t>& ne,
                      uint64_t first, uint64_t count, float* out);

}  // namespace latte

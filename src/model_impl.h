// The loaded model: hyperparameters, weight views into the mapped GGUF, derived f32 tensors.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "latte/gguf.h"
#include "latte/latte.h"

namespace latte {

// A 2-D view of weight rows in the file: rows of n_in elements of `type`, y[j] = row_j . x.
// Q8_0 matrices may be repacked at load (ModelParams::repack) to Q8_0_R16: 16-row groups, same
// row_stride, data then points to the repacked copy (or the file's bytes permuted in place).
struct Matrix {
    std::string name;
    GGMLType type = GGMLType::F32;
    int64_t n_in = 0, n_out = 0;
    const uint8_t* data = nullptr;
    size_t row_stride = 0;  // bytes
    const uint8_t* row(int64_t j) const { return data + static_cast<size_t>(j) * row_stride; }
    bool empty() const { return data == nullptr; }
    // Rows [first, first+count) as a matrix (expert e of a 3-D tensor, a head's slice). For a
    // Q8_0_R16 matrix (repacked at load) first and count must be multiples of 16 (throws otherwise).
    Matrix rows(int64_t first, int64_t count) const;
};

struct Layer {
    std::vector<float> attn_norm;
    Matrix wq;                      // q_lora_rank == 0
    Matrix wq_a, wq_b;              // q_lora_rank > 0
    std::vector<float> q_a_norm;
    Matrix wkv_a_mqa;
    std::vector<float> kv_a_norm;
    std::vector<float> wkb, wvb;    // [H][d_nope][L], [H][d_v][L]: from attn_kv_b or attn_k_b/attn_v_b
    std::vector<float> wkbT;        // [H][L][d_nope]: W_kb_h transposed (the query absorption's matmul)
    std::vector<uint16_t> wkbT16, wvb16;  // the same as f16 (quantised/16-bit files; wkbT then empty)
    // attn_kv_b as in the file (per head d_nope rows of W_kb_h, then d_v rows of W_vb_h, kv_lora
    // wide; empty for the attn_k_b/attn_v_b layout): -mla 2's decompression runs on it through the
    // weight matmul kernels (int8 dots for Q8_0), repacked at load like the other matrices.
    Matrix wkv_b;
    Matrix wo;
    std::vector<float> ffn_norm;
    // dense
    Matrix ffn_gate, ffn_up, ffn_down;
    // MoE
    bool moe = false;
    Matrix gate_inp;                // {E, n_expert}
    std::vector<float> exp_probs_b; // empty when absent
    Matrix gate_exps, up_exps, down_exps;  // n_expert·n_ff_exp rows (down: n_expert·E rows)
    Matrix gate_shexp, up_shexp, down_shexp;
};

// Anonymous memory (mmap) holding repacked weights; unmapped with the model.
struct AnonBuffer {
    uint8_t* data = nullptr;
    size_t size = 0;
    explicit AnonBuffer(size_t n);  // throws latte::Error when the memory cannot be had
    ~AnonBuffer();
    AnonBuffer(const AnonBuffer&) = delete;
    AnonBuffer& operator=(const AnonBuffer&) = delete;
};

class ModelImpl {
public:
    std::unique_ptr<GGUFFile> file;
    HParams hp;
    Tokenizer tokenizer;
    Matrix tok_embd, output;
    std::vector<float> output_norm;
    std::vector<Layer> layers;
    std::vector<float> rope_inv_freq;  // n_rot/2 frequencies (YaRN-blended when scaling is on)
    float attn_scale = 1.0f;           // mscale² / sqrt(d_qk)
    uint64_t n_params = 0;
    double load_ms = 0;                // Model::load, whole (map/read + parse + derived weights)
    // Repacking at load (ModelParams::repack): matrices now q8_0_r16/q4_0_r16 or q4_K_r/q5_K_r/q6_K_r
    // (all, and the K-quant ones among them), their bytes, the time, and the anonymous buffers
    // holding them (empty when repacked in place in a read-in file).
    int n_repacked = 0, n_repacked_kq = 0;
    uint64_t repacked_bytes = 0, repacked_kq_bytes = 0;
    double repack_ms = 0;
    bool repacked_in_place = false;
    std::vector<std::unique_ptr<AnonBuffer>> repack_bufs;
};

// Reads and validates the hyperparameters (throws latte::Error naming the key).
HParams read_hparams(const GGUFFile& f);
// YaRN / plain RoPE inverse frequencies for the n_rot/2 pairs.
std::vector<float> rope_frequencies(const HParams& hp);
// mscale² / sqrt(d_qk).
float attention_scale(const HParams& hp);

}  // namespace latte

// The KV cache: per layer, per position, rows of one element type (f32, f16, bf16, q8_0, q8_KV).
//  - latent layout (-mla 1/2/3): one row of [c (kv_lora), k_pe (n_rot)] = 576 values per token;
//  - full layout (-mla 0): a K row of n_head sub-rows of d_nope+n_rot values, each
//    row_bytes(type, d_qk) bytes, and a V row of n_head sub-rows of d_v values, each
//    row_bytes(type, d_v) bytes (for the block types the same bytes as one long row; for the
//    per-row type q8_KV every head's K and V carry their own header). V may have a type of its own
//    (-ctv); the latent layout has no V rows (V is the first kv_lora values of the latent row).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "latte/types.h"

namespace latte {

struct MlaDims {
    int n_head = 0;
    int kv_lora = 512;
    int n_rot = 64;
    int d_nope = 128;
    int d_v = 128;
    int d_qk() const { return d_nope + n_rot; }
    int d_latent() const { return kv_lora + n_rot; }
};

class KVCache {
public:
    // Throws latte::Error when the type is not a cache type, a row is not block aligned, or the
    // cache does not fit in memory (the message names the bytes needed and available).
    // vtype: the V rows' type in the full layout (unset: `type`); ignored for the latent layout.
    KVCache(const MlaDims& d, int n_layer, int n_ctx, bool full, GGMLType type,
            std::optional<GGMLType> vtype = std::nullopt);

    bool full() const { return full_; }
    GGMLType type() const { return type_; }     // K rows (and latent rows)
    GGMLType v_type() const { return vtype_; }  // V rows (full layout; == type() for the latent one)
    int n_ctx() const { return n_ctx_; }
    const MlaDims& dims() const { return d_; }
    int k_width() const { return k_width_; }  // elements per K (or latent) row, all heads
    int v_width() const { return v_width_; }  // elements per V row (0 for latent)
    size_t k_row_bytes() const { return k_row_bytes_; }
    size_t v_row_bytes() const { return v_row_bytes_; }
    uint8_t* k_row(int il, int pos) { return k_.data() + (static_cast<size_t>(il) * n_ctx_ + pos) * k_row_bytes_; }
    uint8_t* v_row(int il, int pos) { return v_.data() + (static_cast<size_t>(il) * n_ctx_ + pos) * v_row_bytes_; }
    const uint8_t* k_row(int il, int pos) const { return k_.data() + (static_cast<size_t>(il) * n_ctx_ + pos) * k_row_bytes_; }
    const uint8_t* v_row(int il, int pos) const { return v_.data() + (static_cast<size_t>(il) * n_ctx_ + pos) * v_row_bytes_; }
    uint64_t bytes() const { return k_.size() + v_.size(); }
    // Bytes a cache of these parameters needs (for checks before allocating).
    static uint64_t bytes_needed(const MlaDims& d, int n_layer, int n_ctx, bool full, GGMLType type,
                                 std::optional<GGMLType> vtype = std::nullopt);

private:
    MlaDims d_;
    int n_layer_, n_ctx_;
    bool full_;
    GGMLType type_, vtype_;
    int k_width_, v_width_;
    size_t k_row_bytes_, v_row_bytes_;
    std::vector<uint8_t> k_, v_;
};

}  // namespace latte

#include "kv_cache.h"

#include <unistd.h>

#include <new>
#include <string>

#include "latte/error.h"

namespace latte {
namespace {

void check_cache_type(GGMLType t) {
    if (t != GGMLType::F32 && t != GGMLType::F16 && t != GGMLType::BF16 && t != GGMLType::Q8_0 && t != GGMLType::Q8_KV)
        throw Error(std::string("KV cache type '") + type_name(t) +
                    "' is not supported: expected f32, f16, bf16, q8_0 or q8_KV");
}

// Bytes of one token's K (or latent) row and V row. The full layout stores each head as its own
// sub-row (row_bytes(type, d_qk) per head for K, row_bytes(type, d_v) for V): for the block types
// these are the same bytes as one row of n_head*d; for q8_KV each head gets its own header.
size_t k_bytes(const MlaDims& d, bool full, GGMLType type) {
    return full ? static_cast<size_t>(d.n_head) * row_bytes(type, d.d_qk()) : row_bytes(type, d.d_latent());
}
size_t v_bytes(const MlaDims& d, bool full, GGMLType type) {
    return full ? static_cast<size_t>(d.n_head) * row_bytes(type, d.d_v) : 0;
}

uint64_t phys_memory() {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

}  // namespace

uint64_t KVCache::bytes_needed(const MlaDims& d, int n_layer, int n_ctx, bool full, GGMLType type,
                               std::optional<GGMLType> vtype) {
    check_cache_type(type);
    const GGMLType vt = full && vtype ? *vtype : type;
    check_cache_type(vt);
    const uint64_t per_tok = k_bytes(d, full, type) + v_bytes(d, full, vt);
    return per_tok * static_cast<uint64_t>(n_layer) * static_cast<uint64_t>(n_ctx);
}

KVCache::KVCache(const MlaDims& d, int n_layer, int n_ctx, bool full, GGMLType type, std::optional<GGMLType> vtype)
    : d_(d), n_layer_(n_layer), n_ctx_(n_ctx), full_(full), type_(type), vtype_(full && vtype ? *vtype : type) {
    check_cache_type(type);
    check_cache_type(vtype_);
    if (n_ctx <= 0) throw Error("KV cache: context size must be positive, got " + std::to_string(n_ctx));
    k_width_ = full ? d.n_head * d.d_qk() : d.d_latent();
    v_width_ = full ? d.n_head * d.d_v : 0;
    k_row_bytes_ = k_bytes(d, full, type);
    v_row_bytes_ = v_bytes(d, full, vtype_);
    const uint64_t need = bytes_needed(d, n_layer, n_ctx, full, type, vtype_);
    const uint64_t have = phys_memory();
    if (have && need > have)
        throw Error("KV cache for " + std::to_string(n_ctx) + " tokens needs " + std::to_string(need) +
                    " bytes, more than this machine's " + std::to_string(have) + " bytes of memory: lower -c");
    try {
        k_.resize(static_cast<size_t>(n_layer) * n_ctx * k_row_bytes_);
        v_.resize(static_cast<size_t>(n_layer) * n_ctx * v_row_bytes_);
    } catch (const std::bad_alloc&) {
        throw Error("KV cache: could not allocate " + std::to_string(need) + " bytes for " + std::to_string(n_ctx) +
                    " tokens: lower -c");
    }
}

}  // namespace latte

#include "kv_cache.h"

#include <unistd.h>

#include <new>
#include <string>

#include "latte/error.h"

namespace latte {
namespace {

void check_cache_type(GGMLType t) {
    if (t != GGMLType::F32 && t != GGMLType::F16 && t != GGMLType::BF16 && t != GGMLType::Q8_0)
        throw Error(std::string("KV cache type '") + type_name(t) + "' is not supported: expected f32, f16, bf16 or q8_0");
}

uint64_t phys_memory() {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

}  // namespace

uint64_t KVCache::bytes_needed(const MlaDims& d, int n_layer, int n_ctx, bool full, GGMLType type) {
    check_cache_type(type);
    const int kw = full ? d.n_head * d.d_qk() : d.d_latent();
    const int vw = full ? d.n_head * d.d_v : 0;
    const uint64_t per_tok = row_bytes(type, kw) + (vw ? row_bytes(type, vw) : 0);
    return per_tok * static_cast<uint64_t>(n_layer) * static_cast<uint64_t>(n_ctx);
}

KVCache::KVCache(const MlaDims& d, int n_layer, int n_ctx, bool full, GGMLType type)
    : d_(d), n_layer_(n_layer), n_ctx_(n_ctx), full_(full), type_(type) {
    check_cache_type(type);
    if (n_ctx <= 0) throw Error("KV cache: context size must be positive, got " + std::to_string(n_ctx));
    k_width_ = full ? d.n_head * d.d_qk() : d.d_latent();
    v_width_ = full ? d.n_head * d.d_v : 0;
    k_row_bytes_ = row_bytes(type, k_width_);
    v_row_bytes_ = v_width_ ? row_bytes(type, v_width_) : 0;
    const uint64_t need = bytes_needed(d, n_layer, n_ctx, full, type);
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

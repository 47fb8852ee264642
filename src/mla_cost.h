// -mla auto (MlaMode::Auto): per ubatch, the cheaper of the absorbed (1) and decompressed (2) paths
// by a cost model fed with kernel rates measured once per process (DESIGN.md §1's table).
//
// Per layer, n query tokens at positions [pos0, pos0+n), n_kv = pos0 + n cached rows, a token
// sees on average kv = pos0 + (n+1)/2 rows (causal):
//   mode 1: n·H·kv·2·(576+512) at the MQA kernel rate (rows M = n·H)
//           + n·H·2·(d_nope + d_v)·kv_lora for the query absorption and W_vb at the GEMM rate;
//   mode 2: 2·kv_lora·(d_nope + d_v)·H·n_kv decompression at the GEMM rate
//           + n·H·kv·2·(192+128) at the MHA kernel rate (rows M = n, f32 K/V).
// Rates (FLOP/s of one thread: both paths split their work over the same pool) are measured the
// first time a (kernel level, cache type) pair is asked for: the level's attn_flash on 256 cache
// rows at a few row counts (MQA 16/64/256 rows, MHA 1/8/64 rows), its f32 gemm (256×512, 64
// tokens) and, when mode 2 decompresses through attn_kv_b's own rows (q8_0_r16 and the like), the
// gemm in that type over 256 latent rows (the amx level runs those on bf16 tiles, several times
// the f32 rate), best of 7 interleaved rounds after a warm-up: 17 ms once per process at avx512 on
// the 2-core dev box, 108 ms at scalar, 12-15 ms at amx on the 16-core Xeon (LATTE_MLA_VERBOSE).
// LATTE_MLA_RATES="mqa,mha,gemm" (GFLOP/s) replaces the measurement (tests, or to pin a choice).
// LATTE_MLA_VERBOSE=1 prints the rates when measured and each (n, pos0)'s estimates and choice.
#pragma once
#include "kernels/dispatch.h"
#include "kv_cache.h"
#include "mla_attention.h"

namespace latte {

struct MlaRates {
    double mqa[3];   // FLOP/s at 16, 64, 256 query rows (heads × tokens)
    double mha[3];   // FLOP/s at 1, 8, 64 query rows (tokens) per head
    double gemm;     // FLOP/s of the f32 weight matmul (query absorption, W_vb)
    double gemm_kvb = 0;  // FLOP/s of the -mla 2 decompression matmul in attn_kv_b's own type (0: use gemm)
};

struct MlaCost {
    double absorbed_s = 0, decompressed_s = 0;  // estimated seconds per layer (one thread)
};

// The rates for this kernel table and cache type: measured once (thread-safe), or LATTE_MLA_RATES.
// kvb_type: the type -mla 2 decompresses with (attn_kv_b's when read directly, else F32).
MlaRates mla_rates(const kernels::KernelTable& kt, GGMLType cache_type, GGMLType kvb_type = GGMLType::F32);
MlaCost mla_cost(const MlaDims& d, int n, int pos0, const MlaRates& r);
// Absorbed or Decompressed for a ubatch of n tokens after pos0 cached ones.
MlaPath mla_auto_path(const kernels::KernelTable& kt, GGMLType cache_type, const MlaDims& d, int n, int pos0,
                      GGMLType kvb_type = GGMLType::F32);

}  // namespace latte

#include "mla_attention.h"

#include "kernels/scalar/dot.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "grown.h"
#include "kernels/dispatch.h"
#include "kernels/scratch.h"
#include "latte/error.h"

namespace latte {
namespace {

float dotf(const float* a, const float* b, int n) { return kernels::scalar::dot_f32(a, b, n); }

// y[r] = W[r] . x for `rows` rows of length `cols`.
void matvec(const float* W, int rows, int cols, const float* x, float* y) {
    for (int r = 0; r < rows; ++r) y[r] = dotf(W + static_cast<size_t>(r) * cols, x, cols);
}

using kernels::AttnFn;

// The large buffers below are static thread_local grow-only vectors (src/grown.h): each thread that
// runs a call, the context's own or a pool thread in a task, keeps its own between ubatches.

AttnFn attn_kernel(const kernels::KernelTable& kt, bool flash) { return flash ? kt.attn_flash : kt.attn_plain; }

// Flash-decoding (DESIGN.md §2): when the query rows are few, the KV length is split into chunks
// that run in parallel, each giving partial (m, l, O), merged exactly afterwards. The split depends
// only on (M, n_kv), never on the thread count, so results do not depend on it either.
constexpr int kSplitMinChunk = 512;    // KV rows per chunk at least (a multiple of the 64-row tile)
constexpr int kSplitMaxChunks = 32;
constexpr int64_t kSplitMaxRows = 256;  // query rows (heads × tokens) up to which TG splits
constexpr size_t kSplitMaxFloats = size_t{8} << 20;  // partial O buffers at most 32 MiB
constexpr int64_t kPPMinItems = 16;  // PP: work items (row blocks × KV chunks) at least, when the KV allows

// KV chunks for M query rows over n_kv cached rows: at most `want` (and kSplitMaxChunks), each of
// kSplitMinChunk rows at least, their partial O buffers within kSplitMaxFloats; 1 = no split.
int kv_chunks(int64_t M, int n_kv, int Dv, int64_t want) {
    if (n_kv < 2 * kSplitMinChunk) return 1;
    int c = static_cast<int>(std::min<int64_t>({want, kSplitMaxChunks, n_kv / kSplitMinChunk}));
    while (c > 1 && static_cast<size_t>(c) * static_cast<size_t>(M) * static_cast<size_t>(Dv) > kSplitMaxFloats) --c;
    return std::max(c, 1);
}

// TG: few query rows (up to kSplitMaxRows) split the KV length as far as it allows.
int split_chunks(int64_t M, int n_kv, int Dv) { return M > kSplitMaxRows ? 1 : kv_chunks(M, n_kv, Dv, kSplitMaxChunks); }

// Whether the environment switch `name` is set to `value`: "0" turns off the split's once-per-call
// steps (the same bits either way, for interleaved timing).
bool switch_is(const char* name, const char* value) {
    const char* e = std::getenv(name);
    return e && std::strcmp(e, value) == 0;
}

// Runs fn(begin, end) -> bool over the ranges the pool splits [0, n) into; true when every range
// returned true (a level's kernel took every one).
template <class Fn>
bool all_ranges_take(ThreadPool& pool, int64_t n, Fn&& fn) {
    std::atomic<int> taken{0}, ranges{0};
    pool.parallel_for(n, [&](int64_t b, int64_t e, unsigned) {
        ranges.fetch_add(1, std::memory_order_relaxed);
        if (fn(b, e)) taken.fetch_add(1, std::memory_order_relaxed);
    });
    return taken.load() > 0 && taken.load() == ranges.load();
}

// O[r] (M rows, stride ldo) of the attention of M query rows over [0, n_kv), split into `chunks`
// of the KV length and blocks of `rb` rows: nblk × chunks independent partials, merged exactly.
void attend_split(const kernels::KernelTable& kt, int chunks, int64_t rb, int64_t M, int n_kv, int Dk, int Dv,
                  const float* Q, int64_t ldq, const uint8_t* K, size_t ldk, GGMLType ktype, const uint8_t* V,
                  size_t ldv, GGMLType vtype, const int* kv_len, float scale, float* O, int64_t ldo, ThreadPool& pool) {
    // chunk boundaries on 64-row tiles
    std::vector<int> edge(static_cast<size_t>(chunks) + 1);
    for (int c = 0; c <= chunks; ++c)
        edge[static_cast<size_t>(c)] = c == chunks ? n_kv : static_cast<int>((static_cast<int64_t>(n_kv) * c / chunks) & ~int64_t{63});
    // The partials' buffers are the calling thread's, grown only: every element is written by its
    // chunk before it is read, so no per-token allocation and zero-fill (1 MiB at 16 heads, 32 chunks).
    // part is the kernels' grow-only Buf, 64-byte aligned (the kernels' rows of Dv floats then too,
    // for whole-line and non-temporal stores).
    static thread_local kernels::Buf part_buf;
    static thread_local std::vector<float> ml_buf;
    float* part = part_buf.get<float>(static_cast<size_t>(chunks) * M * Dv);
    float* ml = grown(ml_buf, static_cast<size_t>(chunks) * M * 2);
    const int64_t nblk = (M + rb - 1) / rb;
    // The query rows quantised once for all chunks where the level's kernels take an int8 query
    // (kernels/dispatch.h's attn_quant_q): each chunk's call would quantise them again (TG 128
    // heads @ 8K splits into 16 chunks; amx: 12% of the kernel's samples).
    static thread_local std::vector<int8_t> qq_buf;
    static thread_local std::vector<float> qd_buf;
    static thread_local std::vector<int32_t> qs_buf;
    const int qblocks = ktype == GGMLType::Q8_KV ? 1 : std::max(1, Dk / 32);
    bool preq = false;
    int8_t* q8 = nullptr;  // the calling thread's buffers (the workers see them through these)
    float* qd = nullptr;
    int32_t* qs = nullptr;
    // (LATTE_SPLIT_QONCE=0 turns it off)
    if (kt.attn_quant_q && kt.attn_flash_part_q && chunks > 1 && !switch_is("LATTE_SPLIT_QONCE", "0")) {
        q8 = grown(qq_buf, static_cast<size_t>(M) * Dk);
        qd = grown(qd_buf, static_cast<size_t>(M) * qblocks);
        qs = grown(qs_buf, static_cast<size_t>(M) * qblocks);
        preq = all_ranges_take(pool, M, [&](int64_t r0, int64_t re) {
            return kt.attn_quant_q(ktype, vtype, Dk, Dv, static_cast<int>(re - r0), Q + r0 * ldq, ldq, scale,
                                   q8 + r0 * Dk, qd + r0 * qblocks, qs + r0 * qblocks);
        });
    }
    // and packed once where the level's kernel packs its int8 query per 16-row block (amx: the Qᵀ
    // tiles, 72 16×16 transposes per chunk call at 128 heads), when the row blocks start at
    // multiples of 16 (LATTE_SPLIT_PACKONCE=0 turns it off)
    static thread_local std::vector<uint8_t> qp_buf;
    uint8_t* qp = nullptr;
    if (preq && kt.attn_pack_q && rb % 16 == 0 && !switch_is("LATTE_SPLIT_PACKONCE", "0")) {
        uint8_t* buf = grown(qp_buf, static_cast<size_t>((M + 15) / 16 * 16) * Dk);
        if (all_ranges_take(pool, (M + 15) / 16, [&](int64_t g0, int64_t ge) {
                const int64_t r0 = 16 * g0, re = std::min(M, 16 * ge);
                return kt.attn_pack_q(ktype, vtype, Dk, Dv, static_cast<int>(re - r0), q8 + r0 * Dk, buf + r0 * Dk);
            }))
            qp = buf;
    }
    // Each call is told the KV rows its thread reads next (the range's next item), which the amx
    // kernel prefetches into L2 during its tile work: a TG chunk call's rows are otherwise read cold
    // from memory by its first pass (LATTE_SPLIT_PREFETCH=0 turns it off)
    const bool hint_next = !switch_is("LATTE_SPLIT_PREFETCH", "0");
    const bool v_in_k = V == K && ldv == ldk;
    pool.parallel_for(nblk * chunks, [&](int64_t ib, int64_t ie, unsigned) {
        std::vector<int> len(static_cast<size_t>(rb));
        for (int64_t it = ib; it < ie; ++it) {
            const int64_t c = it % chunks, b = it / chunks * rb, e = std::min(M, b + rb);
            const int j0 = edge[static_cast<size_t>(c)], j1 = edge[static_cast<size_t>(c) + 1];
            int vis = 0;  // rows of the block that see this chunk (causal: early rows may not)
            for (int64_t r = b; r < e; ++r) {
                len[static_cast<size_t>(r - b)] = std::max(0, std::min(kv_len[r], j1) - j0);
                vis = std::max(vis, len[static_cast<size_t>(r - b)]);
            }
            float* mc = &ml[static_cast<size_t>(c) * M * 2];
            if (vis == 0) {  // nothing to read: an empty partial (the merge skips l == 0)
                for (int64_t r = b; r < e; ++r) {
                    mc[r] = -std::numeric_limits<float>::infinity();
                    mc[M + r] = 0.0f;
                }
                continue;
            }
            if (preq) {
                kernels::QuantQuery qq{q8 + b * Dk, qd + b * qblocks, qs + b * qblocks, qp ? qp + b * Dk : nullptr};
                if (hint_next && it + 1 < ie) {
                    const int64_t cn = (it + 1) % chunks;
                    const int n0 = edge[static_cast<size_t>(cn)], n1 = edge[static_cast<size_t>(cn) + 1];
                    qq.next_k = K + static_cast<size_t>(n0) * ldk;
                    qq.next_v = v_in_k ? nullptr : V + static_cast<size_t>(n0) * ldv;
                    qq.next_k_bytes = static_cast<size_t>(n1 - n0) * ldk;
                    qq.next_v_bytes = v_in_k ? 0 : static_cast<size_t>(n1 - n0) * ldv;
                }
                kt.attn_flash_part_q(static_cast<int>(e - b), j1 - j0, Dk, Dv, Q + b * ldq, ldq,
                                     K + static_cast<size_t>(j0) * ldk, ldk, ktype,
                                     V + static_cast<size_t>(j0) * ldv, ldv, vtype, len.data(), scale,
                                     &part[(static_cast<size_t>(c) * M + b) * Dv], Dv, mc + b, mc + M + b, qq);
                continue;
            }
            kt.attn_flash_part(static_cast<int>(e - b), j1 - j0, Dk, Dv, Q + b * ldq, ldq,
                               K + static_cast<size_t>(j0) * ldk, ldk, ktype, V + static_cast<size_t>(j0) * ldv, ldv,
                               vtype, len.data(), scale, &part[(static_cast<size_t>(c) * M + b) * Dv], Dv, mc + b,
                               mc + M + b);
        }
    });
    // The merge: the weights e^{m_c - m} / l per row here (scalars), the weighted sum of the
    // partials by the level's attn_combine (this file is built for the baseline ISA: its own loop
    // was SSE2 and, at TG 128 heads @ 8K, 3.6% of the avx512 kernel's samples).
    pool.parallel_for(M, [&](int64_t r0, int64_t re, unsigned) {
        for (int64_t r = r0; r < re; ++r) {
            float m = -std::numeric_limits<float>::infinity();
            for (int c = 0; c < chunks; ++c) m = std::max(m, ml[static_cast<size_t>(c) * M * 2 + r]);
            float w[kSplitMaxChunks];  // chunks <= kSplitMaxChunks: kv_chunks caps it
            float l = 0.0f;
            for (int c = 0; c < chunks; ++c) {
                const float lc = ml[static_cast<size_t>(c) * M * 2 + M + r];
                w[c] = lc != 0.0f ? std::exp(ml[static_cast<size_t>(c) * M * 2 + r] - m) : 0.0f;
                l += lc * w[c];
            }
            const float inv = l > 0.0f ? 1.0f / l : 0.0f;
            for (int c = 0; c < chunks; ++c) w[c] *= inv;  // an empty chunk (l_c = 0) keeps w = 0: not read
            kt.attn_combine(chunks, Dv, w, &part[static_cast<size_t>(r) * Dv], static_cast<size_t>(M) * Dv, O + r * ldo);
        }
    });
}

}  // namespace

void mla_store(KVCache& cache, int il, int pos0, int n, const float* c, const float* kpe, const MlaWeights& w,
               ThreadPool& pool) {
    const MlaDims& d = cache.dims();
    const int L = d.kv_lora, R = d.n_rot;
    if (pos0 < 0 || pos0 + n > cache.n_ctx()) throw Error("KV cache: positions past the context size");
    const kernels::QuantizeRowFn quantize_row = kernels::active().quantize_row;
    if (!cache.full()) {
        pool.parallel_for(n, [&](int64_t b, int64_t e, unsigned) {
            static thread_local std::vector<float> row_buf;
            float* row = grown(row_buf, static_cast<size_t>(L + R));
            for (int64_t t = b; t < e; ++t) {
                std::copy(c + t * L, c + (t + 1) * L, row);
                std::copy(kpe + t * R, kpe + (t + 1) * R, row + L);
                quantize_row(cache.type(), row, cache.k_row(il, static_cast<int>(pos0 + t)), L + R);
            }
        });
        return;
    }
    const int H = d.n_head, DK = d.d_qk(), DV = d.d_v, N = d.d_nope;
    pool.parallel_for(n, [&](int64_t b, int64_t e, unsigned) {
        static thread_local std::vector<float> krow_buf, vrow_buf;
        float* krow = grown(krow_buf, static_cast<size_t>(H) * DK);
        float* vrow = grown(vrow_buf, static_cast<size_t>(H) * DV);
        for (int64_t t = b; t < e; ++t) {
            for (int h = 0; h < H; ++h) {
                matvec(w.wkb + static_cast<size_t>(h) * N * L, N, L, c + t * L, &krow[static_cast<size_t>(h) * DK]);
                std::copy(kpe + t * R, kpe + (t + 1) * R, krow + static_cast<size_t>(h) * DK + N);
                matvec(w.wvb + static_cast<size_t>(h) * DV * L, DV, L, c + t * L, &vrow[static_cast<size_t>(h) * DV]);
            }
            // one sub-row per head (its own header for q8_KV; the same bytes as one row for block types)
            const size_t kb = row_bytes(cache.type(), DK), vb = row_bytes(cache.v_type(), DV);
            uint8_t* kdst = cache.k_row(il, static_cast<int>(pos0 + t));
            uint8_t* vdst = cache.v_row(il, static_cast<int>(pos0 + t));
            for (int h = 0; h < H; ++h) {
                quantize_row(cache.type(), &krow[static_cast<size_t>(h) * DK], kdst + h * kb, DK);
                quantize_row(cache.v_type(), &vrow[static_cast<size_t>(h) * DV], vdst + h * vb, DV);
            }
        }
    });
}

void mla_attend(MlaPath path, bool flash, const KVCache& cache, int il, int pos0, int n, const float* q,
                const MlaWeights& w, float scale, float* out, ThreadPool& pool) {
    const MlaDims& d = cache.dims();
    const int H = d.n_head, L = d.kv_lora, R = d.n_rot, N = d.d_nope, DK = d.d_qk(), DV = d.d_v;
    const int n_kv = pos0 + n;
    if (pos0 < 0 || n_kv > cache.n_ctx()) throw Error("attention: positions past the context size");
    if ((path == MlaPath::Full) != cache.full())
        throw Error("attention: -mla path does not match the KV cache layout");
    const kernels::KernelTable& ktab = kernels::active();
    const AttnFn attn = attn_kernel(ktab, flash);
    const GGMLType ct = cache.type();

    if (path == MlaPath::Full) {
        // Plain MHA per head: K_h / V_h are the per-head sub-rows of the full rows.
        const GGMLType vt = cache.v_type();  // -ctv: V rows may have a type of their own
        const size_t koff = row_bytes(ct, static_cast<int64_t>(DK)), voff = row_bytes(vt, static_cast<int64_t>(DV));
        std::vector<int> kv_len(n);
        for (int t = 0; t < n; ++t) kv_len[t] = pos0 + t + 1;
        pool.parallel_for(H, [&](int64_t hb, int64_t he, unsigned) {
            for (int64_t h = hb; h < he; ++h)
                attn(n, n_kv, DK, DV, q + h * DK, static_cast<int64_t>(H) * DK, cache.k_row(il, 0) + h * koff,
                     cache.k_row_bytes(), ct, cache.v_row(il, 0) + h * voff, cache.v_row_bytes(), vt, kv_len.data(),
                     scale, out + h * DV, static_cast<int64_t>(H) * DV);
        });
        return;
    }

    if (path == MlaPath::Absorbed) {
        // MQA with one KV head: row (t, h) of the query is [W_kb_hᵀ q_nope, q_pe] (576); K is the
        // latent row, V its first kv_lora values. Every head shares each KV row.
        const int DL = L + R;
        const int64_t M = static_cast<int64_t>(n) * H;
        static thread_local std::vector<float> qlat_buf, olat_buf;
        static thread_local std::vector<int> len_buf;
        float* qlat = grown(qlat_buf, static_cast<size_t>(M) * DL);
        float* olat = grown(olat_buf, static_cast<size_t>(M) * L);
        int* kv_len = grown(len_buf, static_cast<size_t>(M));
        if (w.wkbT || w.wkbT16) {
            // q_lat_h = W_kb_hᵀ q_nope_h for every token: one f32 weight matmul per head (rows of
            // W_kb_hᵀ are the kv_lora outputs), then q_pe copied behind it.
            pool.parallel_for(H, [&](int64_t hb, int64_t he, unsigned) {
                for (int64_t h = hb; h < he; ++h) {
                    const size_t off = static_cast<size_t>(h) * L * N;
                    if (w.wkbT16)
                        ktab.gemm(GGMLType::F16, w.wkbT16 + off, N * sizeof(uint16_t), N, L, q + h * DK,
                                  static_cast<int64_t>(H) * DK, nullptr, n, &qlat[static_cast<size_t>(h) * DL],
                                  static_cast<int64_t>(H) * DL);
                    else
                        ktab.gemm(GGMLType::F32, w.wkbT + off, N * sizeof(float), N, L, q + h * DK,
                                  static_cast<int64_t>(H) * DK, nullptr, n, &qlat[static_cast<size_t>(h) * DL],
                                  static_cast<int64_t>(H) * DL);
                }
            });
            for (int64_t r = 0; r < M; ++r) {
                const int64_t t = r / H;
                const float* qn = q + r * DK;
                std::copy(qn + N, qn + DK, &qlat[static_cast<size_t>(r) * DL + L]);
                kv_len[static_cast<size_t>(r)] = pos0 + static_cast<int>(t) + 1;
            }
        } else
        pool.parallel_for(M, [&](int64_t b, int64_t e, unsigned) {
            for (int64_t r = b; r < e; ++r) {
                const int64_t t = r / H, h = r % H;
                const float* qn = q + (t * H + h) * DK;
                float* ql = &qlat[static_cast<size_t>(r) * DL];
                const float* wk = w.wkb + static_cast<size_t>(h) * N * L;
                std::fill(ql, ql + L, 0.0f);
                for (int i = 0; i < N; ++i) {
                    const float qi = qn[i];
                    const float* wr = wk + static_cast<size_t>(i) * L;
                    for (int j = 0; j < L; ++j) ql[j] += qi * wr[j];
                }
                std::copy(qn + N, qn + DK, ql + L);
                kv_len[static_cast<size_t>(r)] = pos0 + static_cast<int>(t) + 1;
            }
        });
        mqa_attend(ktab, flash, cache.k_row(il, 0), cache.k_row_bytes(), ct, M, n_kv, DL, L, qlat,
                   kv_len, scale, olat, pool);
        // o_h = W_vb_h · o_lat_h for every token: one f32 weight matmul per head (kernel table).
        pool.parallel_for(H, [&](int64_t hb, int64_t he, unsigned) {
            for (int64_t h = hb; h < he; ++h) {
                const size_t off = static_cast<size_t>(h) * DV * L;
                if (w.wvb16)
                    ktab.gemm(GGMLType::F16, w.wvb16 + off, L * sizeof(uint16_t), L, DV, &olat[static_cast<size_t>(h) * L],
                              static_cast<int64_t>(H) * L, nullptr, n, out + h * DV, static_cast<int64_t>(H) * DV);
                else
                    ktab.gemm(GGMLType::F32, w.wvb + off, L * sizeof(float), L, DV, &olat[static_cast<size_t>(h) * L],
                              static_cast<int64_t>(H) * L, nullptr, n, out + h * DV, static_cast<int64_t>(H) * DV);
            }
        });
        return;
    }

    // Decompressed: the latent window is expanded per head into K_h = [W_kb_h c, k_pe] and
    // V_h = W_vb_h c (f32), then plain MHA 192/128. Paid once per ubatch.
    static thread_local std::vector<float> lat_buf;
    float* lat = grown(lat_buf, static_cast<size_t>(n_kv) * (L + R));
    pool.parallel_for(n_kv, [&](int64_t b, int64_t e, unsigned) {
        for (int64_t t = b; t < e; ++t)
            ktab.dequantize_row(ct, cache.k_row(il, static_cast<int>(t)), &lat[static_cast<size_t>(t) * (L + R)], L + R);
    });
    std::vector<int> kv_len(n);
    for (int t = 0; t < n; ++t) kv_len[t] = pos0 + t + 1;
    // With attn_kv_b's own rows, the window's latent rows are prepared once (quantised to q8 for
    // Q8_0 weights) for every head's two matmuls.
    const size_t arow = w.kvb ? ktab.gemm_act_size(w.kvb_type, L) : 0;
    static thread_local std::vector<uint8_t> act_buf;
    uint8_t* act = grown(act_buf, arow * static_cast<size_t>(n_kv));
    if (arow > 0)
        pool.parallel_for(n_kv, [&](int64_t b, int64_t e, unsigned) {
            ktab.gemm_act_prep(w.kvb_type, &lat[static_cast<size_t>(b) * (L + R)], L + R, L, e - b,
                               act + static_cast<size_t>(b) * arow);
        });
    pool.parallel_for(H, [&](int64_t hb, int64_t he, unsigned) {
        static thread_local std::vector<float> k_buf, v_buf;
        float* K = grown(k_buf, static_cast<size_t>(n_kv) * DK);
        float* V = grown(v_buf, static_cast<size_t>(n_kv) * DV);
        for (int64_t h = hb; h < he; ++h) {
            // K_h(t)[0, N) = W_kb_h c(t), V_h(t) = W_vb_h c(t): weight matmuls over the window.
            if (w.kvb) {
                const uint8_t* wk = w.kvb + static_cast<size_t>(h) * (N + DV) * w.kvb_ld;
                const uint8_t* wv = wk + static_cast<size_t>(N) * w.kvb_ld;
                const void* a = arow > 0 ? act : nullptr;
                ktab.gemm(w.kvb_type, wk, w.kvb_ld, L, N, lat, L + R, a, n_kv, K, DK);
                ktab.gemm(w.kvb_type, wv, w.kvb_ld, L, DV, lat, L + R, a, n_kv, V, DV);
            } else {
                const float* wk = w.wkb + static_cast<size_t>(h) * N * L;
                const float* wv = w.wvb + static_cast<size_t>(h) * DV * L;
                ktab.gemm(GGMLType::F32, wk, L * sizeof(float), L, N, lat, L + R, nullptr, n_kv, K, DK);
                ktab.gemm(GGMLType::F32, wv, L * sizeof(float), L, DV, lat, L + R, nullptr, n_kv, V, DV);
            }
            for (int t = 0; t < n_kv; ++t) {
                const float* ct_row = &lat[static_cast<size_t>(t) * (L + R)];
                std::copy(ct_row + L, ct_row + L + R, &K[static_cast<size_t>(t) * DK + N]);
            }
            attn(n, n_kv, DK, DV, q + h * DK, static_cast<int64_t>(H) * DK, K, DK * sizeof(float), GGMLType::F32,
                 V, DV * sizeof(float), GGMLType::F32, kv_len.data(), scale, out + h * DV,
                 static_cast<int64_t>(H) * DV);
        }
    });
}

void mqa_attend(const kernels::KernelTable& kt, bool flash, const uint8_t* K, size_t ldk, GGMLType type, int64_t M,
                int n_kv, int Dk, int Dv, const float* Q, const int* kv_len, float scale, float* O, ThreadPool& pool) {
    const int chunks = flash ? split_chunks(M, n_kv, Dv) : 1;
    if (chunks > 1) {  // TG: few query rows, long KV: flash-decoding over KV chunks
        attend_split(kt, chunks, M, M, n_kv, Dk, Dv, Q, Dk, K, ldk, type, K, ldk, type, kv_len, scale, O, Dv, pool);
        return;
    }
    // PP: blocks of rows; with the causal mask later rows see more KV, so the blocks are handed out
    // zig-zag (first, last, second, second-to-last, ...) and each thread's contiguous share of
    // the work items mixes short and long rows.
    const AttnFn attn = attn_kernel(kt, flash);
    // >= 4 blocks when M >= 64 (>= 32 where blocks may be 8 rows); up to 128 rows at avx512 (its
    // O superblock, whose rows share each packed K tile: 128 since 2026-12-06, PP f16 @ 4K 1.02-1.13x
    // and q8_0 1.04x against 64) and amx (the rows that share one packed V tile there:
    // kernels/amx/flash_attn.cpp), 64 at avx2. At least 16 rows where the kernels have a 16-row path: q8
    // caches at avx2/avx512 (the query rows as vector lanes) and every cache at amx (16-row tile
    // blocks). With 8-row blocks a TG with 16 heads below the split's 1024 rows, or 2-3 tokens
    // of 16 heads, went through the general path, which is slow for 8 rows: Zen 5, 2 threads,
    // depth 900, avx512 (latte-attn-ab): 16 heads q8_KV 0.043 -> 0.039 ms, q8_0 0.093 -> 0.074;
    // 32 rows q8_KV 0.148 -> 0.057, q8_0 0.183 -> 0.073; 48 rows 0.128 -> 0.090 / 0.184 -> 0.146;
    // avx2 q8_0 32 rows 0.237 -> 0.166. Float caches at avx2 keep 8 (16 heads f16: 0.226 ->
    // 0.315 ms as one 16-row block on one thread). The grouping depends on M, the level and the
    // type, never on the thread count.
    const bool q8 = type == GGMLType::Q8_0 || type == GGMLType::Q8_KV;
    const bool rows16 = kt.isa == kernels::Isa::Amx ||
                        (q8 && (kt.isa == kernels::Isa::Avx2 || kt.isa == kernels::Isa::Avx512));
    const int64_t rb_max = kt.isa == kernels::Isa::Amx || kt.isa == kernels::Isa::Avx512 ? 128 : 64;
    const int64_t rb = std::clamp<int64_t>(M / 4 / 8 * 8, rows16 ? 16 : 8, rb_max);
    const int64_t nblk = (M + rb - 1) / rb;
    // Few blocks over a deep cache (a short prompt after a long context: 32 tokens × 16 heads are 4
    // amx blocks) would leave most of a large pool idle: the KV length is split too, as for TG, so
    // there are at least kPPMinItems work items. Decided from (M, n_kv) alone, like the TG split.
    if (flash && nblk < kPPMinItems) {
        const int c = kv_chunks(M, n_kv, Dv, (kPPMinItems + nblk - 1) / nblk);
        if (c > 1) {
            attend_split(kt, c, rb, M, n_kv, Dk, Dv, Q, Dk, K, ldk, type, K, ldk, type, kv_len, scale, O, Dv, pool);
            return;
        }
    }
    pool.parallel_for(nblk, [&](int64_t wb, int64_t we, unsigned) {
        for (int64_t w = wb; w < we; ++w) {
            const int64_t blk = (w % 2 == 0) ? w / 2 : nblk - 1 - w / 2;
            const int64_t b = blk * rb, e = std::min(M, b + rb);
            attn(static_cast<int>(e - b), n_kv, Dk, Dv, Q + b * Dk, Dk, K, ldk, type, K, ldk, type, kv_len + b, scale,
                 O + b * Dv, Dv);
        }
    });
}

}  // namespace latte

#include "mla_attention.h"

#include <algorithm>
#include <vector>

#include "kernels/scalar/flash_attn.h"
#include "latte/error.h"

namespace latte {
namespace {

float dotf(const float* a, const float* b, int n) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
    float s = 0.0f;
    for (; i < n; ++i) s += a[i] * b[i];
    return s + ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

// y[r] = W[r] . x for `rows` rows of length `cols`.
void matvec(const float* W, int rows, int cols, const float* x, float* y) {
    for (int r = 0; r < rows; ++r) y[r] = dotf(W + static_cast<size_t>(r) * cols, x, cols);
}

using AttnFn = void (*)(int, int, int, int, const float*, int64_t, const void*, size_t, GGMLType, const void*, size_t,
                        GGMLType, const int*, float, float*, int64_t);

AttnFn attn_kernel(bool flash) { return flash ? kernels::scalar::attn_flash : kernels::scalar::attn_plain; }

}  // namespace

void mla_store(KVCache& cache, int il, int pos0, int n, const float* c, const float* kpe, const MlaWeights& w,
               ThreadPool& pool) {
    const MlaDims& d = cache.dims();
    const int L = d.kv_lora, R = d.n_rot;
    if (pos0 < 0 || pos0 + n > cache.n_ctx()) throw Error("KV cache: positions past the context size");
    if (!cache.full()) {
        pool.parallel_for(n, [&](int64_t b, int64_t e, unsigned) {
            std::vector<float> row(static_cast<size_t>(L + R));
            for (int64_t t = b; t < e; ++t) {
                std::copy(c + t * L, c + (t + 1) * L, row.begin());
                std::copy(kpe + t * R, kpe + (t + 1) * R, row.begin() + L);
                quantize_row(cache.type(), row.data(), cache.k_row(il, static_cast<int>(pos0 + t)), L + R);
            }
        });
        return;
    }
    const int H = d.n_head, DK = d.d_qk(), DV = d.d_v, N = d.d_nope;
    pool.parallel_for(n, [&](int64_t b, int64_t e, unsigned) {
        std::vector<float> krow(static_cast<size_t>(H) * DK), vrow(static_cast<size_t>(H) * DV);
        for (int64_t t = b; t < e; ++t) {
            for (int h = 0; h < H; ++h) {
                matvec(w.wkb + static_cast<size_t>(h) * N * L, N, L, c + t * L, &krow[static_cast<size_t>(h) * DK]);
                std::copy(kpe + t * R, kpe + (t + 1) * R, krow.begin() + static_cast<size_t>(h) * DK + N);
                matvec(w.wvb + static_cast<size_t>(h) * DV * L, DV, L, c + t * L, &vrow[static_cast<size_t>(h) * DV]);
            }
            quantize_row(cache.type(), krow.data(), cache.k_row(il, static_cast<int>(pos0 + t)), H * DK);
            quantize_row(cache.type(), vrow.data(), cache.v_row(il, static_cast<int>(pos0 + t)), H * DV);
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
    const AttnFn attn = attn_kernel(flash);
    const GGMLType ct = cache.type();

    if (path == MlaPath::Full) {
        // Plain MHA per head: K_h / V_h are slices of the full rows at a block-aligned offset.
        const size_t koff = row_bytes(ct, static_cast<int64_t>(DK)), voff = row_bytes(ct, static_cast<int64_t>(DV));
        std::vector<int> kv_len(n);
        for (int t = 0; t < n; ++t) kv_len[t] = pos0 + t + 1;
        pool.parallel_for(H, [&](int64_t hb, int64_t he, unsigned) {
            for (int64_t h = hb; h < he; ++h)
                attn(n, n_kv, DK, DV, q + h * DK, static_cast<int64_t>(H) * DK, cache.k_row(il, 0) + h * koff,
                     cache.k_row_bytes(), ct, cache.v_row(il, 0) + h * voff, cache.v_row_bytes(), ct, kv_len.data(),
                     scale, out + h * DV, static_cast<int64_t>(H) * DV);
        });
        return;
    }

    if (path == MlaPath::Absorbed) {
        // MQA with one KV head: row (t, h) of the query is [W_kb_hᵀ q_nope, q_pe] (576); K is the
        // latent row, V its first kv_lora values. Every head shares each KV row.
        const int DL = L + R;
        const int64_t M = static_cast<int64_t>(n) * H;
        std::vector<float> qlat(static_cast<size_t>(M) * DL), olat(static_cast<size_t>(M) * L);
        std::vector<int> kv_len(static_cast<size_t>(M));
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
        pool.parallel_for(M, [&](int64_t b, int64_t e, unsigned) {
            attn(static_cast<int>(e - b), n_kv, DL, L, &qlat[static_cast<size_t>(b) * DL], DL, cache.k_row(il, 0),
                 cache.k_row_bytes(), ct, cache.k_row(il, 0), cache.k_row_bytes(), ct, &kv_len[static_cast<size_t>(b)],
                 scale, &olat[static_cast<size_t>(b) * L], L);
        });
        pool.parallel_for(M, [&](int64_t b, int64_t e, unsigned) {
            for (int64_t r = b; r < e; ++r) {
                const int64_t t = r / H, h = r % H;
                matvec(w.wvb + static_cast<size_t>(h) * DV * L, DV, L, &olat[static_cast<size_t>(r) * L],
                       out + (t * H + h) * DV);
            }
        });
        return;
    }

    // Decompressed: the latent window is expanded per head into K_h = [W_kb_h c, k_pe] and
    // V_h = W_vb_h c (f32), then plain MHA 192/128. Paid once per ubatch.
    std::vector<float> lat(static_cast<size_t>(n_kv) * (L + R));
    pool.parallel_for(n_kv, [&](int64_t b, int64_t e, unsigned) {
        for (int64_t t = b; t < e; ++t)
            dequantize_row(ct, cache.k_row(il, static_cast<int>(t)), &lat[static_cast<size_t>(t) * (L + R)], L + R);
    });
    std::vector<int> kv_len(n);
    for (int t = 0; t < n; ++t) kv_len[t] = pos0 + t + 1;
    pool.parallel_for(H, [&](int64_t hb, int64_t he, unsigned) {
        std::vector<float> K(static_cast<size_t>(n_kv) * DK), V(static_cast<size_t>(n_kv) * DV);
        for (int64_t h = hb; h < he; ++h) {
            const float* wk = w.wkb + static_cast<size_t>(h) * N * L;
            const float* wv = w.wvb + static_cast<size_t>(h) * DV * L;
            for (int t = 0; t < n_kv; ++t) {
                const float* ct_row = &lat[static_cast<size_t>(t) * (L + R)];
                matvec(wk, N, L, ct_row, &K[static_cast<size_t>(t) * DK]);
                std::copy(ct_row + L, ct_row + L + R, &K[static_cast<size_t>(t) * DK + N]);
                matvec(wv, DV, L, ct_row, &V[static_cast<size_t>(t) * DV]);
            }
            attn(n, n_kv, DK, DV, q + h * DK, static_cast<int64_t>(H) * DK, K.data(), DK * sizeof(float), GGMLType::F32,
                 V.data(), DV * sizeof(float), GGMLType::F32, kv_len.data(), scale, out + h * DV,
                 static_cast<int64_t>(H) * DV);
        }
    });
}

}  // namespace latte

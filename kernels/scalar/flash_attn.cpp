#include "kernels/scalar/flash_attn.h"
#include "kernels/scalar/dot.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace latte::kernels::scalar {
namespace {

float dot(const float* a, const float* b, int n) { return kernels::scalar::dot_f32(a, b, n); }

// Rows [j0, j0+n) of a typed matrix as f32 into dst (n rows of d).
void load_rows(const void* base, size_t ld, GGMLType t, int j0, int n, int d, float* dst) {
    const auto* p = static_cast<const uint8_t*>(base);
    for (int j = 0; j < n; ++j) dequantize_row(t, p + static_cast<size_t>(j0 + j) * ld, dst + static_cast<size_t>(j) * d, d);
}

}  // namespace

void attn_plain(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale,
                float* O, int64_t ldo) {
    int nmax = 0;
    for (int i = 0; i < M; ++i) nmax = std::max(nmax, std::min(kv_len[i], N));
    std::vector<float> k(static_cast<size_t>(nmax) * Dk), v(static_cast<size_t>(nmax) * Dv), s(nmax);
    load_rows(K, ldk, kt, 0, nmax, Dk, k.data());
    load_rows(V, ldv, vt, 0, nmax, Dv, v.data());
    for (int i = 0; i < M; ++i) {
        const int n = std::min(kv_len[i], N);
        const float* q = Q + i * ldq;
        float* o = O + i * ldo;
        float mx = -std::numeric_limits<float>::infinity();
        for (int j = 0; j < n; ++j) {
            s[j] = scale * dot(q, &k[static_cast<size_t>(j) * Dk], Dk);
            mx = std::max(mx, s[j]);
        }
        float sum = 0.0f;
        for (int j = 0; j < n; ++j) {
            s[j] = std::exp(s[j] - mx);
            sum += s[j];
        }
        const float inv = n > 0 ? 1.0f / sum : 0.0f;
        std::fill(o, o + Dv, 0.0f);
        for (int j = 0; j < n; ++j) {
            const float p = s[j] * inv;
            const float* vr = &v[static_cast<size_t>(j) * Dv];
            for (int d = 0; d < Dv; ++d) o[d] += p * vr[d];
        }
    }
}

namespace {

void flash_core(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk, GGMLType kt,
                const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale, float* O, int64_t ldo,
                float* m_out, float* l_out) {
    int nmax = 0;
    for (int i = 0; i < M; ++i) nmax = std::max(nmax, std::min(kv_len[i], N));
    std::vector<float> kt_buf(static_cast<size_t>(kFlashTile) * Dk), vt_buf(static_cast<size_t>(kFlashTile) * Dv);
    std::vector<float> m(M, -std::numeric_limits<float>::infinity()), l(M, 0.0f), s(kFlashTile);
    for (int i = 0; i < M; ++i) std::fill(O + i * ldo, O + i * ldo + Dv, 0.0f);
    // KV tile outer, query rows inner: each KV tile is converted once and used by every row.
    for (int j0 = 0; j0 < nmax; j0 += kFlashTile) {
        const int nt = std::min(kFlashTile, nmax - j0);
        load_rows(K, ldk, kt, j0, nt, Dk, kt_buf.data());
        load_rows(V, ldv, vt, j0, nt, Dv, vt_buf.data());
        for (int i = 0; i < M; ++i) {
            const int n = std::min(std::min(kv_len[i], N) - j0, nt);  // visible rows of this tile
            if (n <= 0) continue;
            const float* q = Q + i * ldq;
            float* o = O + i * ldo;
            float tmax = -std::numeric_limits<float>::infinity();
            for (int j = 0; j < n; ++j) {
                s[j] = scale * dot(q, &kt_buf[static_cast<size_t>(j) * Dk], Dk);
                tmax = std::max(tmax, s[j]);
            }
            const float mnew = std::max(m[i], tmax);
            const float corr = std::exp(m[i] - mnew);  // 0 on the first visible tile
            float tsum = 0.0f;
            for (int j = 0; j < n; ++j) {
                s[j] = std::exp(s[j] - mnew);
                tsum += s[j];
            }
            l[i] = l[i] * corr + tsum;
            m[i] = mnew;
            for (int d = 0; d < Dv; ++d) o[d] *= corr;
            for (int j = 0; j < n; ++j) {
                const float p = s[j];
                const float* vr = &vt_buf[static_cast<size_t>(j) * Dv];
                for (int d = 0; d < Dv; ++d) o[d] += p * vr[d];
            }
        }
    }
    if (m_out) {
        for (int i = 0; i < M; ++i) {
            m_out[i] = m[i];
            l_out[i] = l[i];
        }
        return;
    }
    for (int i = 0; i < M; ++i) {
        const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
        for (int d = 0; d < Dv; ++d) O[i * ldo + d] *= inv;
    }
}

}  // namespace

void attn_flash(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale,
                float* O, int64_t ldo) {
    flash_core(M, N, Dk, Dv, Q, ldq, K, ldk, kt, V, ldv, vt, kv_len, scale, O, ldo, nullptr, nullptr);
}

void attn_flash_part(int M, int N, int Dk, int Dv, const float* Q, int64_t ldq, const void* K, size_t ldk,
                     GGMLType kt, const void* V, size_t ldv, GGMLType vt, const int* kv_len, float scale,
                     float* O, int64_t ldo, float* m_out, float* l_out) {
    flash_core(M, N, Dk, Dv, Q, ldq, K, ldk, kt, V, ldv, vt, kv_len, scale, O, ldo, m_out, l_out);
}

void attn_combine(int chunks, int Dv, const float* w, const float* part, size_t stride, float* o) {
    bool set = false;
    for (int c = 0; c < chunks; ++c) {
        if (w[c] == 0.0f) continue;
        const float* p = part + static_cast<size_t>(c) * stride;
        for (int d = 0; d < Dv; ++d) {
            const float x = w[c] * p[d];
            o[d] = set ? o[d] + x : x;
        }
        set = true;
    }
    if (!set)
        for (int d = 0; d < Dv; ++d) o[d] = 0.0f;
}

}  // namespace latte::kernels::scalar

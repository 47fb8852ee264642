// Scalar weight matmul: the definition every SIMD level is tested against. Each weight row is
// dequantised to f32 (latte::dequantize_row) and dotted with each token's f32 activation row by
// dotf (8 partial sums, fixed order). No activation quantisation: gemm_act_size is 0.
// Q8_0_R16 / Q4_0_R16 (16-row groups, include/latte/types.h): each group is de-interleaved back to
// 16 Q8_0 / Q4_0 rows (unpack_r16) and computed as that type: the same definition, bit for bit.
// Q4_K_R / Q5_K_R / Q6_K_R (K-quant blocks repacked at load, row by row): dequantize_row unpacks each
// row to its file type (unpack_k) and dequantises that, so the same definition, bit for bit.
#include "kernels/scalar/gemm.h"
#include "kernels/scalar/dot.h"

#include <vector>

namespace latte::kernels::scalar {
namespace {

float dotf(const float* a, const float* b, int64_t n) { return kernels::scalar::dot_f32(a, b, n); }

}  // namespace

size_t gemm_act_size(GGMLType, int64_t) { return 0; }
void gemm_act_prep(GGMLType, const float*, int64_t, int64_t, int64_t, void*) {}

void gemm(GGMLType wt, const void* W, size_t ldw, int64_t n_in, int64_t n_out, const float* X, int64_t ldx,
          const void*, int64_t n_tok, float* Y, int64_t ldy) {
    if (wt == GGMLType::Q8_0_R16 || wt == GGMLType::Q4_0_R16) {
        const GGMLType base = r16_base(wt);
        static thread_local std::vector<uint8_t> grp;
        const size_t gbytes = 16 * row_bytes(base, n_in);
        if (grp.size() < gbytes) grp.resize(gbytes);
        for (int64_t g = 0; g < n_out / 16; ++g) {
            unpack_r16(base, static_cast<const uint8_t*>(W) + static_cast<size_t>(g) * 16 * ldw, n_in, 16, grp.data());
            gemm(base, grp.data(), gbytes / 16, n_in, 16, X, ldx, nullptr, n_tok, Y + 16 * g, ldy);
        }
        return;
    }
    constexpr int64_t kRows = 8;  // rows dequantised at a time, each used by every token
    static thread_local std::vector<float> rows;
    if (rows.size() < static_cast<size_t>(kRows * n_in)) rows.resize(static_cast<size_t>(kRows * n_in));
    const uint8_t* w = static_cast<const uint8_t*>(W);
    for (int64_t j0 = 0; j0 < n_out; j0 += kRows) {
        const int64_t nr = n_out - j0 < kRows ? n_out - j0 : kRows;
        for (int64_t r = 0; r < nr; ++r)
            dequantize_row(wt, w + static_cast<size_t>(j0 + r) * ldw, &rows[static_cast<size_t>(r * n_in)], n_in);
        for (int64_t t = 0; t < n_tok; ++t)
            for (int64_t r = 0; r < nr; ++r)
                Y[t * ldy + j0 + r] = dotf(&rows[static_cast<size_t>(r * n_in)], X + t * ldx, n_in);
    }
}

}  // namespace latte::kernels::scalar

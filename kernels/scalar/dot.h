// The reference f32 dot product: 8 independent partial sums (so the compiler can vectorise it
// without -ffast-math) combined in a fixed order. Every scalar kernel and the engine's own small
// f32 products use this one, so they round identically.
#pragma once
#include <cstdint>

namespace latte::kernels::scalar {

inline float dot_f32(const float* a, const float* b, int64_t n) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
    float s = 0.0f;
    for (; i < n; ++i) s += a[i] * b[i];
    return s + ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

}  // namespace latte::kernels::scalar

// The peak rate of one core for the instruction mixes the kernels are built from, so that
// docs/PERFORMANCE.md's "% of peak" figures rest on a measurement of the machine at hand rather
// than on a data sheet (clock, turbo and a VM's scheduling all move it). One thread, register-only
// dependency chains (no memory traffic), enough independent chains to cover each instruction's
// latency:
//   BM_peak/f32_fma/avx2        vfmadd 256-bit, 10 chains                      FLOP/s = 16 per FMA
//   BM_peak/int8_step/avx2      vpsignb + vpmaddubsw + vpmaddwd + vpaddd: the avx2 kernels' step
//                               for 32 int8 products (kernels/avx2/*), 8 chains OP/s = 64 per step
//   BM_peak/f32_fma/avx512      vfmadd 512-bit, 12 chains                      FLOP/s = 32 per FMA
//   BM_peak/int8_vnni/avx512    vpdpbusd 512-bit, 12 chains                    OP/s = 128 per insn
//   BM_peak/bf16_dp/avx512      vdpbf16ps 512-bit, 12 chains                   FLOP/s = 64 per insn
// A level the CPU lacks reports an error line instead of a figure. (The AMX tile peak needs the
// tile state and its own configuration: measured by a probe outside the tree, docs/PERFORMANCE.md
// "AMX weight matmuls".)
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include "kernels/dispatch.h"

// GCC 12's avx512fintrin.h (its _mm*_undefined_* in the intrinsics' masked builtins) trips
// -Wuninitialized when inlined, as in kernels/avx512/: not our code.
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace {

namespace kernels = latte::kernels;

constexpr long kIters = 1 << 20;

// Each function runs kIters × (chains) instructions and returns a value so nothing is dropped.
__attribute__((target("avx2,fma"), noinline)) float run_f32_fma_avx2() {
    __m256 a[10];
    for (int i = 0; i < 10; ++i) a[i] = _mm256_set1_ps(1.0f + static_cast<float>(i) * 1e-7f);
    const __m256 m = _mm256_set1_ps(0.9999999f), c = _mm256_set1_ps(1e-7f);
    for (long i = 0; i < kIters; ++i) {
#pragma GCC unroll 10
        for (int k = 0; k < 10; ++k) a[k] = _mm256_fmadd_ps(a[k], m, c);
    }
    float s = 0.0f;
    for (int i = 0; i < 10; ++i) s += _mm256_cvtss_f32(a[i]);
    return s;
}

__attribute__((target("avx2"), noinline)) float run_int8_step_avx2() {
    __m256i acc[8];
    for (int i = 0; i < 8; ++i) acc[i] = _mm256_set1_epi32(i);
    const __m256i q = _mm256_set1_epi8(3), qa = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
    __m256i k = _mm256_set1_epi8(-5);
    for (long i = 0; i < kIters; ++i) {
        asm volatile("" : "+x"(k));  // a fresh operand per round, as a new K row would be
#pragma GCC unroll 8
        for (int x = 0; x < 8; ++x) {
            const __m256i t = _mm256_madd_epi16(_mm256_maddubs_epi16(qa, _mm256_sign_epi8(k, q)), ones);
            asm("vpaddd %1, %0, %0" : "+x"(acc[x]) : "x"(t));  // one register per chain (GCC 12 spills arrays)
        }
    }
    int s = 0;
    for (int i = 0; i < 8; ++i) s += _mm256_cvtsi256_si32(acc[i]);
    return static_cast<float>(s);
}

__attribute__((target("avx512f"), noinline)) float run_f32_fma_avx512() {
    __m512 a[12];
    for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(1.0f + static_cast<float>(i) * 1e-7f);
    const __m512 m = _mm512_set1_ps(0.9999999f), c = _mm512_set1_ps(1e-7f);
    for (long i = 0; i < kIters; ++i) {
#pragma GCC unroll 12
        for (int k = 0; k < 12; ++k) a[k] = _mm512_fmadd_ps(a[k], m, c);
    }
    float s = 0.0f;
    for (int i = 0; i < 12; ++i) s += _mm512_cvtss_f32(a[i]);
    return s;
}

__attribute__((target("avx512f,avx512vnni"), noinline)) float run_int8_vnni_avx512() {
    __m512i acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_epi32(i);
    const __m512i u = _mm512_set1_epi8(3), s8 = _mm512_set1_epi8(-5);
    for (long i = 0; i < kIters; ++i) {
#pragma GCC unroll 12
        for (int k = 0; k < 12; ++k) acc[k] = _mm512_dpbusd_epi32(acc[k], u, s8);
    }
    int s = 0;
    for (int i = 0; i < 12; ++i) s += _mm_cvtsi128_si32(_mm512_castsi512_si128(acc[i]));
    return static_cast<float>(s);
}

__attribute__((target("avx512f,avx512bf16"), noinline)) float run_bf16_dp_avx512() {
    __m512 acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
    const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.25f));
    for (long i = 0; i < kIters; ++i) {
#pragma GCC unroll 12
        for (int k = 0; k < 12; ++k) acc[k] = _mm512_dpbf16_ps(acc[k], a, a);
    }
    float s = 0.0f;
    for (int i = 0; i < 12; ++i) s += _mm512_cvtss_f32(acc[i]);
    return s;
}

void peak(benchmark::State& state, kernels::Isa need, float (*fn)(), double ops_per_round) {
    if (!kernels::isa_available(need)) {
        state.SkipWithError("kernel level not available on this CPU");
        return;
    }
    for (auto _ : state) benchmark::DoNotOptimize(fn());
    state.counters["ops/s"] = benchmark::Counter(ops_per_round * kIters * static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate);
}

void register_all() {
    using kernels::Isa;
    struct P {
        const char* name;
        Isa isa;
        float (*fn)();
        double ops;  // per round of the chains
    };
    const P ps[] = {{"BM_peak/f32_fma/avx2", Isa::Avx2, run_f32_fma_avx2, 10.0 * 16},
                    {"BM_peak/int8_step/avx2", Isa::Avx2, run_int8_step_avx2, 8.0 * 64},
                    {"BM_peak/f32_fma/avx512", Isa::Avx512, run_f32_fma_avx512, 12.0 * 32},
                    {"BM_peak/int8_vnni/avx512", Isa::Avx512, run_int8_vnni_avx512, 12.0 * 128},
                    {"BM_peak/bf16_dp/avx512", Isa::Avx512, run_bf16_dp_avx512, 12.0 * 64}};
    for (const P& p : ps)
        benchmark::RegisterBenchmark(p.name, [p](benchmark::State& st) { peak(st, p.isa, p.fn, p.ops); })
            ->Unit(benchmark::kMillisecond);
}

const int registered = (register_all(), 0);

}  // namespace

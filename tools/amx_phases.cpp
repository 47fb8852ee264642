// latte-amx-phases / latte-amx-phases-proxy: where the amx int8 attention kernel's time goes, per
// phase, for TG as the engine's split calls it (the query quantised and its Qᵀ tiles packed once,
// then one attn_flash_part_q call per 512-row KV chunk), on one thread. A developer's tool, not
// installed.
//
//   latte-amx-phases       [M] [N] [rounds] [VARIANT ...]   real tiles (an AMX CPU); also times
//                                                            avx512's kernel on the same calls
//   latte-amx-phases-proxy [M] [N] [rounds] [VARIANT ...]   any AVX-512 + VBMI CPU: the tile
//                                                            operations run emulated for one call
//                                                            (so every buffer holds real values),
//                                                            then as no-ops: the vector phases alone
//   M query rows (heads; default 128, more than 16: one block goes to avx512), N KV rows (8192),
//   rounds (50). VARIANT: NAME=VALUE[,NAME=VALUE...] set in the environment for that variant's
//   calls (e.g. LATTE_AMX_PAIR=0), or "-" for none. The variants are timed in turns, each round
//   in a rotated order; per variant: the median time of a TG call, the median per-round ratio to
//   the first variant, and the TSC ticks per chunk call of each phase (kernels/amx/flash_attn.cpp's
//   LATTE_AMX_PHASE marks: setup, K copy + V pack, Sᵀ tiles, to_p, P·V tiles, O update, write-out).
//   Each call is told the next chunk's rows (QuantQuery::next_k), as the split tells it, unless the
//   variant sets LATTE_SPLIT_PREFETCH=0. LATTE_PHASES_COPIES=n (environment, default 1) keeps n
//   copies of the KV rows and takes the next copy each TG call: with n · 4.6 MiB (N = 8192) past
//   the last-level cache, every call reads its rows from memory, as the engine's TG does when the
//   weights of the other layers have gone through the caches in between.
//
// It compiles kernels/amx/flash_attn.cpp again into a namespace of its own with the phase marks
// defined, as tests/test_amx_attn_emulated.cpp does with the emulated tiles.
#include <x86intrin.h>

#include <cstdint>

namespace latte_amx_phases {
inline unsigned long long g_ticks[8];
inline unsigned long long g_last;
inline void mark(int p) {
    const unsigned long long t = __rdtsc();
    if (p >= 0) g_ticks[p] += t - g_last;
    g_last = t;
}
}  // namespace latte_amx_phases
#define LATTE_AMX_PHASE(p) ::latte_amx_phases::mark(p)

#if defined(LATTE_AMX_PROXY)
#define LATTE_AMX_EMULATE 1
#define LATTE_AMX_NS amx_phases_proxy
#include "kernels/amx/tile.h"
namespace latte_amx_phases {
inline bool g_emulate = true;  // the first call's tiles run emulated, every later call's are no-ops
}
#undef LATTE_TILE_LOAD
#undef LATTE_TILE_STORE
#undef LATTE_TILE_ZERO
#undef LATTE_TDPBF16PS
#undef LATTE_TDPBSSD
#undef LATTE_TDPBUSD
#define LATTE_TILE_LOAD(t, base, stride) \
    do { if (::latte_amx_phases::g_emulate) emu_load(t, base, static_cast<long>(stride)); } while (0)
#define LATTE_TILE_STORE(t, base, stride) \
    do { if (::latte_amx_phases::g_emulate) emu_store(t, base, static_cast<long>(stride)); } while (0)
#define LATTE_TILE_ZERO(t) \
    do { if (::latte_amx_phases::g_emulate) std::memset(emu_tiles().reg[t], 0, 1024); } while (0)
#define LATTE_TDPBF16PS(c, a, b) \
    do { if (::latte_amx_phases::g_emulate) emu_dpbf16ps(c, a, b); } while (0)
#define LATTE_TDPBSSD(c, a, b) \
    do { if (::latte_amx_phases::g_emulate) emu_dpb<false, false>(c, a, b); } while (0)
#define LATTE_TDPBUSD(c, a, b) \
    do { if (::latte_amx_phases::g_emulate) emu_dpb<true, false>(c, a, b); } while (0)
#else
#define LATTE_AMX_NS amx_phases
namespace latte_amx_phases {
inline bool g_emulate = false;
}
#endif
#include "kernels/amx/flash_attn.cpp"
#if defined(LATTE_AMX_PROXY)
namespace kx = latte::kernels::amx_phases_proxy;
#else
namespace kx = latte::kernels::amx_phases;
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/avx512/flash_attn.h"
#include "kernels/dispatch.h"

using latte::GGMLType;

namespace {

// NAME=VALUE[,NAME=VALUE...] into the environment (on) or out of it (off); "-": nothing.
void set_variant(const std::string& v, bool on) {
    if (v == "-") return;
    size_t b = 0;
    while (b < v.size()) {
        size_t e = v.find(',', b);
        if (e == std::string::npos) e = v.size();
        const std::string kv = v.substr(b, e - b);
        const size_t eq = kv.find('=');
        if (eq != std::string::npos) {
            const std::string k = kv.substr(0, eq);
            if (on)
                setenv(k.c_str(), kv.substr(eq + 1).c_str(), 1);
            else
                unsetenv(k.c_str());
        }
        b = e + 1;
    }
}

}  // namespace

int main(int argc, char** argv) {
    const int M = argc > 1 ? std::atoi(argv[1]) : 128, N = argc > 2 ? std::atoi(argv[2]) : 8192;
    const int rounds = argc > 3 ? std::max(1, std::atoi(argv[3])) : 50;
    std::vector<std::string> vars;
    for (int a = 4; a < argc; ++a) vars.emplace_back(argv[a]);
    if (vars.empty()) vars.emplace_back("-");
    constexpr int Dk = 576, Dv = 512, kChunk = 512;
    if (M <= 16 || N < kChunk || N % kChunk != 0) {
        std::fprintf(stderr, "latte-amx-phases: M must be more than 16 (one block goes to avx512) and N a multiple of %d\n",
                     kChunk);
        return 2;
    }
#if defined(LATTE_AMX_PROXY)
    if (!latte::kernels::isa_available(latte::kernels::Isa::Avx512) || !__builtin_cpu_supports("avx512vbmi")) {
        std::fprintf(stderr, "latte-amx-phases-proxy: needs the avx512 level and AVX512-VBMI\n");
        return 1;
    }
#else
    if (!latte::kernels::isa_available(latte::kernels::Isa::Amx)) {
        std::fprintf(stderr, "latte-amx-phases: this CPU (or its OS) does not run the amx level; latte-amx-phases-proxy times the vector phases without it\n");
        return 1;
    }
#endif
    std::mt19937 rng(20261207);
    std::normal_distribution<float> nd;
    std::vector<float> q(static_cast<size_t>(M) * Dk), row(Dk);
    for (auto& x : q) x = nd(rng);
    const size_t ld = latte::row_bytes(GGMLType::Q8_KV, Dk);
    const char* ce = std::getenv("LATTE_PHASES_COPIES");
    const int copies = ce && *ce ? std::max(1, std::atoi(ce)) : 1;
    std::vector<uint8_t> k(ld * N * static_cast<size_t>(copies));
    for (int j = 0; j < N; ++j) {
        for (auto& x : row) x = nd(rng);
        latte::quantize_row(GGMLType::Q8_KV, row.data(), k.data() + ld * j, Dk);
    }
    for (int c = 1; c < copies; ++c) std::copy(k.begin(), k.begin() + static_cast<std::ptrdiff_t>(ld * N), k.begin() + static_cast<std::ptrdiff_t>(ld * N * c));
    int copy = 0;  // the copy the next TG call reads
    const float scale = 1.0f / std::sqrt(192.0f);
    std::vector<int8_t> q8(static_cast<size_t>(M) * Dk);
    std::vector<float> qd(M);
    std::vector<int32_t> qs(M);
    std::vector<uint8_t> qp(static_cast<size_t>((M + 15) / 16 * 16) * Dk);
    kx::attn_quant_q(GGMLType::Q8_KV, GGMLType::Q8_KV, Dk, Dv, M, q.data(), Dk, scale, q8.data(), qd.data(), qs.data());
    kx::attn_pack_q(GGMLType::Q8_KV, GGMLType::Q8_KV, Dk, Dv, M, q8.data(), qp.data());
    const latte::kernels::QuantQuery qq0{q8.data(), qd.data(), qs.data(), qp.data()};
    const int nc = N / kChunk;
    latte::kernels::Buf Obuf;  // 64-byte aligned, as the split's partials
    float* const Op = Obuf.get<float>(static_cast<size_t>(nc) * M * Dv);
    std::vector<float> ml(static_cast<size_t>(nc) * M * 2);

    std::vector<int> len(M, kChunk);
    const auto tg = [&](int chunks, bool amx) {
        const uint8_t* kb = k.data() + ld * N * static_cast<size_t>(copy);
        copy = (copy + 1) % copies;
        const char* pe = std::getenv("LATTE_SPLIT_PREFETCH");
        const bool hint = !(pe && std::strcmp(pe, "0") == 0);
        for (int c = 0; c < chunks; ++c) {
            const uint8_t* kc = kb + ld * kChunk * c;
            latte::kernels::QuantQuery qq = qq0;
            if (hint && c + 1 < chunks) {
                qq.next_k = kc + ld * kChunk;
                qq.next_k_bytes = ld * kChunk;
            }
            float* m = ml.data() + static_cast<size_t>(c) * M * 2;
            (amx ? kx::attn_flash_part_q : latte::kernels::avx512::attn_flash_part_q)(
                M, kChunk, Dk, Dv, q.data(), Dk, kc, ld, GGMLType::Q8_KV, kc, ld, GGMLType::Q8_KV, len.data(), scale,
                Op + static_cast<size_t>(c) * M * Dv, Dv, m, m + M, qq);
        }
    };
    tg(1, true);  // (the proxy: emulated, so every buffer holds real values)
    latte_amx_phases::g_emulate = false;
    tg(nc, true);
    const size_t nv = vars.size();
    std::vector<std::vector<double>> t(nv), ratio(nv);
    std::vector<std::vector<unsigned long long>> ticks(nv, std::vector<unsigned long long>(8, 0));
    std::vector<double> t512;
    for (int r = 0; r < rounds; ++r) {
        std::vector<double> tr(nv);
        for (size_t x = 0; x < nv; ++x) {
            const size_t v = (x + static_cast<size_t>(r)) % nv;
            set_variant(vars[v], true);
            std::fill(std::begin(latte_amx_phases::g_ticks), std::end(latte_amx_phases::g_ticks), 0ULL);
            const auto t0 = std::chrono::steady_clock::now();
            tg(nc, true);
            tr[v] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            for (int p = 0; p < 8; ++p) ticks[v][static_cast<size_t>(p)] += latte_amx_phases::g_ticks[p];
            set_variant(vars[v], false);
        }
#if !defined(LATTE_AMX_PROXY)
        const auto t0 = std::chrono::steady_clock::now();
        tg(nc, false);
        t512.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
#endif
        for (size_t v = 0; v < nv; ++v) {
            t[v].push_back(tr[v]);
            ratio[v].push_back(tr[0] / tr[v]);
        }
    }
#if defined(LATTE_AMX_PROXY)
    std::printf("amx int8 kernel, vector phases only (tile operations no-ops), TG %d rows over %d KV rows: %d chunk calls "
                "of %d rows, 1 thread, %d rounds\n", M, N, nc, kChunk, rounds);
#else
    std::sort(t512.begin(), t512.end());
    std::printf("amx int8 kernel, TG %d rows over %d KV rows: %d chunk calls of %d rows, 1 thread, %d rounds; avx512's "
                "kernel on the same calls: median %.3f ms\n", M, N, nc, kChunk, rounds, t512[t512.size() / 2]);
#endif
    const char* names[8] = {"between", "K copy+V pack", "S tiles", "to_p", "PV tiles", "O update", "write-out", "setup"};
    const int order[8] = {7, 1, 2, 3, 4, 5, 6, 0};
    for (size_t v = 0; v < nv; ++v) {
        std::sort(t[v].begin(), t[v].end());
        std::sort(ratio[v].begin(), ratio[v].end());
        const size_t h = t[v].size() / 2, q1 = t[v].size() / 4, q3 = 3 * t[v].size() / 4;
        std::printf("%-32s median %.3f ms  ratio (first / this) %.3f [%.3f, %.3f]\n", vars[v].c_str(), t[v][h],
                    ratio[v][h], ratio[v][q1], ratio[v][q3]);
        double all = 0;
        for (int p = 0; p < 8; ++p) all += static_cast<double>(ticks[v][static_cast<size_t>(p)]);
        const double calls = static_cast<double>(rounds) * nc;
        std::printf("    TSC ticks per chunk call %.0f:", all / calls);
        for (int p : order)
            std::printf(" %s %.0f (%.1f%%)", names[p], static_cast<double>(ticks[v][static_cast<size_t>(p)]) / calls,
                        100.0 * static_cast<double>(ticks[v][static_cast<size_t>(p)]) / all);
        std::printf("\n");
    }
    return 0;
}

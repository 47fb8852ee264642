#include "mla_cost.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string_view>
#include <tuple>
#include <vector>

namespace latte {
namespace {

// LATTE_MLA_VERBOSE=1: the measured rates and each (n, pos0)'s estimates and choice on stderr.
bool verbose() {
    static const bool v = [] {
        const char* e = std::getenv("LATTE_MLA_VERBOSE");
        return e && *e && std::string_view(e) != "0";
    }();
    return v;
}

// Timed kernels, each run once to warm (scratch buffers, caches), then kRounds rounds that each run
// every kernel once: the best time per kernel. Interleaved so that a slow spell of the machine
// (another tenant, a frequency change) costs one sample of every kernel rather than all of one:
// on a shared 16-core VM, 5 back-to-back samples per kernel still gave one process in five an MQA
// rate at 256 rows of 300 against 515-557 GFLOP/s and a kv_b rate 1.5x the others, which flipped
// pp512 after 2048 to the path 15% slower.
class Timings {
public:
    static constexpr int kRounds = 7;
    int add(std::function<void()> f) {
        fs_.push_back(std::move(f));
        return static_cast<int>(fs_.size()) - 1;
    }
    void run() {
        best_.assign(fs_.size(), 1e30);
        for (auto& f : fs_) f();
        for (int r = 0; r < kRounds; ++r)
            for (size_t i = 0; i < fs_.size(); ++i) {
                const auto t0 = std::chrono::steady_clock::now();
                fs_[i]();
                best_[i] = std::min(best_[i], std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
            }
    }
    double seconds(int i) const { return std::max(best_[static_cast<size_t>(i)], 1e-9); }

private:
    std::vector<std::function<void()>> fs_;
    std::vector<double> best_;
};

MlaRates measure(const kernels::KernelTable& kt, GGMLType ct, GGMLType kvb_type) {
    constexpr int N = 256, DL = 576, L = 512, DK = 192, DV = 128;
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> tmp(static_cast<size_t>(N) * DL);
    for (auto& v : tmp) v = nd(rng);
    const size_t ldk = row_bytes(ct, DL);
    std::vector<uint8_t> K(ldk * N);
    for (int j = 0; j < N; ++j) kt.quantize_row(ct, &tmp[static_cast<size_t>(j) * DL], &K[ldk * j], DL);
    std::vector<float> Q(static_cast<size_t>(256) * DL), O(static_cast<size_t>(256) * L);
    for (auto& v : Q) v = 0.1f * nd(rng);
    std::vector<int> kv_len(256, N);
    Timings t;
    const int mqa_rows[3] = {16, 64, 256}, mha_rows[3] = {1, 8, 64};
    int mqa_id[3], mha_id[3];
    for (int i = 0; i < 3; ++i) {
        const int M = mqa_rows[i];
        mqa_id[i] = t.add([&, M] {
            kt.attn_flash(M, N, DL, L, Q.data(), DL, K.data(), ldk, ct, K.data(), ldk, ct, kv_len.data(), 0.05f,
                          O.data(), L);
        });
    }
    // MHA over decompressed f32 K (192) and V (128).
    const float* Kf = tmp.data();
    const float* Vf = tmp.data() + static_cast<size_t>(N) * DK;
    for (int i = 0; i < 3; ++i) {
        const int M = mha_rows[i];
        mha_id[i] = t.add([&, M] {
            kt.attn_flash(M, N, DK, DV, Q.data(), DK, Kf, DK * sizeof(float), GGMLType::F32, Vf, DV * sizeof(float),
                          GGMLType::F32, kv_len.data(), 0.05f, O.data(), DV);
        });
    }
    // The f32 weight matmul (query absorption, W_vb): 256 rows of 512, 64 tokens.
    constexpr int g_in = 512, g_out = 256, g_tok = 64;
    std::vector<float> Yg(static_cast<size_t>(g_out) * g_tok);
    const int gemm_id = t.add([&] {
        kt.gemm(GGMLType::F32, tmp.data(), g_in * sizeof(float), g_in, g_out, Q.data(), g_in, nullptr, g_tok, Yg.data(),
                g_out);
    });
    // The decompression matmul in attn_kv_b's type: 256 rows of 512 latent values (two heads' W_kb
    // and W_vb rows), 256 cached rows; skipped when the type cannot be made here.
    constexpr int k_in = 512, k_out = 256, k_tok = 256;
    const bool r16 = is_r16(kvb_type);
    const GGMLType base = r16 ? r16_base(kvb_type) : kvb_type;
    std::vector<uint8_t> w, wr, act;
    std::vector<float> Yk;
    int kvb_id = -1;
    if (kvb_type != GGMLType::F32 && type_info(base).convertible && k_in % type_info(base).block_size == 0) {
        const size_t ldw = row_bytes(base, k_in);
        w.resize(ldw * k_out);
        for (int j = 0; j < k_out; ++j) quantize_row(base, &tmp[static_cast<size_t>(j) * k_in], &w[ldw * j], k_in);
        if (r16) {
            wr.resize(ldw * k_out);
            repack_r16(base, w.data(), k_in, k_out, wr.data());
        }
        const size_t arow = kt.gemm_act_size(kvb_type, k_in);
        act.resize(arow * k_tok);
        Yk.resize(static_cast<size_t>(k_out) * k_tok);
        kvb_id = t.add([&, ldw, arow] {
            if (arow > 0) kt.gemm_act_prep(kvb_type, Q.data(), k_in, k_in, k_tok, act.data());
            kt.gemm(kvb_type, r16 ? wr.data() : w.data(), ldw, k_in, k_out, Q.data(), k_in, arow > 0 ? act.data() : nullptr,
                    k_tok, Yk.data(), k_out);
        });
    }
    t.run();
    MlaRates r{};
    for (int i = 0; i < 3; ++i) {
        r.mqa[i] = static_cast<double>(mqa_rows[i]) * N * 2.0 * (DL + L) / t.seconds(mqa_id[i]);
        r.mha[i] = static_cast<double>(mha_rows[i]) * N * 2.0 * (DK + DV) / t.seconds(mha_id[i]);
    }
    r.gemm = 2.0 * g_in * g_out * g_tok / t.seconds(gemm_id);
    if (kvb_id >= 0) r.gemm_kvb = 2.0 * k_in * k_out * k_tok / t.seconds(kvb_id);
    return r;
}

// Rate at `rows` from the three measured points (log-linear between them, clamped outside).
double at_rows(const double v[3], const int pts[3], double rows) {
    if (rows <= pts[0]) return v[0];
    if (rows >= pts[2]) return v[2];
    const int i = rows < pts[1] ? 0 : 1;
    const double f = std::log(rows / pts[i]) / std::log(static_cast<double>(pts[i + 1]) / pts[i]);
    return v[i] + f * (v[i + 1] - v[i]);
}

}  // namespace

MlaRates mla_rates(const kernels::KernelTable& kt, GGMLType ct, GGMLType kvb_type) {
    if (const char* e = std::getenv("LATTE_MLA_RATES"); e && *e) {
        double a = 0, b = 0, c = 0;
        char sep1 = 0, sep2 = 0;
        std::istringstream in(e);
        if (in >> a >> sep1 >> b >> sep2 >> c && a > 0 && b > 0 && c > 0)
            return MlaRates{{a * 1e9, a * 1e9, a * 1e9}, {b * 1e9, b * 1e9, b * 1e9}, c * 1e9};
    }
    static std::mutex mu;
    static std::map<std::tuple<int, uint32_t, uint32_t>, MlaRates> cache;
    std::lock_guard<std::mutex> lock(mu);
    const auto key = std::make_tuple(static_cast<int>(kt.isa), static_cast<uint32_t>(ct), static_cast<uint32_t>(kvb_type));
    auto it = cache.find(key);
    if (it == cache.end()) {
        const auto t0 = std::chrono::steady_clock::now();
        it = cache.emplace(key, measure(kt, ct, kvb_type)).first;
        if (verbose()) {
            std::fprintf(stderr, "latte: mla auto: rates measured in %.1f ms\n",
                         std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
            const MlaRates& r = it->second;
            std::fprintf(stderr,
                         "latte: mla auto rates (%s, cache %s, kv_b %s), GFLOP/s of one thread: mqa %.1f/%.1f/%.1f "
                         "(16/64/256 rows), mha %.1f/%.1f/%.1f (1/8/64 rows), gemm %.1f, kv_b gemm %.1f\n",
                         kernels::isa_name(kt.isa), type_name(ct), type_name(kvb_type), r.mqa[0] / 1e9, r.mqa[1] / 1e9,
                         r.mqa[2] / 1e9, r.mha[0] / 1e9, r.mha[1] / 1e9, r.mha[2] / 1e9, r.gemm / 1e9, r.gemm_kvb / 1e9);
        }
    }
    return it->second;
}

MlaCost mla_cost(const MlaDims& d, int n, int pos0, const MlaRates& r) {
    static const int mqa_pts[3] = {16, 64, 256}, mha_pts[3] = {1, 8, 64};
    const double H = d.n_head, L = d.kv_lora, DL = d.d_latent(), DK = d.d_qk(), DV = d.d_v, NO = d.d_nope;
    const double kv = pos0 + (n + 1) / 2.0, n_kv = pos0 + n;
    MlaCost c;
    c.absorbed_s = n * H * kv * 2.0 * (DL + L) / at_rows(r.mqa, mqa_pts, n * H) + n * H * 2.0 * (NO + DV) * L / r.gemm;
    c.decompressed_s = 2.0 * L * (NO + DV) * H * n_kv / (r.gemm_kvb > 0 ? r.gemm_kvb : r.gemm) + n * H * kv * 2.0 * (DK + DV) / at_rows(r.mha, mha_pts, n);
    return c;
}

MlaPath mla_auto_path(const kernels::KernelTable& kt, GGMLType ct, const MlaDims& d, int n, int pos0,
                      GGMLType kvb_type) {
    const MlaCost c = mla_cost(d, n, pos0, mla_rates(kt, ct, kvb_type));
    const MlaPath p = c.decompressed_s < c.absorbed_s ? MlaPath::Decompressed : MlaPath::Absorbed;
    if (verbose()) {  // each (n, pos0) once
        static std::mutex mu;
        static std::set<std::pair<int, int>> seen;
        std::lock_guard<std::mutex> lock(mu);
        if (seen.insert({n, pos0}).second)
            std::fprintf(stderr, "latte: mla auto: %d tokens after %d: absorbed %.3f ms, decompressed %.3f ms per layer "
                         "(one thread) -> %d\n", n, pos0, c.absorbed_s * 1e3, c.decompressed_s * 1e3,
                         p == MlaPath::Absorbed ? 1 : 2);
    }
    return p;
}

}  // namespace latte

// latte-attn-ab: A/B timing of attention kernel variants, interleaved in one process.
//
// On a shared machine the speed of a core drifts by 2x and more within seconds (other tenants,
// clocks), so variants timed one after another (Google Benchmark runs each benchmark's iterations
// back to back) can not resolve a 10% difference. Here every round times each variant once, in a
// rotated order, and the figure that counts is the per-round ratio to the first variant (paired:
// both saw the same machine), whose median over the rounds is printed with the medians and minima of
// the times.
//
//   latte-attn-ab [--pp|--tg] [--heads H] [--depth D] [--type q8_KV] [--threads T] [--rounds R]
//                 --variant SPEC [--variant SPEC ...]
//   SPEC: comma-separated KEY=VALUE; isa=scalar|avx2|avx512|amx picks the kernel level, every
//   other key is set as an environment variable for that variant's calls (and unset after), e.g.
//   --variant isa=avx512 --variant isa=amx --variant isa=amx,LATTE_AMX_PAIR=0
// The shapes are bench/bench_attention.cpp's (-mla 1 MQA, Dk 576, Dv 512; PP: 512 causal tokens
// after `depth` rows; TG: one token over `depth` rows), through the engine's mqa_attend.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "args.h"
#include "kernels/dispatch.h"
#include "latte/error.h"
#include "mla_attention.h"
#include "threadpool.h"

namespace {

constexpr int kDk = 576, kDv = 512, kPP = 512;

struct Variant {
    std::string spec;
    latte::kernels::Isa isa = latte::kernels::Isa::Avx512;
    std::vector<std::pair<std::string, std::string>> env;
    std::vector<double> ms;
};

[[noreturn]] void usage(const char* msg) {
    std::fprintf(stderr,
                 "latte-attn-ab: %s\nusage: latte-attn-ab [--pp|--tg] [--heads H] [--depth D] [--type T] "
                 "[--threads N] [--rounds R] --variant isa=LEVEL[,KEY=VALUE...] ...\n",
                 msg);
    std::exit(2);
}

Variant parse(const std::string& spec) {
    Variant v;
    v.spec = spec;
    bool have_isa = false;
    size_t i = 0;
    while (i <= spec.size()) {
        const size_t e = std::min(spec.find(',', i), spec.size());
        const std::string kv = spec.substr(i, e - i);
        const size_t eq = kv.find('=');
        if (eq == std::string::npos || eq == 0) usage(("bad variant item '" + kv + "'").c_str());
        const std::string k = kv.substr(0, eq), val = kv.substr(eq + 1);
        if (k == "isa") {
            try {
                v.isa = latte::kernels::parse_isa(val);
            } catch (const latte::Error& e) {
                usage(e.what());
            }
            have_isa = true;
        } else {
            v.env.emplace_back(k, val);
        }
        i = e + 1;
    }
    if (!have_isa) usage("each --variant needs isa=LEVEL");
    if (!latte::kernels::isa_available(v.isa)) usage(("this CPU lacks " + spec).c_str());
    return v;
}

double median(std::vector<double> x) {
    std::sort(x.begin(), x.end());
    const size_t n = x.size();
    return n == 0 ? 0.0 : n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
    bool pp = true;
    int heads = 16, depth = 4096, threads = 2, rounds = 15;
    std::string type = "q8_KV";
    std::vector<Variant> vars;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const auto next = [&]() -> std::string {
            if (i + 1 >= argc) usage(("missing value after " + a).c_str());
            return argv[++i];
        };
        const auto num = [&](int lo, int hi) {
            const std::string s = next();
            char* end = nullptr;
            const long v = std::strtol(s.c_str(), &end, 10);
            if (s.empty() || *end || v < lo || v > hi) usage(("bad value '" + s + "' for " + a).c_str());
            return static_cast<int>(v);
        };
        if (a == "--pp") pp = true;
        else if (a == "--tg") pp = false;
        else if (a == "--heads") heads = num(1, 1024);
        else if (a == "--depth") depth = num(0, 1 << 20);
        else if (a == "--threads") threads = num(1, 1024);
        else if (a == "--rounds") rounds = num(1, 100000);
        else if (a == "--type") type = next();
        else if (a == "--variant") vars.push_back(parse(next()));
        else usage(("unknown argument " + a).c_str());
    }
    if (vars.empty()) usage("no --variant given");
    std::optional<latte::GGMLType> t;
    try {
        t = latte::args::parse_cache_type("--type", type);
    } catch (const latte::args::UsageError& e) {
        usage(e.what.c_str());
    }

    // the cache and the queries (bench_attention.cpp's make())
    const int tokens = pp ? kPP : 1, n_kv = depth + tokens;
    const int64_t M = static_cast<int64_t>(heads) * tokens;
    const size_t ldk = latte::row_bytes(*t, kDk);
    std::vector<uint8_t> cache(ldk * static_cast<size_t>(n_kv));
    std::mt19937 rng(1);
    std::normal_distribution<float> nd;
    std::vector<float> row(kDk), q(static_cast<size_t>(M) * kDk), o(static_cast<size_t>(M) * kDv);
    for (int j = 0; j < n_kv; ++j) {
        for (auto& x : row) x = nd(rng);
        latte::quantize_row(*t, row.data(), cache.data() + ldk * static_cast<size_t>(j), kDk);
    }
    for (auto& x : q) x = nd(rng);
    std::vector<int> kv_len(static_cast<size_t>(M));
    for (int tk = 0; tk < tokens; ++tk)
        for (int h = 0; h < heads; ++h) kv_len[static_cast<size_t>(tk) * heads + h] = depth + tk + 1;
    const float scale = 1.0f / std::sqrt(192.0f);
    latte::ThreadPool pool(static_cast<unsigned>(threads));

    const auto call = [&](Variant& v) {
        for (const auto& [k, val] : v.env) setenv(k.c_str(), val.c_str(), 1);
        latte::mqa_attend(latte::kernels::table_for(v.isa), true, cache.data(), ldk, *t, M, n_kv, kDk, kDv, q.data(),
                          kv_len.data(), scale, o.data(), pool);
        for (const auto& kv : v.env) unsetenv(kv.first.c_str());
    };
    // calls per sample: enough for ~20 ms on the slowest variant (timer and scheduling noise)
    int reps = 1;
    {
        double slowest = 0.0;
        for (auto& v : vars) {
            call(v);  // warm-up (scratch buffers, pages)
            const auto t0 = std::chrono::steady_clock::now();
            call(v);
            slowest = std::max(slowest, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        reps = std::clamp(static_cast<int>(20.0 / std::max(slowest, 1e-3)), 1, 1000);
    }
    const size_t nv = vars.size();
    for (int r = 0; r < rounds; ++r)
        for (size_t k = 0; k < nv; ++k) {
            Variant& v = vars[(k + static_cast<size_t>(r)) % nv];
            const auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < reps; ++i) call(v);
            v.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps);
        }
    std::printf("%s h%d d%d %s, %d threads, %d rounds x %d calls; ratio = median over rounds of (first / this)\n",
                pp ? "PP-512" : "TG", heads, depth, type.c_str(), threads, rounds, reps);
    for (size_t k = 0; k < nv; ++k) {
        std::vector<double> ratio;
        for (int r = 0; r < rounds; ++r) ratio.push_back(vars[0].ms[static_cast<size_t>(r)] / vars[k].ms[static_cast<size_t>(r)]);
        std::vector<double> s = ratio;
        std::sort(s.begin(), s.end());
        std::printf("  %-60s median %8.3f ms  min %8.3f ms  ratio %.3f (quartiles %.3f-%.3f)\n", vars[k].spec.c_str(),
                    median(vars[k].ms), *std::min_element(vars[k].ms.begin(), vars[k].ms.end()), median(ratio),
                    s[s.size() / 4], s[(3 * s.size()) / 4]);
    }
    return 0;
}

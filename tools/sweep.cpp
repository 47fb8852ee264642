// latte-sweep — PP and TG speed against the cache fill, sweep-bench style.
//
//   latte-sweep -m model.gguf -c 4096 -ub 512 -n 128 -t 16 --plot sweep.svg -o jsonl > run.jsonl
//   latte-sweep --plot-from a.jsonl,b.jsonl --label "mla 1" --label "mla 3" --plot both.svg
//
// From an empty cache, repeatedly: generate N tokens at the current fill N_KV (timed, then dropped
// from the cache), then decode one ubatch of PP prompt tokens (timed; they stay), until the context
// is full. One row per step on stdout (markdown table or JSON lines); --plot draws both speeds
// against N_KV as an SVG. Exit codes: 0 ok, 1 model/context/I-O error, 2 bad command line.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "args.h"
#include "latte/latte.h"
#include "plot.h"

namespace {

constexpr const char* kProg = "latte-sweep";
using latte::args::UsageError;
using latte::args::quoted;

using latte::args::RunError;

struct Options {
    std::string model;
    uint32_t n_ctx = 4096, n_ubatch = 512, n_threads = 0, n_threads_batch = 0;
    int n_gen = -1;  // -1: n_ubatch / 4 (sweep-bench's default)
    latte::MlaMode mla = latte::MlaMode::Auto;
    std::string mla_text = "auto";  // as given
    bool flash_attn = true;
    latte::GGMLType cache_type = latte::GGMLType::F16;
    std::string plot, title;
    std::vector<std::string> plot_from, labels;
    bool jsonl = false, help = false;
};

using Flag = latte::args::Flag<Options>;
constexpr uint32_t kMax = 1u << 30;

const std::vector<Flag>& flags() {
    static const std::vector<Flag> table = {
        {"-m", "--model", "FILE", "model file (GGUF, deepseek2); required unless --plot-from", nullptr,
         [](Options& o, std::string_view, std::string_view v) { o.model = std::string(v); }},
        {"-c", "--ctx-size", "N", "context size: the sweep runs until the cache holds N tokens", "4096",
         [](Options& o, std::string_view f, std::string_view v) { o.n_ctx = latte::args::parse_int<uint32_t>(f, v, 1, kMax, "an integer >= 1"); }},
        {"-ub", "--ubatch-size", "N", "PP tokens per step (one forward pass)", "512",
         [](Options& o, std::string_view f, std::string_view v) { o.n_ubatch = latte::args::parse_int<uint32_t>(f, v, 1, kMax, "an integer >= 1"); }},
        {"-n", "--n-predict", "N", "TG tokens per step", "ubatch / 4",
         [](Options& o, std::string_view f, std::string_view v) { o.n_gen = latte::args::parse_int<int>(f, v, 0, 1 << 30, "an integer >= 0"); }},
        {"-t", "--threads", "N", "threads; 0 = the machine's physical cores", "0",
         [](Options& o, std::string_view f, std::string_view v) { o.n_threads = latte::args::parse_int<uint32_t>(f, v, 0, 1024, "an integer in 0..1024"); }},
        {"-tb", "--threads-batch", "N", "threads for the prompt ubatches (llama.cpp's -tb); 0 = as -t", "0",
         [](Options& o, std::string_view f, std::string_view v) { o.n_threads_batch = latte::args::parse_int<uint32_t>(f, v, 0, 1024, "an integer in 0..1024"); }},
        {"-mla", "--mla-use", "MODE", "MLA mode (see latte-cli --help)", "auto",
         [](Options& o, std::string_view f, std::string_view v) {
             try {
                 o.mla = latte::parse_mla_mode(std::string(v));
                 o.mla_text = std::string(v);
             } catch (const latte::Error& e) {
                 std::string why = e.what();  // the library's message lists the modes it accepts
                 const size_t p = why.find("': ");
                 if (p != std::string::npos) why = why.substr(p + 3);
                 throw UsageError{std::string(f) + ": " + quoted(v) + " is not an MLA mode, " + why};
             }
         }},
        {"-fa", "--flash-attn", "on|off", "FlashAttention-style tiled attention", "on",
         [](Options& o, std::string_view f, std::string_view v) { o.flash_attn = latte::args::parse_onoff(f, v); }},
        {"-ctk", "--cache-type-k", "TYPE", "KV cache type: f32, f16, bf16, q8_0, q8_KV", "f16",
         [](Options& o, std::string_view f, std::string_view v) { o.cache_type = latte::args::parse_cache_type(f, v); }},
        {"-o", "--output", "FORMAT", "md (sweep-bench's table) or jsonl (one JSON object per step)", "md",
         [](Options& o, std::string_view f, std::string_view v) {
             if (v != "md" && v != "jsonl") throw UsageError{std::string(f) + ": expected md or jsonl, got " + quoted(v)};
             o.jsonl = v == "jsonl";
         }},
        {nullptr, "--plot", "FILE.svg", "draw PP and TG t/s against N_KV into an SVG file", nullptr,
         [](Options& o, std::string_view, std::string_view v) { o.plot = std::string(v); }},
        {nullptr, "--plot-from", "A.jsonl,...", "overlay saved runs (-o jsonl) in the plot; no -m: plot only", nullptr,
         [](Options& o, std::string_view f, std::string_view v) {
             for (auto& s : latte::args::split_list(f, v)) o.plot_from.push_back(s);
         }},
        {nullptr, "--label", "TEXT", "the legend label of the next --plot-from run (repeatable)", "the file name",
         [](Options& o, std::string_view, std::string_view v) { o.labels.emplace_back(v); }},
        {nullptr, "--title", "TEXT", "the plot's title", "the model file",
         [](Options& o, std::string_view, std::string_view v) { o.title = std::string(v); }},
        {"-h", "--help", nullptr, "print this help and exit", nullptr,
         [](Options& o, std::string_view, std::string_view) { o.help = true; }},
    };
    return table;
}

void print_help(std::FILE* out) {
    std::fprintf(out,
                 "usage: %s -m FILE [-c CTX] [-ub UBATCH] [-n TG] [-t THREADS] [--plot FILE.svg] [-o md|jsonl]\n"
                 "       %s --plot-from A.jsonl,B.jsonl [--label A --label B] --plot FILE.svg\n"
                 "\n"
                 "Fills the KV cache one ubatch at a time and measures prompt processing (PP) and token\n"
                 "generation (TG) speed at each fill N_KV, as sweep-bench does.\n"
                 "\n"
                 "options:\n",
                 kProg, kProg);
    latte::args::print_flags(out, flags());
    std::fprintf(out, "\nexit status: 0 ok, 1 model/context/I-O error, 2 bad command line.\n");
}

Options parse_args(int argc, char** argv) {
    Options o;
    latte::args::parse(argc, argv, flags(), o);
    if (o.help) return o;
    if (o.model.empty() && o.plot_from.empty()) throw UsageError{"missing -m/--model FILE (see --help)"};
    if (o.model.empty() && o.plot.empty()) throw UsageError{"--plot-from without -m needs --plot FILE.svg"};
    if (o.labels.size() > o.plot_from.size())
        throw UsageError{"--label: " + std::to_string(o.labels.size()) + " labels for " +
                         std::to_string(o.plot_from.size()) + " --plot-from runs"};
    if (o.n_gen < 0) o.n_gen = static_cast<int>(std::max<uint32_t>(o.n_ubatch / 4, 1));
    if (!o.model.empty() && o.n_ubatch > o.n_ctx)
        throw UsageError{"-ub " + std::to_string(o.n_ubatch) + " is more than the context (-c " + std::to_string(o.n_ctx) + ")"};
    return o;
}

using Clock = std::chrono::steady_clock;
double secs_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void out(const std::string& s) {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
}

std::vector<latte::plot::SweepPoint> sweep(const Options& o) {
    // The kernel level first: one this CPU lacks (LATTE_ISA) fails before the model is read.
    const std::string isa = latte::kernel_level();
    std::shared_ptr<latte::Model> model;
    try {
        model = latte::Model::load(o.model);
    } catch (const latte::Error& e) {
        std::string msg = e.what();
        if (msg.find(o.model) == std::string::npos) msg = o.model + ": " + msg;
        throw latte::Error(msg);
    }
    latte::ContextParams cp;
    cp.n_ctx = o.n_ctx;
    cp.n_ubatch = o.n_ubatch;
    cp.n_threads = o.n_threads;
    cp.n_threads_batch = o.n_threads_batch;
    cp.mla = o.mla;
    cp.flash_attn = o.flash_attn;
    cp.cache_type = o.cache_type;
    latte::Context ctx(model, cp);
    const int32_t n_vocab = static_cast<int32_t>(model->hparams().n_vocab);
    const int32_t span = std::max<int32_t>(n_vocab - 2, 1);
    const int ub = static_cast<int>(o.n_ubatch), tg = o.n_gen;
    std::fprintf(stderr, "%s: %s\n%s: n_kv_max = %u, n_ubatch = %d, n_gen = %d, flash_attn = %d, mla = %s, type_k = %s, n_threads = %u, n_threads_batch = %u, isa = %s\n",
                 kProg, model->describe().c_str(), kProg, ctx.params().n_ctx, ub, tg, o.flash_attn ? 1 : 0,
                 o.mla_text.c_str(), latte::type_name(o.cache_type), ctx.params().n_threads,
                 ctx.params().n_threads_batch, isa.c_str());

    std::vector<int32_t> batch(static_cast<size_t>(ub));
    auto fill = [&](int salt) {
        for (int i = 0; i < ub; ++i) batch[static_cast<size_t>(i)] = 2 + static_cast<int32_t>((static_cast<int64_t>(i + salt) * 7919) % span);
    };
    // Warm-up (untimed): one ubatch and one generated token.
    fill(0);
    ctx.decode(batch);
    ctx.decode({3});
    ctx.clear();

    if (!o.jsonl) out(latte::plot::table_header());
    std::vector<latte::plot::SweepPoint> points;
    const int n_ctx = static_cast<int>(ctx.params().n_ctx);
    for (int n_kv = 0; n_kv + std::max(ub, tg) <= n_ctx; n_kv += ub) {
        latte::plot::SweepPoint p;
        p.pp = ub;
        p.tg = tg;
        p.n_kv = n_kv;
        // TG at this fill, then drop the generated tokens.
        int32_t tok = 3;
        const auto t_tg = Clock::now();
        for (int i = 0; i < tg; ++i) {
            ctx.decode({tok});
            tok = 2 + (tok * 31 + i) % span;
        }
        p.t_tg = secs_since(t_tg);
        ctx.truncate(static_cast<uint32_t>(n_kv));
        // PP: one ubatch, kept.
        fill(n_kv);
        const auto t_pp = Clock::now();
        ctx.decode(batch);
        p.t_pp = secs_since(t_pp);
        p.s_pp = p.t_pp > 0 ? ub / p.t_pp : 0.0;
        p.s_tg = p.t_tg > 0 ? tg / p.t_tg : 0.0;
        points.push_back(p);
        out(o.jsonl ? latte::plot::to_jsonl(p) + "\n" : latte::plot::table_row(p));
    }
    if (points.empty())
        throw RunError{"the context (-c " + std::to_string(n_ctx) + ") holds no step of -ub " + std::to_string(ub) +
                       " and -n " + std::to_string(tg) + " tokens"};
    return points;
}

std::string basename_of(const std::string& path) {
    const size_t b = path.find_last_of('/');
    return b == std::string::npos ? path : path.substr(b + 1);
}

int run(const Options& o) {
    std::vector<latte::plot::Series> series;
    // Saved runs are read first, so that a bad file fails before a long sweep.
    for (size_t i = 0; i < o.plot_from.size(); ++i) {
        try {
            series.push_back({i < o.labels.size() ? o.labels[i] : latte::plot::label_from_path(o.plot_from[i]),
                              latte::plot::read_jsonl(o.plot_from[i])});
        } catch (const std::runtime_error& e) {
            throw RunError{std::string("--plot-from: ") + e.what()};
        }
    }
    if (!o.model.empty()) {
        std::string label = basename_of(o.model) + ", mla " + o.mla_text + ", " +
                            latte::type_name(o.cache_type);
        series.insert(series.begin(), {label, sweep(o)});
    }
    if (!o.plot.empty()) {
        const std::string title = !o.title.empty() ? o.title
                                  : !o.model.empty() ? "latte-sweep: " + basename_of(o.model)
                                                     : std::string("latte-sweep");
        std::ofstream f(o.plot, std::ios::binary);
        const std::string doc = latte::plot::svg(series, title);
        f << doc;
        f.close();
        if (!f) throw RunError{"--plot: cannot write " + quoted(o.plot)};
        std::fprintf(stderr, "%s: wrote %s (%zu series)\n", kProg, o.plot.c_str(), series.size());
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return latte::args::guarded_main(kProg, [&] {
        Options o = parse_args(argc, argv);
        if (o.help) {
            print_help(stdout);
            return 0;
        }
        return run(o);
    });
}

// latte-bench — prompt-processing and generation throughput, llama-bench style.
//
//   latte-bench -m model.gguf -p 512 -n 128 -pg 512,128 -gp 4096,128 -mla 1,3 -ctk f16,q8_0 -o md
//
// Every value flag takes a comma list; the cross product of the lists is run, each test -r times
// (after one untimed warm-up), and one row per test is written to stdout as it completes
// (markdown by default; csv, json, jsonl). Progress and errors go to stderr. Exit codes: 0 ok,
// 1 model/context error, 2 bad command line (one line `latte-bench: error: ...`).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "args.h"
#include "bench_report.h"
#include "latte/latte.h"

namespace {

constexpr const char* kProg = "latte-bench";
using latte::args::UsageError;
using latte::args::quoted;

struct Test {
    int n_prompt = 0, n_gen = 0, n_depth = 0;
};

struct Options {
    std::vector<std::string> models;
    std::vector<int> n_prompt = {512}, n_gen = {128}, n_depth = {0};
    std::vector<std::pair<int, int>> pg, gp;
    std::vector<int> threads = {0}, ubatch = {512}, batch = {2048};
    std::vector<std::string> mla = {"auto"};  // as given (a number or a name such as "auto")
    std::vector<bool> fa = {true};
    std::vector<std::string> ctk = {"f16"};
    int reps = 5;
    latte::bench::Format format = latte::bench::Format::Markdown;
    bool verbose = false, help = false, profile = false;
    bool repack = true;  // --no-repack: keep Q8_0/Q4_0/K-quant weights in the file's layout (ModelParams::repack)
    bool have_p = false, have_n = false;
};

std::vector<int> int_list(std::string_view f, std::string_view v, int lo, const char* what) {
    std::vector<int> out;
    for (const std::string& s : latte::args::split_list(f, v))
        out.push_back(latte::args::parse_int<int>(f, s, lo, 1 << 30, what));
    return out;
}

std::vector<std::pair<int, int>> pair_list(std::string_view f, std::string_view v, const char* what) {
    // "A,B" or "A,B;C,D" is ambiguous with comma lists: pairs are given by repeating the flag.
    auto p = latte::args::parse_pair(f, v, 1, what);
    return {{p.first, p.second}};
}

// The library knows the modes (latte::parse_mla_mode); its message says which are accepted.
void check_mla(std::string_view f, const std::string& s) {
    try {
        (void)latte::parse_mla_mode(s);
    } catch (const latte::Error& e) {
        std::string why = e.what();
        const size_t p = why.find("': ");
        if (p != std::string::npos) why = why.substr(p + 3);
        throw UsageError{std::string(f) + ": " + quoted(s) + " is not an MLA mode, " + why};
    }
}

using Flag = latte::args::Flag<Options>;

const std::vector<Flag>& flags() {
    static const std::vector<Flag> table = {
        {"-m", "--model", "FILES", "model file(s), comma-separated; required", nullptr,
         [](Options& o, std::string_view f, std::string_view v) {
             for (auto& s : latte::args::split_list(f, v)) o.models.push_back(s);
         }},
        {"-p", "--n-prompt", "N,...", "prompt lengths (pp tests); 0 = none", "512",
         [](Options& o, std::string_view f, std::string_view v) {
             if (!o.have_p) o.n_prompt.clear();
             o.have_p = true;
             for (int x : int_list(f, v, 0, "integers >= 0")) o.n_prompt.push_back(x);
         }},
        {"-n", "--n-gen", "N,...", "tokens to generate (tg tests); 0 = none", "128",
         [](Options& o, std::string_view f, std::string_view v) {
             if (!o.have_n) o.n_gen.clear();
             o.have_n = true;
             for (int x : int_list(f, v, 0, "integers >= 0")) o.n_gen.push_back(x);
         }},
        {nullptr, "-pg", "PP,TG", "a prompt of PP tokens, then TG generated, timed together (repeatable)", nullptr,
         [](Options& o, std::string_view f, std::string_view v) {
             for (auto p : pair_list(f, v, "PP,TG")) o.pg.push_back(p);
         }},
        {nullptr, "-gp", "DEPTH,N", "N generated tokens after DEPTH untimed prompt tokens (repeatable)", nullptr,
         [](Options& o, std::string_view f, std::string_view v) {
             for (auto p : pair_list(f, v, "DEPTH,N")) o.gp.push_back(p);
         }},
        {"-d", "--n-depth", "N,...", "untimed tokens in the cache before each -p/-n/-pg test", "0",
         [](Options& o, std::string_view f, std::string_view v) { o.n_depth = int_list(f, v, 0, "integers >= 0"); }},
        {"-t", "--threads", "N,...", "threads; 0 = the machine's physical cores", "0",
         [](Options& o, std::string_view f, std::string_view v) { o.threads = int_list(f, v, 0, "integers in 0..1024"); }},
        {"-mla", "--mla-use", "MODE,...", "MLA modes (see latte-cli --help)", "auto",
         [](Options& o, std::string_view f, std::string_view v) {
             o.mla.clear();
             for (const std::string& s : latte::args::split_list(f, v)) {
                 check_mla(f, s);
                 o.mla.push_back(s);
             }
         }},
        {"-fa", "--flash-attn", "on|off,...", "FlashAttention-style tiled attention", "on",
         [](Options& o, std::string_view f, std::string_view v) {
             o.fa.clear();
             for (const std::string& s : latte::args::split_list(f, v)) o.fa.push_back(latte::args::parse_onoff(f, s));
         }},
        {"-ctk", "--cache-type-k", "TYPE,...", "KV cache types: f32, f16, bf16, q8_0, q8_KV", "f16",
         [](Options& o, std::string_view f, std::string_view v) {
             o.ctk.clear();
             for (const std::string& s : latte::args::split_list(f, v))
                 o.ctk.push_back(latte::type_name(latte::args::parse_cache_type(f, s)));
         }},
        {"-ub", "--ubatch-size", "N,...", "tokens per forward pass", "512",
         [](Options& o, std::string_view f, std::string_view v) { o.ubatch = int_list(f, v, 1, "integers >= 1"); }},
        {"-b", "--batch-size", "N,...", "tokens per decode call (split into ubatches)", "2048",
         [](Options& o, std::string_view f, std::string_view v) { o.batch = int_list(f, v, 1, "integers >= 1"); }},
        {"-r", "--repetitions", "N", "timed runs per test", "5",
         [](Options& o, std::string_view f, std::string_view v) {
             o.reps = latte::args::parse_int<int>(f, v, 1, 1000000, "an integer >= 1");
         }},
        {"-o", "--output", "FORMAT", "md, csv, json or jsonl", "md",
         [](Options& o, std::string_view f, std::string_view v) {
             try {
                 o.format = latte::bench::parse_format(std::string(v));
             } catch (const std::invalid_argument& e) {
                 throw UsageError{std::string(f) + ": " + e.what()};
             }
         }},
        {nullptr, "--no-repack", nullptr, "keep q8_0/q4_0/K-quant weights in the file's layout (no repacking at load)", "off",
         [](Options& o, std::string_view, std::string_view) { o.repack = false; }},
        {"-v", "--verbose", nullptr, "progress on stderr", "off",
         [](Options& o, std::string_view, std::string_view) { o.verbose = true; }},
        {nullptr, "--profile", nullptr,
         "after each test, where its timed runs spent their time (attention projections, attention, MoE routing, "
         "FFN matmuls, output head, rest) on stderr",
         "off", [](Options& o, std::string_view, std::string_view) { o.profile = true; }},
        {"-h", "--help", nullptr, "print this help and exit", nullptr,
         [](Options& o, std::string_view, std::string_view) { o.help = true; }},
    };
    return table;
}

void print_help(std::FILE* out) {
    std::fprintf(out,
                 "usage: %s -m FILE[,FILE...] [options]\n"
                 "\n"
                 "Measures prompt processing (pp) and token generation (tg) speed of DeepSeek MLA GGUF models,\n"
                 "llama-bench style: every value flag takes a comma-separated list and the cross product is run.\n"
                 "\n"
                 "options:\n",
                 kProg);
    latte::args::print_flags(out, flags());
    std::fprintf(out, "\nexit status: 0 ok, 1 model/context error, 2 bad command line.\n");
}

Options parse_args(int argc, char** argv) {
    Options o;
    latte::args::parse(argc, argv, flags(), o);
    if (o.help) return o;
    if (o.models.empty()) throw UsageError{"missing -m/--model FILE (see --help)"};
    for (int t : o.threads)
        if (t > 1024) throw UsageError{"-t: '" + std::to_string(t) + "' is out of range, expected integers in 0..1024"};
    return o;
}

std::vector<Test> tests_of(const Options& o) {
    std::vector<Test> tests;
    for (int d : o.n_depth) {
        for (int p : o.n_prompt)
            if (p > 0) tests.push_back({p, 0, d});
        for (int n : o.n_gen)
            if (n > 0) tests.push_back({0, n, d});
        for (auto [p, n] : o.pg) tests.push_back({p, n, d});
    }
    for (auto [d, n] : o.gp) tests.push_back({0, n, d});
    return tests;
}

std::vector<int32_t> tokens(int n, int32_t n_vocab, int salt) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    const int32_t span = std::max<int32_t>(n_vocab - 2, 1);
    for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = 2 + static_cast<int32_t>((static_cast<int64_t>(i + salt) * 7919) % span);
    return v;
}

// Phase times summed over decode calls (--profile).
struct Profile {
    uint64_t attn_proj = 0, attn = 0, moe_route = 0, ffn = 0, head = 0, total = 0, tokens = 0;
    void add(const latte::Context::DecodeStats& s) {
        attn_proj += s.ns_attn_proj;
        attn += s.ns_attn;
        moe_route += s.ns_moe_route;
        ffn += s.ns_ffn;
        head += s.ns_head;
        total += s.ns_total;
        tokens += s.tokens;
    }
    // "attn-proj 21.0% attention 30.2% ... (12.34 ms per token)"
    std::string line() const {
        const double tot = static_cast<double>(std::max<uint64_t>(total, 1));
        const uint64_t parts = attn_proj + attn + moe_route + ffn + head;
        const uint64_t rest = total > parts ? total - parts : 0;
        const std::pair<const char*, uint64_t> ph[] = {{"attn-proj", attn_proj}, {"attention", attn}, {"moe-route", moe_route},
                                                       {"ffn", ffn},             {"head", head},        {"rest", rest}};
        std::string s;
        char buf[64];
        for (const auto& [name, ns] : ph) {
            std::snprintf(buf, sizeof buf, "%s%s %.1f%%", s.empty() ? "" : ", ", name, 100.0 * static_cast<double>(ns) / tot);
            s += buf;
        }
        std::snprintf(buf, sizeof buf, " (%.3f ms per token)", static_cast<double>(total) / 1e6 / static_cast<double>(std::max<uint64_t>(tokens, 1)));
        return s + buf;
    }
};

// The paths of the last decode call's ubatches added to `paths` ("1,2"), each once, in order.
void add_paths(const latte::Context& ctx, std::string* paths) {
    if (!paths) return;
    for (int p : ctx.last_paths()) {
        const std::string s = std::to_string(p);
        bool seen = false;
        for (size_t i = 0; i < paths->size(); i += 2) seen = seen || paths->compare(i, 1, s) == 0;
        if (seen) continue;
        if (!paths->empty()) paths->push_back(',');
        paths->append(s);
    }
}

// Decodes `ids` in decode calls of at most n_batch tokens.
void decode_batched(latte::Context& ctx, const std::vector<int32_t>& ids, int n_batch, Profile* prof = nullptr,
                    std::string* paths = nullptr) {
    for (size_t i = 0; i < ids.size(); i += static_cast<size_t>(n_batch)) {
        const size_t end = std::min(ids.size(), i + static_cast<size_t>(n_batch));
        ctx.decode(std::vector<int32_t>(ids.begin() + static_cast<std::ptrdiff_t>(i), ids.begin() + static_cast<std::ptrdiff_t>(end)));
        add_paths(ctx, paths);
        if (prof) prof->add(ctx.last_decode_stats());
    }
}

// One run of a test: the depth (untimed), then the prompt and the generated tokens (timed).
uint64_t run_once(latte::Context& ctx, const Test& t, int n_batch, int32_t n_vocab, latte::bench::Row* r = nullptr,
                  Profile* prof = nullptr) {
    ctx.clear();
    if (t.n_depth > 0) decode_batched(ctx, tokens(t.n_depth, n_vocab, 11), n_batch);
    const auto prompt = tokens(t.n_prompt, n_vocab, 0);
    std::string paths;
    const auto t0 = std::chrono::steady_clock::now();
    if (t.n_prompt > 0) decode_batched(ctx, prompt, n_batch, prof, &paths);
    int32_t tok = 3;
    for (int i = 0; i < t.n_gen; ++i) {
        ctx.decode({tok});
        add_paths(ctx, &paths);
        if (prof) prof->add(ctx.last_decode_stats());
        tok = 2 + (tok * 31 + i) % std::max<int32_t>(n_vocab - 2, 1);
    }
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    if (r && (t.n_prompt > 0 || t.n_gen > 0)) {
        const latte::Context::DecodeStats st = ctx.last_decode_stats();
        const double n = std::max(1u, st.tokens);
        r->weight_bytes_per_token = static_cast<double>(st.weight_bytes) / n;
        r->kv_bytes_per_token = static_cast<double>(st.kv_bytes) / n;
        r->flops_per_token = (st.matmul_flops + st.attn_flops) / n;
        r->mla_paths = paths;
    }
    return static_cast<uint64_t>(ns);
}

std::string model_type(const latte::Model& m) {
    // "deepseek2 8.21M F16": arch, parameter count, the embedding's weight type (from describe()).
    std::string wt;
    const std::string d = m.describe();
    const size_t w = d.find(", weights ");
    if (w != std::string::npos) {
        const size_t b = w + 10, e = d.find(',', b);
        wt = d.substr(b, e == std::string::npos ? std::string::npos : e - b);
        for (char& c : wt) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    std::string params = latte::bench::format_params(m.n_params());
    params.erase(std::remove(params.begin(), params.end(), ' '), params.end());
    return m.hparams().arch + " " + params + (wt.empty() ? "" : " " + wt);
}

void out(const std::string& s) {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
}

int run(const Options& o) {
    const auto tests = tests_of(o);
    if (tests.empty()) throw UsageError{"no tests: every -p and -n is 0 and no -pg/-gp was given"};
    const bool show_ub = o.ubatch != std::vector<int>{512};
    const bool show_b = o.batch != std::vector<int>{2048};
    // The kernel level, then every model, before the first row: a level this CPU lacks or a bad file
    // fails with nothing on stdout.
    const std::string isa = latte::kernel_level();
    std::vector<std::shared_ptr<latte::Model>> models;
    for (const std::string& path : o.models) {
        try {
            latte::ModelParams mp;
            mp.repack = o.repack;
            models.push_back(latte::Model::load(path, mp));
        } catch (const latte::Error& e) {
            std::string msg = e.what();
            if (msg.find(path) == std::string::npos) msg = path + ": " + msg;
            throw latte::Error(msg);
        }
    }
    latte::bench::Writer w(o.format, show_ub, show_b);
    out(w.header());
    for (size_t mi = 0; mi < models.size(); ++mi) {
        const std::string& path = o.models[mi];
        const std::shared_ptr<latte::Model>& model = models[mi];
        const int32_t n_vocab = static_cast<int32_t>(model->hparams().n_vocab);
        for (int threads : o.threads)
            for (const std::string& mla : o.mla)
                for (bool fa : o.fa)
                    for (const std::string& ctk : o.ctk)
                        for (int ub : o.ubatch)
                            for (int b : o.batch)
                                for (const Test& t : tests) {
                                    latte::ContextParams cp;
                                    cp.n_ctx = static_cast<uint32_t>(std::max(1, t.n_depth + t.n_prompt + t.n_gen));
                                    cp.n_ubatch = static_cast<uint32_t>(ub);
                                    cp.n_threads = static_cast<uint32_t>(threads);
                                    cp.mla = latte::parse_mla_mode(mla);
                                    cp.flash_attn = fa;
                                    cp.cache_type = latte::parse_type(ctk);
                                    cp.shared_pool = false;
                                    latte::Context ctx(model, cp);
                                    latte::bench::Row r;
                                    r.model_filename = path;
                                    r.isa = isa;
                                    r.model_type = model_type(*model);
                                    r.model_size = model->file_size();
                                    r.model_n_params = model->n_params();
                                    r.n_batch = b;
                                    r.n_ubatch = ub;
                                    r.n_threads = static_cast<int>(ctx.params().n_threads);
                                    r.type_k = ctk;
                                    r.flash_attn = fa;
                                    r.mla = mla;
                                    r.n_prompt = t.n_prompt;
                                    r.n_gen = t.n_gen;
                                    r.n_depth = t.n_depth;
                                    r.test_time = latte::bench::utc_now_iso8601();
                                    if (o.verbose)
                                        std::fprintf(stderr, "%s: %s, %s, mla %s, %s, %d threads: warm-up\n", kProg,
                                                     path.c_str(), latte::bench::test_name(t.n_prompt, t.n_gen, t.n_depth).c_str(),
                                                     mla.c_str(), ctk.c_str(), r.n_threads);
                                    if (o.verbose) std::fprintf(stderr, "%s: %s\n", kProg, ctx.threads_report().c_str());
                                    run_once(ctx, t, b, n_vocab);  // warm-up
                                    Profile prof;
                                    for (int i = 0; i < o.reps; ++i)
                                        r.samples_ns.push_back(run_once(ctx, t, b, n_vocab, &r, o.profile ? &prof : nullptr));
                                    out(w.row(r));
                                    if (o.profile) {
                                        // as the markdown table: "auto (2)" when the mode chose a path
                                        std::string label = mla;
                                        if (!r.mla_paths.empty() && r.mla_paths != mla) label.append(" (").append(r.mla_paths).append(")");
                                        std::fprintf(stderr, "%s: profile %s, mla %s, %s, %d threads: %s\n", kProg,
                                                     latte::bench::test_name(t.n_prompt, t.n_gen, t.n_depth).c_str(),
                                                     label.c_str(), ctk.c_str(), r.n_threads, prof.line().c_str());
                                    }
                                }
    }
    out(w.footer());
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

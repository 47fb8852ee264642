// latte-cli — run a deepseek2 GGUF model on a prompt, llama.cpp style.
//
//   latte-cli -m model.gguf -p "The quick brown fox" -n 48 --temp 0
//
// stdout carries only the text (the prompt, then each generated piece as it comes); logs, the
// seed and the timing summary go to stderr. Exit codes: 0 ok, 1 model/context/I-O error,
// 2 bad command line (one line `latte-cli: error: ...` on stderr).
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "latte/latte.h"
#include "latte/sampler.h"

namespace {

constexpr const char* kProg = "latte-cli";

// A bad command line: reported as one line, exit 2.
struct UsageError {
    std::string what;
};

// Anything else the CLI itself detects (unreadable prompt file, prompt longer than the context):
// reported as one line, exit 1.
struct RunError {
    std::string what;
};

struct Options {
    std::string model;
    std::string prompt;
    bool have_prompt = false;   // -p given
    std::string prompt_file;    // -f given
    std::vector<int32_t> tokens;
    bool have_tokens = false;   // --tokens given
    int32_t n_predict = 32;
    uint32_t n_threads = 0;
    uint32_t n_ctx = 4096;
    uint32_t n_ubatch = 512;
    latte::MlaMode mla = latte::MlaMode::Hybrid;
    bool flash_attn = true;
    latte::GGMLType cache_type = latte::GGMLType::F16;
    bool have_seed = false;
    uint64_t seed = 0;
    float temp = 0.8f;
    int32_t top_k = 40;
    float top_p = 0.95f;
    float min_p = 0.05f;
    bool verbose = false;
    bool help = false;
    // threads and loading (issue 4)
    std::string cpu_mask, cpu_range;
    std::string numa = "none";
    std::string hugepages = "off";
    bool mlock = false;
    bool no_mmap = false;
    bool populate = false;
};

// ---- value parsers -----------------------------------------------------------------------------

std::string quoted(std::string_view v) { return "'" + std::string(v) + "'"; }

template <class Int>
Int parse_int(std::string_view flag, std::string_view v, Int lo, Int hi, const std::string& expected) {
    Int x{};
    const char* b = v.data();
    const char* e = v.data() + v.size();
    if (!v.empty() && v.front() == '+') ++b;  // from_chars does not take a leading '+'
    auto [ptr, ec] = std::from_chars(b, e, x);
    if (v.empty() || b == e || ec == std::errc::invalid_argument || ptr != e)
        throw UsageError{std::string(flag) + ": expected " + expected + ", got " + quoted(v)};
    if (ec == std::errc::result_out_of_range || x < lo || x > hi)
        throw UsageError{std::string(flag) + ": " + quoted(v) + " is out of range, expected " + expected};
    return x;
}

float parse_float(std::string_view flag, std::string_view v, float lo, float hi, const std::string& expected) {
    float x = 0.0f;
    const char* b = v.data();
    const char* e = v.data() + v.size();
    if (!v.empty() && v.front() == '+') ++b;
    auto [ptr, ec] = std::from_chars(b, e, x, std::chars_format::general);
    if (v.empty() || b == e || ec == std::errc::invalid_argument || ptr != e || !std::isfinite(x))
        throw UsageError{std::string(flag) + ": expected " + expected + ", got " + quoted(v)};
    if (ec == std::errc::result_out_of_range || x < lo || x > hi)
        throw UsageError{std::string(flag) + ": " + quoted(v) + " is out of range, expected " + expected};
    return x;
}

bool parse_onoff(std::string_view flag, std::string_view v) {
    if (v == "on" || v == "1" || v == "true") return true;
    if (v == "off" || v == "0" || v == "false") return false;
    throw UsageError{std::string(flag) + ": expected on|off (or 1|0, true|false), got " + quoted(v)};
}

latte::MlaMode parse_mla(std::string_view flag, std::string_view v) {
    if (v == "0") return latte::MlaMode::Full;
    if (v == "1") return latte::MlaMode::Absorbed;
    if (v == "2") return latte::MlaMode::Decompressed;
    if (v == "3") return latte::MlaMode::Hybrid;
    throw UsageError{std::string(flag) + ": expected one of 0, 1, 2, 3, got " + quoted(v)};
}

latte::GGMLType parse_cache_type(std::string_view flag, std::string_view v) {
    if (v == "f32") return latte::GGMLType::F32;
    if (v == "f16") return latte::GGMLType::F16;
    if (v == "bf16") return latte::GGMLType::BF16;
    if (v == "q8_0") return latte::GGMLType::Q8_0;
    if (v == "q8_KV" || v == "q8_kv") return latte::GGMLType::Q8_KV;
    throw UsageError{std::string(flag) + ": expected one of f32, f16, bf16, q8_0, q8_KV, got " + quoted(v)};
}

std::vector<int32_t> parse_token_list(std::string_view flag, std::string_view v) {
    std::vector<int32_t> ids;
    if (v.empty()) throw UsageError{std::string(flag) + ": expected comma-separated token ids, got ''"};
    size_t pos = 0;
    while (true) {
        const size_t comma = v.find(',', pos);
        std::string_view item = v.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
        while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
        while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
        int32_t id = 0;
        auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
        if (item.empty() || ec == std::errc::invalid_argument || ptr != item.data() + item.size())
            throw UsageError{std::string(flag) + ": expected comma-separated token ids, got " + quoted(item) +
                             " in " + quoted(v)};
        if (ec == std::errc::result_out_of_range || id < 0)
            throw UsageError{std::string(flag) + ": token id " + quoted(item) + " is out of range, expected 0.." +
                             std::to_string(std::numeric_limits<int32_t>::max())};
        ids.push_back(id);
        if (comma == std::string_view::npos) break;
        pos = comma + 1;
    }
    return ids;
}

// ---- the flag table ----------------------------------------------------------------------------

struct Flag {
    const char* shortname;  // may be nullptr
    const char* longname;
    const char* meta;       // nullptr: takes no value
    const char* help;
    const char* def;        // default as shown by --help (nullptr: none)
    std::function<void(Options&, std::string_view flag, std::string_view value)> apply;
};

constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();

const std::vector<Flag>& flags() {
    static const std::vector<Flag> table = {
        {"-m", "--model", "FILE", "model file (GGUF, architecture deepseek2); required", nullptr,
         [](Options& o, std::string_view, std::string_view v) { o.model = std::string(v); }},
        {"-p", "--prompt", "TEXT", "prompt text (BOS is added)", "empty",
         [](Options& o, std::string_view, std::string_view v) { o.prompt = std::string(v); o.have_prompt = true; }},
        {"-f", "--file", "FILE", "read the prompt from FILE (one trailing newline is dropped)", nullptr,
         [](Options& o, std::string_view, std::string_view v) { o.prompt_file = std::string(v); }},
        {nullptr, "--tokens", "IDS", "comma-separated token ids to use as the prompt instead of text", nullptr,
         [](Options& o, std::string_view f, std::string_view v) { o.tokens = parse_token_list(f, v); o.have_tokens = true; }},
        {"-n", "--n-predict", "N", "tokens to generate; -1 = until EOS or the context is full", "32",
         [](Options& o, std::string_view f, std::string_view v) {
             o.n_predict = parse_int<int32_t>(f, v, -1, kI32Max, "an integer >= -1");
         }},
        {"-t", "--threads", "N", "threads; 0 = the machine's physical cores", "0",
         [](Options& o, std::string_view f, std::string_view v) {
             o.n_threads = parse_int<uint32_t>(f, v, 0, 1024, "an integer in 0..1024");
         }},
        {"-c", "--ctx-size", "N", "context size in tokens (KV cache length)", "4096",
         [](Options& o, std::string_view f, std::string_view v) {
             o.n_ctx = parse_int<uint32_t>(f, v, 1, static_cast<uint32_t>(kI32Max), "an integer >= 1");
         }},
        {"-ub", "--ubatch-size", "N", "tokens per forward pass when decoding the prompt", "512",
         [](Options& o, std::string_view f, std::string_view v) {
             o.n_ubatch = parse_int<uint32_t>(f, v, 1, static_cast<uint32_t>(kI32Max), "an integer >= 1");
         }},
        {"-mla", "--mla-use", "MODE",
         "MLA mode: 0 full K/V cache, 1 absorbed latent MQA, 2 decompress per ubatch, 3 hybrid of 1 and 2",
         "3", [](Options& o, std::string_view f, std::string_view v) { o.mla = parse_mla(f, v); }},
        {"-fa", "--flash-attn", "on|off", "FlashAttention-style tiled attention (also 1|0, true|false)", "on",
         [](Options& o, std::string_view f, std::string_view v) { o.flash_attn = parse_onoff(f, v); }},
        {"-ctk", "--cache-type-k", "TYPE", "KV cache element type: f32, f16, bf16, q8_0, q8_KV", "f16",
         [](Options& o, std::string_view f, std::string_view v) { o.cache_type = parse_cache_type(f, v); }},
        {nullptr, "--seed", "S", "sampling seed (unsigned 64-bit)", "random from the clock, printed",
         [](Options& o, std::string_view f, std::string_view v) {
             o.seed = parse_int<uint64_t>(f, v, 0, std::numeric_limits<uint64_t>::max(), "an unsigned integer");
             o.have_seed = true;
         }},
        {nullptr, "--temp", "T", "temperature; 0 = greedy", "0.8",
         [](Options& o, std::string_view f, std::string_view v) {
             o.temp = parse_float(f, v, 0.0f, 1e6f, "a number >= 0");
         }},
        {nullptr, "--top-k", "N", "keep the N most likely tokens; 0 = off", "40",
         [](Options& o, std::string_view f, std::string_view v) {
             o.top_k = parse_int<int32_t>(f, v, 0, kI32Max, "an integer >= 0");
         }},
        {nullptr, "--top-p", "P", "nucleus sampling threshold; 1 = off", "0.95",
         [](Options& o, std::string_view f, std::string_view v) {
             o.top_p = parse_float(f, v, 0.0f, 1.0f, "a number in [0, 1]");
         }},
        {nullptr, "--min-p", "P", "drop tokens below P times the best one's probability; 0 = off", "0.05",
         [](Options& o, std::string_view f, std::string_view v) {
             o.min_p = parse_float(f, v, 0.0f, 1.0f, "a number in [0, 1]");
         }},
        {nullptr, "--cpu-mask", "M", "hex mask of the CPUs to run threads on (e.g. 0xff)", "one per physical core",
         [](Options& o, std::string_view, std::string_view v) { o.cpu_mask = std::string(v); }},
        {nullptr, "--cpu-range", "LIST", "CPUs to run threads on (e.g. 0-7,16-23); with --cpu-mask: both",
         "one per physical core", [](Options& o, std::string_view, std::string_view v) { o.cpu_range = std::string(v); }},
        {nullptr, "--numa", "MODE",
         "distribute (threads over all nodes), isolate (the node we start on), interleave (memory over all "
         "nodes); no-op on one node",
         "off", [](Options& o, std::string_view f, std::string_view v) {
             if (v != "distribute" && v != "isolate" && v != "interleave" && v != "none")
                 throw UsageError{std::string(f) + ": " + quoted(v) + " is not a NUMA mode, expected distribute, isolate, interleave or none"};
             o.numa = std::string(v);
         }},
        {nullptr, "--hugepages", nullptr, "weights on transparent huge pages (read into madvise'd memory)", "off",
         [](Options& o, std::string_view, std::string_view) { o.hugepages = "thp"; }},
        {nullptr, "--hugetlb", nullptr, "weights on reserved huge pages (MAP_HUGETLB; needs vm.nr_hugepages)", "off",
         [](Options& o, std::string_view, std::string_view) { o.hugepages = "hugetlb"; }},
        {nullptr, "--mlock", nullptr, "lock the weights in memory (needs ulimit -l)", "off",
         [](Options& o, std::string_view, std::string_view) { o.mlock = true; }},
        {nullptr, "--no-mmap", nullptr, "read the file into memory instead of mapping it", "off",
         [](Options& o, std::string_view, std::string_view) { o.no_mmap = true; }},
        {nullptr, "--populate", nullptr, "fault every weight page in at load (progress bar on a terminal)", "off",
         [](Options& o, std::string_view, std::string_view) { o.populate = true; }},
        {nullptr, "--verbose", nullptr, "more logging on stderr", "off",
         [](Options& o, std::string_view, std::string_view) { o.verbose = true; }},
        {"-h", "--help", nullptr, "print this help and exit", nullptr,
         [](Options& o, std::string_view, std::string_view) { o.help = true; }},
    };
    return table;
}

void print_help(std::FILE* out) {
    std::fprintf(out,
                 "usage: %s -m FILE [options]\n"
                 "\n"
                 "Runs a DeepSeek MLA (deepseek2) GGUF model on the CPU: decodes the prompt, then samples\n"
                 "and prints tokens. The text goes to stdout, logs and timings to stderr.\n"
                 "\n"
                 "options:\n",
                 kProg);
    for (const Flag& f : flags()) {
        std::string names = f.shortname ? std::string(f.shortname) + ", " + f.longname : std::string("    ") + f.longname;
        if (f.meta) names += std::string(" ") + f.meta;
        std::string help = f.help;
        if (f.def) help += std::string(" (default: ") + f.def + ")";
        std::fprintf(out, "  %-26s %s\n", names.c_str(), help.c_str());
    }
    std::fprintf(out,
                 "\nexit status: 0 ok, 1 model/context error, 2 bad command line.\n"
                 "Ctrl-C stops generation after the current token; the timings are still printed.\n");
}

Options parse_args(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string_view arg = argv[i];
        std::string_view name = arg, inline_value;
        bool has_inline = false;
        if (arg.size() > 2 && arg.substr(0, 2) == "--") {  // --flag=value
            const size_t eq = arg.find('=');
            if (eq != std::string_view::npos) {
                name = arg.substr(0, eq);
                inline_value = arg.substr(eq + 1);
                has_inline = true;
            }
        }
        const Flag* flag = nullptr;
        for (const Flag& f : flags())
            if ((f.shortname && name == f.shortname) || name == f.longname) flag = &f;
        if (!flag) {
            if (arg.empty() || arg.front() != '-' || arg == "-")
                throw UsageError{"unexpected argument " + quoted(arg) + " (flags start with '-'; see --help)"};
            throw UsageError{"unknown flag " + quoted(name) + " (see --help)"};
        }
        if (!flag->meta) {
            if (has_inline) throw UsageError{std::string(name) + " takes no value, got " + quoted(inline_value)};
            flag->apply(o, name, {});
            if (o.help) return o;
            continue;
        }
        std::string_view value;
        if (has_inline) {
            value = inline_value;
        } else {
            if (i + 1 >= argc) throw UsageError{std::string(name) + ": missing value, expected " + flag->meta};
            value = argv[++i];
        }
        flag->apply(o, name, value);
    }
    if (o.model.empty()) throw UsageError{"missing -m/--model FILE (see --help)"};
    if (o.have_tokens && o.have_prompt) throw UsageError{"give either -p/--prompt or --tokens, not both"};
    if (o.have_tokens && !o.prompt_file.empty()) throw UsageError{"give either -f/--file or --tokens, not both"};
    if (o.have_prompt && !o.prompt_file.empty()) throw UsageError{"give either -p/--prompt or -f/--file, not both"};
    return o;
}

std::string read_prompt_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw RunError{"-f: cannot read " + quoted(path) + ": " + std::strerror(errno)};
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) throw RunError{"-f: error reading " + quoted(path)};
    std::string s = ss.str();
    if (!s.empty() && s.back() == '\n') s.pop_back();
    if (!s.empty() && s.back() == '\r') s.pop_back();
    return s;
}

// ---- Ctrl-C ------------------------------------------------------------------------------------

volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void on_sigint(int) { g_interrupted = 1; }

void install_sigint() {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;  // a second Ctrl-C kills as usual
    sigaction(SIGINT, &sa, nullptr);
}

// ---- running -----------------------------------------------------------------------------------

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

const char* mla_name(latte::MlaMode m) {
    switch (m) {
        case latte::MlaMode::Full: return "mla 0 full";
        case latte::MlaMode::Absorbed: return "mla 1 absorbed";
        case latte::MlaMode::Decompressed: return "mla 2 decompressed";
        case latte::MlaMode::Hybrid: return "mla 3 hybrid";
    }
    return "mla ?";
}

const char* cache_type_name(latte::GGMLType t) { return latte::type_name(t); }

void write_out(const std::string& s) {
    if (s.empty()) return;
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
}

double per_second(int n, double ms) { return ms > 0.0 ? 1000.0 * n / ms : 0.0; }

int run(const Options& o) {
    std::string prompt = o.prompt;
    if (!o.prompt_file.empty()) prompt = read_prompt_file(o.prompt_file);

    // Load.
    latte::ModelParams mp;
    mp.verbose = o.verbose;
    mp.use_mmap = !o.no_mmap;
    mp.hugepages = o.hugepages;
    mp.mlock = o.mlock;
    mp.populate = o.populate;
    mp.numa_interleave = o.numa == "interleave";
    const auto t_load = Clock::now();
    std::shared_ptr<latte::Model> model;
    try {
        model = latte::Model::load(o.model, mp);
    } catch (const latte::Error& e) {
        std::string msg = e.what();
        if (msg.find(o.model) == std::string::npos) msg = o.model + ": " + msg;
        throw latte::Error(msg);
    }
    const double load_ms = ms_since(t_load);
    const latte::Tokenizer& tok = model->tokenizer();
    const int32_t n_vocab_logits = static_cast<int32_t>(model->hparams().n_vocab);
    const int32_t n_vocab = std::min(n_vocab_logits, tok.n_vocab());

    // The prompt's tokens.
    std::vector<int32_t> prompt_tokens;
    if (o.have_tokens) {
        for (int32_t id : o.tokens)
            if (id >= n_vocab)
                throw UsageError{"--tokens: token id " + std::to_string(id) + " is out of range, expected 0.." +
                                 std::to_string(n_vocab - 1) + " (the model's vocabulary has " +
                                 std::to_string(n_vocab) + " tokens)"};
        prompt_tokens = o.tokens;
    } else {
        prompt_tokens = tok.encode(prompt, /*add_bos=*/true, /*parse_special=*/true);
        if (prompt_tokens.empty()) {
            if (tok.bos() < 0 || tok.bos() >= n_vocab)
                throw UsageError{"the prompt is empty and the model has no BOS token to start from; give -p TEXT"};
            prompt_tokens.push_back(tok.bos());
        }
    }

    if (prompt_tokens.size() > o.n_ctx)
        throw RunError{"the prompt is " + std::to_string(prompt_tokens.size()) + " tokens, more than the context (-c " +
                       std::to_string(o.n_ctx) + ")"};

    const uint64_t seed = o.have_seed
                              ? o.seed
                              : static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
    std::fprintf(stderr, "model: %s\n", model->describe().c_str());
    std::fprintf(stderr, "load: %s in %.1f ms\n", o.model.c_str(), load_ms);
    if (!o.verbose) std::fprintf(stderr, "%s\n", model->load_report().c_str());  // verbose: printed by load
    std::fprintf(stderr, "seed: %" PRIu64 "\n", seed);

    // Context.
    latte::ContextParams cp;
    cp.n_ctx = o.n_ctx;
    cp.n_ubatch = o.n_ubatch;
    cp.n_threads = o.n_threads;
    cp.mla = o.mla;
    cp.flash_attn = o.flash_attn;
    cp.cache_type = o.cache_type;
    cp.cpu_mask = o.cpu_mask;
    cp.cpu_range = o.cpu_range;
    cp.numa = o.numa;
    latte::Context ctx(model, cp);
    std::fprintf(stderr, "%s\n", ctx.threads_report().c_str());
    const uint32_t n_ctx = ctx.params().n_ctx;
    if (o.verbose) {
        std::fprintf(stderr, "context: n_ctx %u, n_ubatch %u, threads %u, %s, flash-attn %s, cache %s\n", n_ctx,
                     ctx.params().n_ubatch, ctx.params().n_threads, mla_name(ctx.params().mla),
                     ctx.params().flash_attn ? "on" : "off", cache_type_name(ctx.params().cache_type));
        std::fprintf(stderr, "prompt: %zu tokens:", prompt_tokens.size());
        for (int32_t id : prompt_tokens) std::fprintf(stderr, " %d", id);
        std::fprintf(stderr, "\n");
    }

    latte::SamplerParams sp;
    sp.temp = o.temp;
    sp.top_k = o.top_k;
    sp.top_p = o.top_p;
    sp.min_p = o.min_p;
    sp.seed = seed;
    latte::Sampler sampler(sp);

    install_sigint();

    // The prompt text, then the prompt in one decode.
    write_out(o.have_tokens ? tok.decode(prompt_tokens) : prompt);
    const auto t_prompt = Clock::now();
    ctx.decode(prompt_tokens);
    const double prompt_ms = ms_since(t_prompt);

    // Generation.
    int n_generated = 0, n_eval = 0;
    double eval_ms = 0.0;
    const char* stop = nullptr;
    while (o.n_predict < 0 || n_generated < o.n_predict) {
        if (g_interrupted) {
            stop = "interrupted";
            break;
        }
        const int32_t id = sampler.sample(ctx.logits(-1), n_vocab_logits);
        if (id == tok.eos()) {
            stop = "end of text";
            break;
        }
        if (id >= 0 && id < tok.n_vocab()) write_out(tok.token_to_piece(id));
        ++n_generated;
        if (o.n_predict >= 0 && n_generated >= o.n_predict) break;  // no need to run the last token
        if (ctx.n_past() >= n_ctx) {
            stop = "context full";
            break;
        }
        if (g_interrupted) {
            stop = "interrupted";
            break;
        }
        const auto t_eval = Clock::now();
        ctx.decode({id});
        eval_ms += ms_since(t_eval);
        ++n_eval;
    }
    write_out("\n");

    if (stop) std::fprintf(stderr, "[%s after %d generated tokens, %u in the context]\n", stop, n_generated, ctx.n_past());
    const int n_prompt = static_cast<int>(prompt_tokens.size());
    std::fprintf(stderr, "prompt eval: %d tokens, %.2f ms, %.2f tokens/s\n", n_prompt, prompt_ms,
                 per_second(n_prompt, prompt_ms));
    std::fprintf(stderr, "eval: %d tokens, %.2f ms, %.2f tokens/s\n", n_eval, eval_ms, per_second(n_eval, eval_ms));
    std::fprintf(stderr, "load: %.2f ms\n", load_ms);
    std::fprintf(stderr, "KV cache: %" PRIu64 " bytes (%s, %s)\n", static_cast<uint64_t>(ctx.kv_cache_bytes()),
                 cache_type_name(ctx.params().cache_type), mla_name(ctx.params().mla));
    return 0;
}

int fail(int code, const std::string& what) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: %s\n", kProg, what.c_str());
    return code;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        Options o = parse_args(argc, argv);
        if (o.help) {
            print_help(stdout);
            return 0;
        }
        return run(o);
    } catch (const UsageError& e) {
        return fail(2, e.what);
    } catch (const RunError& e) {
        return fail(1, e.what);
    } catch (const latte::Error& e) {
        return fail(1, e.what());
    } catch (const std::bad_alloc&) {
        return fail(1, "out of memory");
    } catch (const std::exception& e) {
        return fail(1, std::string("internal error: ") + e.what());
    } catch (...) {
        return fail(1, "internal error: unknown exception");
    }
}

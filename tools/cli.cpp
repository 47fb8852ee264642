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
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>
#include <unistd.h>  // isatty

#include "latte/latte.h"
#include "latte/sampler.h"
#include "args.h"
#include "chat.h"

namespace {

constexpr const char* kProg = "latte-cli";

// A bad command line: reported as one line, exit 2 (the parser is shared: tools/args.h).
using latte::args::UsageError;

using latte::args::RunError;

struct Options {
    std::string model;
    std::string prompt;
    bool have_prompt = false;   // -p given
    std::string prompt_file;    // -f given
    std::vector<int32_t> tokens;
    bool have_tokens = false;   // --tokens given
    int32_t n_predict = 32;
    uint32_t n_threads = 0;
    uint32_t n_threads_batch = 0;  // -tb: 0 = the same as -t
    uint32_t n_ctx = 4096;      // without -c: 4096, or the model's trained context if smaller
    bool have_ctx = false;
    uint32_t n_ubatch = 512;
    uint32_t n_batch = 2048;    // tokens per decode call for the prompt (split into ubatches)
    std::string isa;            // --isa: forces the kernel level (sets LATTE_ISA)
    latte::MlaMode mla = latte::MlaMode::Auto;
    bool flash_attn = true;
    latte::GGMLType cache_type = latte::GGMLType::F16;
    std::optional<latte::GGMLType> cache_type_v;  // -ctv
    bool have_seed = false;
    uint64_t seed = 0;
    float temp = 0.8f;
    int32_t top_k = 40;
    float top_p = 0.95f;
    float min_p = 0.05f;
    float repeat_penalty = 1.0f;
    int32_t repeat_last_n = 64;
    bool cnv = false;                  // -cnv: stdin lines are user turns (chat template)
    std::string chat_template = "auto";
    bool verbose = false;
    bool help = false;
    // threads and loading (issue 4)
    std::string cpu_mask, cpu_range;
    std::string numa = "none";
    std::string hugepages = "off";
    bool mlock = false;
    bool no_mmap = false;
    bool no_repack = false;
    bool populate = false;
};

// ---- value parsers -----------------------------------------------------------------------------

using latte::args::parse_float;
using latte::args::parse_int;
using latte::args::parse_onoff;
using latte::args::quoted;

latte::MlaMode parse_mla(std::string_view flag, std::string_view v) {
    if (v == "0") return latte::MlaMode::Full;
    if (v == "1") return latte::MlaMode::Absorbed;
    if (v == "2") return latte::MlaMode::Decompressed;
    if (v == "3") return latte::MlaMode::Hybrid;
    if (v == "auto") return latte::MlaMode::Auto;
    throw UsageError{std::string(flag) + ": expected one of 0, 1, 2, 3, auto, got " + quoted(v)};
}

using latte::args::parse_cache_type;
using latte::args::parse_token_list;

// ---- the flag table ----------------------------------------------------------------------------

using Flag = latte::args::Flag<Options>;

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
        {"-tb", "--threads-batch", "N", "threads for prompt processing (ubatches of more than one token); 0 = as -t",
         "same as -t", [](Options& o, std::string_view f, std::string_view v) {
             o.n_threads_batch = parse_int<uint32_t>(f, v, 0, 1024, "an integer in 0..1024");
         }},
        {"-c", "--ctx-size", "N", "context size in tokens (KV cache length)", "4096, or the model's trained context if smaller",
         [](Options& o, std::string_view f, std::string_view v) {
             o.have_ctx = true;
             o.n_ctx = parse_int<uint32_t>(f, v, 1, static_cast<uint32_t>(kI32Max), "an integer >= 1");
         }},
        {"-b", "--batch-size", "N", "prompt tokens per decode call (each split into ubatches of -ub)", "2048",
         [](Options& o, std::string_view f, std::string_view v) {
             o.n_batch = parse_int<uint32_t>(f, v, 1, static_cast<uint32_t>(kI32Max), "an integer >= 1");
         }},
        {"-ub", "--ubatch-size", "N", "tokens per forward pass when decoding the prompt", "512",
         [](Options& o, std::string_view f, std::string_view v) {
             o.n_ubatch = parse_int<uint32_t>(f, v, 1, static_cast<uint32_t>(kI32Max), "an integer >= 1");
         }},
        {"-mla", "--mla-use", "MODE",
         "MLA mode: 0 full K/V cache, 1 absorbed latent MQA, 2 decompress per ubatch, 3 hybrid of 1 and 2, "
         "auto: 1 or 2 per ubatch by a cost model fed with kernel rates measured at start-up",
         "auto", [](Options& o, std::string_view f, std::string_view v) { o.mla = parse_mla(f, v); }},
        {"-fa", "--flash-attn", "on|off", "FlashAttention-style tiled attention (also 1|0, true|false)", "on",
         [](Options& o, std::string_view f, std::string_view v) { o.flash_attn = parse_onoff(f, v); }},
        {"-ctk", "--cache-type-k", "TYPE", "KV cache element type: f32, f16, bf16, q8_0, q8_KV", "f16",
         [](Options& o, std::string_view f, std::string_view v) { o.cache_type = parse_cache_type(f, v); }},
        {"-ctv", "--cache-type-v", "TYPE",
         "V cache element type (f32, f16, bf16, q8_0, q8_KV), used by -mla 0 only: in the latent modes V is "
         "part of the K row",
         "same as -ctk", [](Options& o, std::string_view f, std::string_view v) { o.cache_type_v = parse_cache_type(f, v); }},
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
        {nullptr, "--repeat-penalty", "P", "divide (multiply, if negative) the logits of recent tokens by P; 1 = off",
         "1.0", [](Options& o, std::string_view f, std::string_view v) {
             o.repeat_penalty = parse_float(f, v, 1e-3f, 1e3f, "a number in [0.001, 1000]");
         }},
        {nullptr, "--repeat-last-n", "N", "tokens the repeat penalty looks back over; 0 = off, -1 = the context", "64",
         [](Options& o, std::string_view f, std::string_view v) {
             o.repeat_last_n = parse_int<int32_t>(f, v, -1, kI32Max, "an integer >= -1");
         }},
        {"-cnv", "--conversation", nullptr,
         "conversation: each stdin line is a user turn, answered with the chat template; -p is the system prompt",
         "off", [](Options& o, std::string_view, std::string_view) { o.cnv = true; }},
        {"-no-cnv", "--no-conversation", nullptr, "plain completion of the prompt (the default)", nullptr,
         [](Options& o, std::string_view, std::string_view) { o.cnv = false; }},
        {nullptr, "--chat-template", "NAME", "deepseek2, deepseek3, or auto (deepseek3 if the vocabulary has <｜User｜>)",
         "auto", [](Options& o, std::string_view f, std::string_view v) {
             if (v != "auto" && v != "deepseek2" && v != "deepseek3")
                 throw UsageError{std::string(f) + ": expected deepseek2, deepseek3 or auto, got " + quoted(v)};
             o.chat_template = std::string(v);
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
        {nullptr, "--no-repack", nullptr, "keep q8_0/q4_0/K-quant weights in the file's layout (default: repacked at load for the matmul kernels: 16-row groups, K-quant scales decoded)", "off",
         [](Options& o, std::string_view, std::string_view) { o.no_repack = true; }},
        {nullptr, "--populate", nullptr, "fault every weight page in at load (progress bar on a terminal)", "off",
         [](Options& o, std::string_view, std::string_view) { o.populate = true; }},
        {nullptr, "--isa", "LEVEL", "kernel level: scalar, avx2, avx512, amx, neon (as LATTE_ISA; default: the best this CPU runs)", nullptr,
         [](Options& o, std::string_view f, std::string_view v) {
             if (v != "scalar" && v != "avx2" && v != "avx512" && v != "amx" && v != "neon")
                 throw UsageError{std::string(f) + ": expected one of scalar, avx2, avx512, amx, neon, got " + quoted(v)};
             o.isa = std::string(v);
         }},
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
    latte::args::print_flags(out, flags());
    std::fprintf(out,
                 "\nexit status: 0 ok, 1 model/context error, 2 bad command line.\n"
                 "Ctrl-C stops generation after the current token; the timings are still printed.\n");
}

Options parse_args(int argc, char** argv) {
    Options o;
    latte::args::parse(argc, argv, flags(), o);
    if (o.help) return o;
    if (o.model.empty()) throw UsageError{"missing -m/--model FILE (see --help)"};
    if (o.have_tokens && o.have_prompt) throw UsageError{"give either -p/--prompt or --tokens, not both"};
    if (o.have_tokens && !o.prompt_file.empty()) throw UsageError{"give either -f/--file or --tokens, not both"};
    if (o.have_prompt && !o.prompt_file.empty()) throw UsageError{"give either -p/--prompt or -f/--file, not both"};
    if (o.cnv && o.have_tokens) throw UsageError{"-cnv takes its turns from stdin; --tokens does not apply"};
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
        case latte::MlaMode::Auto: return "mla auto";
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

// -cnv: each stdin line is a user turn; the reply is generated until EOS, -n tokens or a full
// context, then closed with EOS in the cache so that the next turn follows the template.
int converse(const Options& o, const latte::Model& model, latte::Context& ctx, latte::Sampler& sampler,
             const std::string& system, double load_ms) {
    const latte::Tokenizer& tok = model.tokenizer();
    latte::chat::Template tmpl;
    try {
        tmpl = latte::chat::pick(o.chat_template, tok);
    } catch (const std::invalid_argument& e) {
        throw UsageError{std::string("--chat-template: ") + e.what()};
    }
    const int32_t n_vocab_logits = static_cast<int32_t>(model.hparams().n_vocab);
    const uint32_t n_ctx = ctx.params().n_ctx;
    const bool tty = isatty(0);
    std::fprintf(stderr, "chat template: %s; one user turn per line on stdin, end with EOF%s\n",
                 latte::chat::name(tmpl), tty ? " (Ctrl-D)" : "");
    std::string line;
    int turn = 0, n_eval = 0;
    double eval_ms = 0.0;
    const char* stop = nullptr;
    while (!stop) {
        if (tty) std::fputs("> ", stderr);
        if (!std::getline(std::cin, line)) break;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) continue;
        const std::string text = latte::chat::user_turn(tmpl, system, line, turn == 0);
        const std::vector<int32_t> ids = tok.encode(text, /*add_bos=*/turn == 0, /*parse_special=*/true);
        if (ctx.n_past() + ids.size() + 1 > n_ctx) {
            stop = "context full";
            break;
        }
        ++turn;
        if (o.verbose) {
            std::fprintf(stderr, "turn %d: %zu tokens:", turn, ids.size());
            for (int32_t id : ids) std::fprintf(stderr, " %d", id);
            std::fprintf(stderr, "\n");
        }
        for (int32_t id : ids) sampler.accept(id);
        g_interrupted = 0;
        const auto t0 = Clock::now();
        ctx.decode(ids);
        int n_gen = 0;
        const char* end = nullptr;
        while (o.n_predict < 0 || n_gen < o.n_predict) {
            if (g_interrupted) { end = "interrupted"; break; }
            const int32_t id = sampler.sample(ctx.logits(-1), n_vocab_logits);
            if (id == tok.eos()) { end = "end of text"; break; }
            if (ctx.n_past() + 1 >= n_ctx) { end = "context full"; break; }  // room for the closing EOS
            if (id >= 0 && id < tok.n_vocab()) write_out(tok.token_to_piece(id));
            ++n_gen;
            ctx.decode({id});
        }
        // Close the reply as the template does (the cache then matches the formatted conversation).
        if (tok.eos() >= 0 && ctx.n_past() < n_ctx) ctx.decode({tok.eos()});
        const double ms = ms_since(t0);
        eval_ms += ms;
        n_eval += static_cast<int>(ids.size()) + n_gen;
        write_out("\n");
        std::fprintf(stderr, "[turn %d: %zu prompt tokens, %d generated (%s), %u in the context, %.1f ms]\n", turn,
                     ids.size(), n_gen, end ? end : "-n reached", ctx.n_past(), ms);
        if (end && std::string(end) == "context full") stop = end;
        if (g_interrupted && end && std::string(end) == "interrupted") stop = end;
    }
    if (stop) std::fprintf(stderr, "[%s after %d turns, %u in the context]\n", stop, turn, ctx.n_past());
    std::fprintf(stderr, "conversation: %d turns, %d tokens, %.2f ms, %.2f tokens/s\n", turn, n_eval, eval_ms,
                 per_second(n_eval, eval_ms));
    std::fprintf(stderr, "load: %.2f ms\n", load_ms);
    return 0;
}

int run(const Options& opts) {
    Options o = opts;
    std::string prompt = o.prompt;
    if (!o.prompt_file.empty()) prompt = read_prompt_file(o.prompt_file);

    // The kernel level is chosen once per process, from LATTE_ISA; resolved here, before the model is
    // read, so that a level this CPU lacks fails at once (and without the file's name on it).
    if (!o.isa.empty()) setenv("LATTE_ISA", o.isa.c_str(), 1);
    const std::string kernels = latte::kernel_level();
    // where the level came from, as asked (the dispatch alone decides what a LATTE_ISA value means)
    const char* isa_env = std::getenv("LATTE_ISA");
    const std::string kernels_from = !o.isa.empty()           ? std::string("--isa")
                                     : isa_env && *isa_env ? "LATTE_ISA=" + std::string(isa_env)
                                                           : std::string("the best this CPU runs");

    // Load.
    latte::ModelParams mp;
    mp.verbose = o.verbose;
    mp.use_mmap = !o.no_mmap;
    mp.hugepages = o.hugepages;
    mp.mlock = o.mlock;
    mp.populate = o.populate;
    mp.repack = !o.no_repack;
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
    const uint32_t n_ctx_train = model->hparams().n_ctx_train;
    if (!o.have_ctx && n_ctx_train > 0) o.n_ctx = std::min(o.n_ctx, n_ctx_train);
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
    std::fprintf(stderr, "kernels: %s (%s)\n", kernels.c_str(), kernels_from.c_str());

    // -ctv in the latent modes: their cache has no V rows of its own (V is the first kv_lora values
    // of each latent K row), so only a -ctv equal to -ctk makes sense there.
    if (o.cache_type_v && *o.cache_type_v != o.cache_type && o.mla != latte::MlaMode::Full)
        std::fprintf(stderr, "latte-cli: warning: -ctv %s is ignored (%s): the latent cache has no separate V "
                     "rows (V is the first kv_lora values of each K row, stored as -ctk %s); -ctv applies to -mla 0 only\n",
                     latte::type_name(*o.cache_type_v), mla_name(o.mla), latte::type_name(o.cache_type));
    // Context.
    latte::ContextParams cp;
    cp.n_ctx = o.n_ctx;
    cp.n_ubatch = o.n_ubatch;
    cp.n_threads = o.n_threads;
    cp.n_threads_batch = o.n_threads_batch;
    cp.mla = o.mla;
    cp.flash_attn = o.flash_attn;
    cp.cache_type = o.cache_type;
    cp.cache_type_v = o.cache_type_v;
    cp.cpu_mask = o.cpu_mask;
    cp.cpu_range = o.cpu_range;
    cp.numa = o.numa;
    latte::Context ctx(model, cp);
    std::fprintf(stderr, "%s\n", ctx.threads_report().c_str());
    const uint32_t n_ctx = ctx.params().n_ctx;
    if (o.verbose) {
        std::fprintf(stderr, "context: n_ctx %u, n_ubatch %u, threads %u (batch %u), %s, flash-attn %s, cache %s",
                     n_ctx, ctx.params().n_ubatch, ctx.params().n_threads, ctx.params().n_threads_batch,
                     mla_name(ctx.params().mla), ctx.params().flash_attn ? "on" : "off",
                     cache_type_name(ctx.params().cache_type));
        if (ctx.params().mla == latte::MlaMode::Full)
            std::fprintf(stderr, " (V %s)", cache_type_name(ctx.params().cache_type_v.value_or(ctx.params().cache_type)));
        std::fprintf(stderr, "\n");
        std::fprintf(stderr, "prompt: %zu tokens:", prompt_tokens.size());
        for (int32_t id : prompt_tokens) std::fprintf(stderr, " %d", id);
        std::fprintf(stderr, "\n");
    }

    latte::SamplerParams sp;
    sp.temp = o.temp;
    sp.top_k = o.top_k;
    sp.top_p = o.top_p;
    sp.min_p = o.min_p;
    sp.repeat_penalty = o.repeat_penalty;
    sp.repeat_last_n = o.repeat_last_n < 0 ? static_cast<int32_t>(n_ctx) : o.repeat_last_n;
    sp.seed = seed;
    latte::Sampler sampler(sp);

    install_sigint();
    if (o.cnv) return converse(o, *model, ctx, sampler, prompt, load_ms);
    for (int32_t id : prompt_tokens) sampler.accept(id);  // the repeat penalty sees the prompt too

    // The prompt text, then the prompt in one decode.
    write_out(o.have_tokens ? tok.decode(prompt_tokens) : prompt);
    const auto t_prompt = Clock::now();
    for (size_t i = 0; i < prompt_tokens.size(); i += o.n_batch) {
        const size_t n = std::min<size_t>(o.n_batch, prompt_tokens.size() - i);
        ctx.decode(std::vector<int32_t>(prompt_tokens.begin() + static_cast<std::ptrdiff_t>(i),
                                        prompt_tokens.begin() + static_cast<std::ptrdiff_t>(i + n)));
    }
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

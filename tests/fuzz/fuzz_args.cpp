// libFuzzer target: the tools' command-line parser (tools/args.h: the flag-table parse() and the
// value parsers latte-cli, latte-bench and latte-sweep use), with a table holding one flag of each
// value kind. Input: argv items separated by NUL bytes. Contract: a bad command line is a
// args::UsageError, never a crash or another exception. Built by tools/fuzz.sh.
// (latte-cli's own flag table lives inside tools/cli.cpp and is not reachable as a function; its
// value parsers, the ones here, are.)
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "args.h"

namespace {

struct Opts {
    int32_t n = 0;
    int64_t big = 0;
    uint32_t u = 0;
    float f = 0;
    bool on = false, help = false, flag = false;
    latte::GGMLType ct = latte::GGMLType::F16;
    std::vector<int32_t> ids;
    std::vector<std::string> list;
    std::pair<int32_t, int32_t> pair{0, 0};
};

const std::vector<latte::args::Flag<Opts>>& table() {
    using namespace latte::args;
    static const std::vector<Flag<Opts>> t = {
        {"-n", "--n-predict", "N", "int", "32", [](Opts& o, std::string_view f, std::string_view v) { o.n = parse_int<int32_t>(f, v, -1, 1 << 30, "an integer >= -1"); }},
        {"-c", "--ctx-size", "N", "u32", "4096", [](Opts& o, std::string_view f, std::string_view v) { o.u = parse_int<uint32_t>(f, v, 1, 0xFFFFFFFFu, "a positive integer"); }},
        {nullptr, "--seed", "S", "i64", nullptr, [](Opts& o, std::string_view f, std::string_view v) { o.big = parse_int<int64_t>(f, v, INT64_MIN, INT64_MAX, "an integer"); }},
        {nullptr, "--temp", "T", "float", "0.8", [](Opts& o, std::string_view f, std::string_view v) { o.f = parse_float(f, v, 0.0f, 100.0f, "a number in [0, 100]"); }},
        {"-fa", "--flash-attn", "on|off", "onoff", "on", [](Opts& o, std::string_view f, std::string_view v) { o.on = parse_onoff(f, v); }},
        {"-ctk", "--cache-type-k", "TYPE", "type", "f16", [](Opts& o, std::string_view f, std::string_view v) { o.ct = parse_cache_type(f, v); }},
        {nullptr, "--tokens", "IDS", "ids", nullptr, [](Opts& o, std::string_view f, std::string_view v) { o.ids = parse_token_list(f, v); }},
        {"-p", "--list", "A,B", "list", nullptr, [](Opts& o, std::string_view f, std::string_view v) { o.list = split_list(f, v); }},
        {"-pg", "--pair", "A,B", "pair", nullptr, [](Opts& o, std::string_view f, std::string_view v) { o.pair = parse_pair(f, v, 0, "PP,TG"); }},
        {nullptr, "--quiet", nullptr, "flag", nullptr, [](Opts& o, std::string_view, std::string_view) { o.flag = true; }},
        {"-h", "--help", nullptr, "help", nullptr, [](Opts& o, std::string_view, std::string_view) { o.help = true; }},
    };
    return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::vector<std::string> items(1, "latte-fuzz");
    std::string cur;
    for (size_t i = 0; i < size && items.size() < 64; ++i) {
        if (data[i] == 0) {
            items.push_back(cur);
            cur.clear();
        } else {
            cur += static_cast<char>(data[i]);
        }
    }
    if (!cur.empty()) items.push_back(cur);
    std::vector<char*> argv;
    for (auto& s : items) argv.push_back(s.data());
    argv.push_back(nullptr);
    Opts o;
    try {
        latte::args::parse(static_cast<int>(items.size()), argv.data(), table(), o);
    } catch (const latte::args::UsageError& e) {
        if (e.what.empty()) __builtin_trap();  // every error says something
    }
    return 0;
}

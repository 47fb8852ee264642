// The command-line parser shared by latte-cli, latte-bench and latte-sweep: a table of flags
// (short name, long name, value meta, help, default, an apply function), value parsers that
// name the flag and what was expected, and `--help` printing. A bad command line is a UsageError
// (the tools print it as one line `PROG: error: ...` and exit 2).
#pragma once
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "latte/types.h"

namespace latte::args {

// A bad command line: reported as one line, exit 2.
struct UsageError {
    std::string what;
};

// Anything else a tool itself detects (an unreadable file, a prompt longer than the context):
// reported as one line, exit 1.
struct RunError {
    std::string what;
};

// Every latte tool's main: runs `body` and turns what escapes it into the tools' one-line
// "PROG: error: ..." on stderr (stdout flushed first) with exit 2 for a bad command line and 1
// for anything else (latte::Error, RunError, out of memory, internal errors). Never throws.
int guarded_main(const char* prog, const std::function<int()>& body);

inline std::string quoted(std::string_view v) {
    std::string s;  // (not "'" + std::string(v) + "'": GCC 12 warns falsely about that, -Wrestrict)
    s.reserve(v.size() + 2);
    s += '\'';
    s.append(v);
    s += '\'';
    return s;
}

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

float parse_float(std::string_view flag, std::string_view v, float lo, float hi, const std::string& expected);
bool parse_onoff(std::string_view flag, std::string_view v);
// f32, f16, bf16, q8_0, q8_KV.
GGMLType parse_cache_type(std::string_view flag, std::string_view v);
// Comma-separated token ids (>= 0).
std::vector<int32_t> parse_token_list(std::string_view flag, std::string_view v);
// "a,b,c" -> {"a","b","c"} (items trimmed of spaces); an empty item is a UsageError naming the flag.
std::vector<std::string> split_list(std::string_view flag, std::string_view v);
// "A,B" -> exactly two integers >= lo (llama-bench's -pg PP,TG and -gp DEPTH,N).
std::pair<int32_t, int32_t> parse_pair(std::string_view flag, std::string_view v, int32_t lo, const std::string& what);

// One flag of a tool. `meta` == nullptr: the flag takes no value.
template <class Options>
struct Flag {
    const char* shortname;  // may be nullptr
    const char* longname;
    const char* meta;
    const char* help;
    const char* def;        // default as shown by --help (nullptr: none)
    std::function<void(Options&, std::string_view flag, std::string_view value)> apply;
};

// Prints the table as `  -s, --long META   help (default: d)` lines.
template <class Options>
void print_flags(std::FILE* out, const std::vector<Flag<Options>>& table) {
    for (const auto& f : table) {
        std::string names = f.shortname ? std::string(f.shortname) + ", " + f.longname : std::string("    ") + f.longname;
        if (f.meta) names += std::string(" ") + f.meta;
        std::string help = f.help;
        if (f.def) help += std::string(" (default: ") + f.def + ")";
        std::fprintf(out, "  %-26s %s\n", names.c_str(), help.c_str());
    }
}

// Applies argv[1..] to `o` through the table (`--long=value` also accepted). Stops right after a
// flag whose long name is "--help" (the caller checks its own help field). Throws UsageError.
template <class Options>
void parse(int argc, char** argv, const std::vector<Flag<Options>>& table, Options& o) {
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
        const Flag<Options>* flag = nullptr;
        for (const auto& f : table)
            if ((f.shortname && name == f.shortname) || name == f.longname) flag = &f;
        if (!flag) {
            if (arg.empty() || arg.front() != '-' || arg == "-")
                throw UsageError{"unexpected argument " + quoted(arg) + " (flags start with '-'; see --help)"};
            throw UsageError{"unknown flag " + quoted(name) + " (see --help)"};
        }
        if (!flag->meta) {
            if (has_inline) throw UsageError{std::string(name) + " takes no value, got " + quoted(inline_value)};
            flag->apply(o, name, {});
            if (std::string_view(flag->longname) == "--help") return;
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
}

}  // namespace latte::args

// Value parsers of the shared command-line parser (tools/args.h).
#include "args.h"

#include <cstdio>
#include <exception>
#include <limits>
#include <new>

#include "latte/error.h"

namespace latte::args {

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

GGMLType parse_cache_type(std::string_view flag, std::string_view v) {
    if (v == "f32") return GGMLType::F32;
    if (v == "f16") return GGMLType::F16;
    if (v == "bf16") return GGMLType::BF16;
    if (v == "q8_0") return GGMLType::Q8_0;
    if (v == "q8_KV" || v == "q8_kv") return GGMLType::Q8_KV;
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

std::vector<std::string> split_list(std::string_view flag, std::string_view v) {
    std::vector<std::string> out;
    size_t pos = 0;
    while (true) {
        const size_t comma = v.find(',', pos);
        std::string_view item = v.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
        while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
        while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
        if (item.empty()) throw UsageError{std::string(flag) + ": empty item in the list " + quoted(v)};
        out.emplace_back(item);
        if (comma == std::string_view::npos) break;
        pos = comma + 1;
    }
    return out;
}

std::pair<int32_t, int32_t> parse_pair(std::string_view flag, std::string_view v, int32_t lo, const std::string& what) {
    const size_t comma = v.find(',');
    if (comma == std::string_view::npos || v.find(',', comma + 1) != std::string_view::npos)
        throw UsageError{std::string(flag) + ": expected " + what + ", got " + quoted(v)};
    const std::string expected = "two integers >= " + std::to_string(lo) + " as " + what;
    const int32_t max = std::numeric_limits<int32_t>::max();
    return {parse_int<int32_t>(flag, v.substr(0, comma), lo, max, expected),
            parse_int<int32_t>(flag, v.substr(comma + 1), lo, max, expected)};
}

int guarded_main(const char* prog, const std::function<int()>& body) {
    auto fail = [prog](int code, const std::string& what) {
        std::fflush(stdout);
        std::fprintf(stderr, "%s: error: %s\n", prog, what.c_str());
        return code;
    };
    try {
        return body();
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

}  // namespace latte::args

// latte-bench's output formats (see bench_report.h).
#include "bench_report.h"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <numeric>
#include <stdexcept>

namespace latte::bench {

double Row::avg_ns() const {
    if (samples_ns.empty()) return 0.0;
    double s = 0.0;
    for (uint64_t x : samples_ns) s += static_cast<double>(x);
    return s / static_cast<double>(samples_ns.size());
}

namespace {
double stdev(const std::vector<double>& v) {
    if (v.size() < 2) return 0.0;
    const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
    double ss = 0.0;
    for (double x : v) ss += (x - mean) * (x - mean);
    return std::sqrt(ss / static_cast<double>(v.size() - 1));
}

std::string fmt(const char* f, double x) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, x);
    return buf;
}

std::string num(double x) {  // JSON number: integers without a fraction, others with 6 significant digits
    if (!std::isfinite(x)) return "0";
    if (x == std::floor(x) && std::fabs(x) < 1e15) return fmt("%.0f", x);
    return fmt("%.6g", x);
}
}  // namespace

double Row::stddev_ns() const {
    std::vector<double> v(samples_ns.begin(), samples_ns.end());
    return stdev(v);
}

std::vector<double> Row::samples_ts() const {
    std::vector<double> out;
    const double n = static_cast<double>(n_prompt + n_gen);
    for (uint64_t ns : samples_ns) out.push_back(ns > 0 ? n * 1e9 / static_cast<double>(ns) : 0.0);
    return out;
}

double Row::avg_ts() const {
    const auto v = samples_ts();
    return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double Row::stddev_ts() const { return stdev(samples_ts()); }

std::string test_name(int n_prompt, int n_gen, int n_depth) {
    std::string s;
    if (n_prompt > 0 && n_gen > 0)
        s = "pp" + std::to_string(n_prompt) + "+tg" + std::to_string(n_gen);
    else if (n_prompt > 0)
        s = "pp" + std::to_string(n_prompt);
    else
        s = "tg" + std::to_string(n_gen);
    if (n_depth > 0) s += " @ d" + std::to_string(n_depth);
    return s;
}

std::string format_size(uint64_t bytes) {
    const double b = static_cast<double>(bytes);
    if (b >= 1024.0 * 1024.0 * 1024.0) return fmt("%.2f GiB", b / (1024.0 * 1024.0 * 1024.0));
    return fmt("%.2f MiB", b / (1024.0 * 1024.0));
}

std::string format_params(uint64_t n) {
    const double x = static_cast<double>(n);
    if (x >= 1e9) return fmt("%.2f B", x / 1e9);
    if (x >= 1e6) return fmt("%.2f M", x / 1e6);
    if (x >= 1e3) return fmt("%.2f K", x / 1e3);
    return fmt("%.0f", x);
}

std::string utc_now_iso8601() {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

Format parse_format(const std::string& s) {
    if (s == "md") return Format::Markdown;
    if (s == "csv") return Format::Csv;
    if (s == "json") return Format::Json;
    if (s == "jsonl") return Format::Jsonl;
    throw std::invalid_argument("expected one of md, csv, json, jsonl, got '" + s + "'");
}

std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += static_cast<char>(c);
                }
        }
    }
    return out + "\"";
}

namespace {

const char* kFields[] = {"model_filename", "model_type", "model_size", "model_n_params", "n_batch", "n_ubatch",
                         "n_threads", "type_k", "flash_attn", "mla", "n_prompt", "n_gen", "n_depth", "test_time",
                         "avg_ns", "stddev_ns", "avg_ts", "stddev_ts", "samples_ns", "samples_ts",
                         // latte's own: bytes and flops per token beside the speed
                         "weight_bytes_per_token", "kv_bytes_per_token", "flops_per_token", "mla_paths", "isa"};

// -mla as JSON: a number when it is one (llama-bench's integer field), else a string ("auto").
std::string mla_value(const std::string& m) {
    const bool digits = !m.empty() && m.find_first_not_of("0123456789") == std::string::npos;
    return digits ? m : json_string(m);
}

// The row's fields in kFields order, as JSON values.
std::vector<std::string> json_values(const Row& r) {
    std::string sns = "[", sts = "[";
    for (size_t i = 0; i < r.samples_ns.size(); ++i) sns += (i ? ", " : "") + std::to_string(r.samples_ns[i]);
    const auto ts = r.samples_ts();
    for (size_t i = 0; i < ts.size(); ++i) sts += (i ? ", " : "") + num(ts[i]);
    sns += "]";
    sts += "]";
    return {json_string(r.model_filename), json_string(r.model_type), std::to_string(r.model_size),
            std::to_string(r.model_n_params), std::to_string(r.n_batch), std::to_string(r.n_ubatch),
            std::to_string(r.n_threads), json_string(r.type_k), r.flash_attn ? "true" : "false",
            mla_value(r.mla), std::to_string(r.n_prompt), std::to_string(r.n_gen), std::to_string(r.n_depth),
            json_string(r.test_time), num(std::round(r.avg_ns())), num(std::round(r.stddev_ns())), num(r.avg_ts()),
            num(r.stddev_ts()), sns, sts, num(std::round(r.weight_bytes_per_token)),
            num(std::round(r.kv_bytes_per_token)), num(std::round(r.flops_per_token)), json_string(r.mla_paths),
            json_string(r.isa)};
}

std::string json_object(const Row& r, const char* indent, const char* sep, const char* close_indent = "") {
    const auto v = json_values(r);
    std::string s = "{";
    for (size_t i = 0; i < v.size(); ++i) {
        s += (i ? "," : "");
        s += sep;
        s += indent;
        s += std::string("\"") + kFields[i] + "\": " + v[i];
    }
    return s + sep + close_indent + "}";
}

std::string csv_field(const std::string& s) {  // always quoted, quotes doubled
    std::string out = "\"";
    for (char c : s) out += (c == '"') ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

}  // namespace

std::string Writer::header() const {
    switch (f_) {
        case Format::Json: return "[\n";
        case Format::Jsonl: return "";
        case Format::Csv: {
            std::string s;
            for (size_t i = 0; i < std::size(kFields); ++i) s += (i ? "," : "") + std::string(kFields[i]);
            return s + "\n";
        }
        case Format::Markdown: {
            std::string h = "| model | size | params | isa | threads |";
            std::string d = "| ----- | ---: | -----: | --- | ------: |";
            if (show_b_) { h += " n_batch |"; d += " ------: |"; }
            if (show_ub_) { h += " n_ubatch |"; d += " -------: |"; }
            h += " mla | type_k | fa | test | t/s |";
            d += " --: | -----: | -: | ---: | --: |";
            return h + "\n" + d + "\n";
        }
    }
    return "";
}

std::string Writer::row(const Row& r) {
    const int idx = n_rows_++;
    switch (f_) {
        case Format::Json: return std::string(idx ? ",\n" : "") + "  " + json_object(r, "    ", "\n", "  ");
        case Format::Jsonl: return json_object(r, "", "", "") + "\n";
        case Format::Csv: {
            auto v = json_values(r);
            v[0] = r.model_filename;  // the text fields unescaped (csv_field quotes them)
            v[1] = r.model_type;
            v[7] = r.type_k;
            v[9] = r.mla;
            v[13] = r.test_time;
            v[23] = r.mla_paths;
            v[24] = r.isa;
            std::string s;
            for (size_t i = 0; i < v.size(); ++i) {
                std::string x = v[i];
                if (!x.empty() && x.front() == '[') x = x.substr(1, x.size() - 2);  // the samples: "1, 2"
                s += (i ? "," : "") + csv_field(x);
            }
            return s + "\n";
        }
        case Format::Markdown: {
            std::string s = "| " + r.model_type + " | " + format_size(r.model_size) + " | " +
                            format_params(r.model_n_params) + " | " + r.isa + " | " + std::to_string(r.n_threads) + " |";
            if (show_b_) s += " " + std::to_string(r.n_batch) + " |";
            if (show_ub_) s += " " + std::to_string(r.n_ubatch) + " |";
            // a mode that chooses per ubatch shows its choice: "auto (2)"
            const bool chose = !r.mla_paths.empty() && r.mla_paths != r.mla;
            s += " " + r.mla + (chose ? " (" + r.mla_paths + ")" : "") + " | " + r.type_k + " | " + (r.flash_attn ? "1" : "0") + " | " +
                 test_name(r.n_prompt, r.n_gen, r.n_depth) + " | " + fmt("%.2f", r.avg_ts()) + " ± " +
                 fmt("%.2f", r.stddev_ts()) + " |\n";
            return s;
        }
    }
    return "";
}

std::string Writer::footer() const {
    if (f_ == Format::Json) return n_rows_ ? "\n]\n" : "]\n";
    return "";
}

}  // namespace latte::bench

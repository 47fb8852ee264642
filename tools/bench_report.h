// latte-bench's results and their output formats (llama-bench's conventions): one Row per test,
// written as a markdown table, CSV, a JSON array of objects, or JSON lines.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace latte::bench {

struct Row {
    // what ran
    std::string model_filename, model_type;
    uint64_t model_size = 0, model_n_params = 0;
    int n_batch = 2048, n_ubatch = 512, n_threads = 0;
    std::string type_k = "f16";
    bool flash_attn = true;
    std::string mla = "3";           // the -mla value: a number, or a mode's name ("auto")
    int n_prompt = 0, n_gen = 0, n_depth = 0;
    std::string test_time;           // ISO 8601, UTC
    std::vector<uint64_t> samples_ns;  // one per repetition
    // What the test's last decode call read and computed, per token (Context::last_decode_stats):
    // weight bytes, KV cache bytes, flops (matmuls + attention). 0 when not measured.
    double weight_bytes_per_token = 0, kv_bytes_per_token = 0, flops_per_token = 0;
    // The attention paths the timed ubatches took (Context::last_paths: "1" absorbed, "2"
    // decompressed, "0" full; "1,2" when both, in order of first use): what -mla auto chose.
    std::string mla_paths;
    // The kernel level the test ran (latte::kernel_level(): LATTE_ISA's, or the best this CPU runs),
    // in the place of llama-bench's backend.
    std::string isa;

    // derived from samples_ns
    double avg_ns() const;
    double stddev_ns() const;               // sample standard deviation (n - 1), 0 for one sample
    std::vector<double> samples_ts() const; // (n_prompt + n_gen) / seconds
    double avg_ts() const;
    double stddev_ts() const;
};

// llama-bench's test names: pp512, tg128, pp512+tg128, then " @ d4096" when n_depth > 0.
std::string test_name(int n_prompt, int n_gen, int n_depth);
// "15.66 MiB", "1.23 GiB"; "8.21 M", "15.71 B" (llama-bench's size and params columns).
std::string format_size(uint64_t bytes);
std::string format_params(uint64_t n);
// Now as "2024-05-01T12:34:56Z".
std::string utc_now_iso8601();

enum class Format { Markdown, Csv, Json, Jsonl };
Format parse_format(const std::string& s);  // md|csv|json|jsonl, throws std::invalid_argument

// The streaming writer: header() once, row() per result as it completes, footer() at the end.
// Markdown shows n_ubatch / n_batch columns only when show_ubatch / show_batch (values that differ
// from the defaults were asked for), as llama-bench does.
class Writer {
public:
    Writer(Format f, bool show_ubatch, bool show_batch) : f_(f), show_ub_(show_ubatch), show_b_(show_batch) {}
    std::string header() const;
    std::string row(const Row& r);
    std::string footer() const;

private:
    Format f_;
    bool show_ub_, show_b_;
    int n_rows_ = 0;
};

// JSON string escaping (quotes included).
std::string json_string(const std::string& s);

}  // namespace latte::bench

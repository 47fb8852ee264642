// Tests of latte-bench's pieces: the shared flag parser (tools/args.h) and the report formats.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "args.h"
#include "bench_report.h"

using latte::args::UsageError;
using latte::bench::Format;
using latte::bench::Row;
using latte::bench::Writer;

namespace {

struct Opts {
    int n = 0;
    bool flag = false, help = false;
    std::vector<std::string> list;
};

std::vector<latte::args::Flag<Opts>> table() {
    return {
        {"-n", "--number", "N", "a number", "0",
         [](Opts& o, std::string_view f, std::string_view v) { o.n = latte::args::parse_int<int>(f, v, 0, 100, "0..100"); }},
        {nullptr, "--flag", nullptr, "a switch", nullptr, [](Opts& o, std::string_view, std::string_view) { o.flag = true; }},
        {nullptr, "--list", "A,B", "a list", nullptr,
         [](Opts& o, std::string_view f, std::string_view v) { o.list = latte::args::split_list(f, v); }},
        {"-h", "--help", nullptr, "help", nullptr, [](Opts& o, std::string_view, std::string_view) { o.help = true; }},
    };
}

std::string parse_error(std::vector<const char*> argv) {
    argv.insert(argv.begin(), "prog");
    Opts o;
    try {
        latte::args::parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()), table(), o);
    } catch (const UsageError& e) {
        return e.what;
    }
    return "";
}

Row sample_row() {
    Row r;
    r.model_filename = "m \"x\".gguf";
    r.model_type = "deepseek2 5.69M F32";
    r.model_size = 22795744;
    r.model_n_params = 5691016;
    r.n_threads = 2;
    r.n_prompt = 512;
    r.n_gen = 0;
    r.test_time = "2026-01-01T00:00:00Z";
    r.samples_ns = {1000000000, 2000000000};  // 512 t/s and 256 t/s
    r.isa = "avx512";
    return r;
}

}  // namespace

TEST_CASE("bench: the shared parser applies short, long and --long=value flags", "[bench]") {
    std::vector<const char*> argv = {"prog", "-n", "7", "--flag", "--list=a, b,c"};
    Opts o;
    latte::args::parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()), table(), o);
    CHECK(o.n == 7);
    CHECK(o.flag);
    CHECK(o.list == std::vector<std::string>{"a", "b", "c"});
}

TEST_CASE("bench: the shared parser's errors name the flag and the value", "[bench]") {
    CHECK(parse_error({"--bogus"}) == "unknown flag '--bogus' (see --help)");
    CHECK(parse_error({"stray"}).find("unexpected argument 'stray'") == 0);
    CHECK(parse_error({"-n"}) == "-n: missing value, expected N");
    CHECK(parse_error({"-n", "x1"}) == "-n: expected 0..100, got 'x1'");
    CHECK(parse_error({"-n", "101"}) == "-n: '101' is out of range, expected 0..100");
    CHECK(parse_error({"--flag=1"}) == "--flag takes no value, got '1'");
    CHECK(parse_error({"--list", "a,,b"}) == "--list: empty item in the list 'a,,b'");
    CHECK(parse_error({"-h", "--bogus"}).empty());  // parsing stops at --help
    CHECK(parse_error({"-n", "5"}).empty());
}

TEST_CASE("bench: pairs and value parsers", "[bench]") {
    CHECK(latte::args::parse_pair("-pg", "512,128", 1, "PP,TG") == std::pair<int32_t, int32_t>{512, 128});
    CHECK_THROWS_AS(latte::args::parse_pair("-pg", "512", 1, "PP,TG"), UsageError);
    CHECK_THROWS_AS(latte::args::parse_pair("-pg", "1,2,3", 1, "PP,TG"), UsageError);
    CHECK_THROWS_AS(latte::args::parse_pair("-pg", "0,2", 1, "PP,TG"), UsageError);
    CHECK(latte::args::parse_cache_type("-ctk", "q8_0") == latte::GGMLType::Q8_0);
    CHECK_THROWS_AS(latte::args::parse_cache_type("-ctk", "q9"), UsageError);
    CHECK(latte::args::parse_onoff("-fa", "off") == false);
    CHECK(latte::args::parse_float("--temp", "+0.5", 0, 1, "x") == 0.5f);
}

TEST_CASE("bench: test names follow llama-bench", "[bench]") {
    CHECK(latte::bench::test_name(512, 0, 0) == "pp512");
    CHECK(latte::bench::test_name(0, 128, 0) == "tg128");
    CHECK(latte::bench::test_name(512, 128, 0) == "pp512+tg128");
    CHECK(latte::bench::test_name(512, 0, 4096) == "pp512 @ d4096");
    CHECK(latte::bench::test_name(0, 32, 4096) == "tg32 @ d4096");
}

TEST_CASE("bench: sizes, parameter counts and statistics", "[bench]") {
    CHECK(latte::bench::format_size(22795744) == "21.74 MiB");
    CHECK(latte::bench::format_size(3ull << 30) == "3.00 GiB");
    CHECK(latte::bench::format_params(5691016) == "5.69 M");
    CHECK(latte::bench::format_params(671000000000ull) == "671.00 B");
    const Row r = sample_row();
    CHECK(r.avg_ns() == Approx(1.5e9));
    CHECK(r.stddev_ns() == Approx(707106781.19));  // sample stdev of {1e9, 2e9}
    REQUIRE(r.samples_ts().size() == 2);
    CHECK(r.samples_ts()[0] == Approx(512.0));
    CHECK(r.samples_ts()[1] == Approx(256.0));
    CHECK(r.avg_ts() == Approx(384.0));
    CHECK(r.stddev_ts() == Approx(181.019336));
    Row one = r;
    one.samples_ns = {5};
    CHECK(one.stddev_ts() == 0.0);
}

TEST_CASE("bench: markdown has llama-bench's columns", "[bench]") {
    Writer w(Format::Markdown, false, false);
    const std::string h = w.header();
    CHECK(h.rfind("| model | size | params | isa | threads | mla | type_k | fa | test | t/s |\n", 0) == 0);
    const std::string row = w.row(sample_row());
    CHECK(row == "| deepseek2 5.69M F32 | 21.74 MiB | 5.69 M | avx512 | 2 | 3 | f16 | 1 | pp512 | 384.00 ± 181.02 |\n");
    Writer wu(Format::Markdown, true, false);
    CHECK(wu.header().find("| n_ubatch |") != std::string::npos);
    CHECK(wu.row(sample_row()).find("| 2 | 512 | 3 |") != std::string::npos);
    // a mode that chooses per ubatch shows the paths its timed ubatches took
    Row a = sample_row();
    a.mla = "auto";
    a.mla_paths = "2";
    CHECK(w.row(a).find("| 2 | auto (2) | f16 |") != std::string::npos);
    a.mla = "1";
    a.mla_paths = "1";
    CHECK(w.row(a).find("| 2 | 1 | f16 |") != std::string::npos);
}

TEST_CASE("bench: JSON is an array of objects with llama-bench's field names", "[bench]") {
    Writer w(Format::Json, false, false);
    std::string doc = w.header();
    doc += w.row(sample_row());
    doc += w.row(sample_row());
    doc += w.footer();
    CHECK(doc.front() == '[');
    CHECK(doc.substr(doc.size() - 2) == "]\n");
    for (const char* f : {"model_filename", "model_type", "model_size", "model_n_params", "n_batch", "n_ubatch",
                          "n_threads", "type_k", "flash_attn", "n_prompt", "n_gen", "n_depth", "test_time", "avg_ns",
                          "stddev_ns", "avg_ts", "stddev_ts", "samples_ns", "samples_ts", "mla", "mla_paths", "isa"}) {
        INFO(f);
        CHECK(doc.find(std::string("\"") + f + "\": ") != std::string::npos);
    }
    CHECK(doc.find("\"model_filename\": \"m \\\"x\\\".gguf\"") != std::string::npos);  // escaped
    CHECK(doc.find("\"samples_ns\": [1000000000, 2000000000]") != std::string::npos);
    CHECK(doc.find("\"samples_ts\": [512, 256]") != std::string::npos);
    CHECK(doc.find("\"flash_attn\": true") != std::string::npos);
    CHECK(doc.find("},\n  {") != std::string::npos);  // two objects, comma-separated
    Writer empty(Format::Json, false, false);
    CHECK(empty.header() + empty.footer() == "[\n]\n");
}

TEST_CASE("bench: JSON lines and CSV write one line per row", "[bench]") {
    Writer j(Format::Jsonl, false, false);
    const std::string line = j.row(sample_row());
    CHECK(line.front() == '{');
    CHECK(line.substr(line.size() - 2) == "}\n");
    CHECK(line.find('\n') == line.size() - 1);
    Writer c(Format::Csv, false, false);
    const std::string h = c.header();
    CHECK(h.rfind("model_filename,model_type,model_size,", 0) == 0);
    const std::string r = c.row(sample_row());
    CHECK(r.rfind("\"m \"\"x\"\".gguf\",\"deepseek2 5.69M F32\",\"22795744\"", 0) == 0);
    CHECK(std::count(h.begin(), h.end(), ',') == 24);  // 25 columns: llama-bench's 19 + mla + latte's bytes/flops per token + paths taken + isa
    CHECK(r.substr(r.size() - 10) == ",\"avx512\"\n");
    CHECK_THROWS(latte::bench::parse_format("xml"));
    CHECK(latte::bench::parse_format("jsonl") == Format::Jsonl);
}

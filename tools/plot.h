// latte-sweep's results and plots: sweep points, their JSON lines, and a self-written SVG with two
// panels (PP t/s and TG t/s against N_KV), each with axes, ticks, axis labels and a legend.
#pragma once
#include <string>
#include <vector>

namespace latte::plot {

// One step of a sweep (sweep-bench's row): a ubatch of PP tokens decoded at N_KV cached tokens,
// and TG tokens generated at N_KV.
struct SweepPoint {
    int pp = 0, tg = 0, n_kv = 0;
    double t_pp = 0, s_pp = 0, t_tg = 0, s_tg = 0;  // seconds, tokens/s
};

struct Series {
    std::string label;
    std::vector<SweepPoint> points;
};

// {"pp": 512, "tg": 128, "n_kv": 0, "t_pp": 1.2, "s_pp": 426.7, "t_tg": 3.4, "s_tg": 37.6}
std::string to_jsonl(const SweepPoint& p);
// Reads such lines (blank lines skipped). Throws std::runtime_error naming the file and line.
std::vector<SweepPoint> read_jsonl(const std::string& path);
// The sweep-bench table header (two lines) and one row.
std::string table_header();
std::string table_row(const SweepPoint& p);

// Tick positions of a "nice" 1-2-5 step covering [lo, hi], about `target` of them.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);
// The SVG document (UTF-8, standalone). Series with no points are drawn in the legend only.
std::string svg(const std::vector<Series>& series, const std::string& title);
// "runs/v3-q8.jsonl" -> "v3-q8".
std::string label_from_path(const std::string& path);

}  // namespace latte::plot

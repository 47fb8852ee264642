// latte-sweep's JSON lines, table and SVG plot (see plot.h).
#include "plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace latte::plot {

namespace {

std::string fmt(const char* f, double x) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, x);
    return buf;
}

// The number after "key": in a flat JSON object; false when missing or not a number.
bool json_number(const std::string& line, const std::string& key, double& out) {
    const std::string k = "\"" + key + "\"";
    size_t p = line.find(k);
    if (p == std::string::npos) return false;
    p = line.find(':', p + k.size());
    if (p == std::string::npos) return false;
    const char* b = line.c_str() + p + 1;
    char* e = nullptr;
    out = std::strtod(b, &e);
    return e != b && std::isfinite(out);
}

std::string xml_escape(const std::string& s) {
    std::string o;
    for (char c : s) {
        switch (c) {
            case '&': o += "&amp;"; break;
            case '<': o += "&lt;"; break;
            case '>': o += "&gt;"; break;
            case '"': o += "&quot;"; break;
            case '\'': o += "&apos;"; break;
            default:
                if (static_cast<unsigned char>(c) >= 0x20 || c == '\t') o += c;  // XML 1.0 forbids other controls
        }
    }
    return o;
}

std::string tick_label(double v, double step) {
    if (std::fabs(v) >= 10000 && step >= 1000) return fmt("%.0fk", v / 1000.0);
    if (step >= 1) return fmt("%.0f", v);
    if (step >= 0.1) return fmt("%.1f", v);
    if (step >= 0.01) return fmt("%.2f", v);
    return fmt("%g", v);
}

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};

}  // namespace

std::string to_jsonl(const SweepPoint& p) {
    return "{\"pp\": " + std::to_string(p.pp) + ", \"tg\": " + std::to_string(p.tg) + ", \"n_kv\": " +
           std::to_string(p.n_kv) + ", \"t_pp\": " + fmt("%.6f", p.t_pp) + ", \"s_pp\": " + fmt("%.3f", p.s_pp) +
           ", \"t_tg\": " + fmt("%.6f", p.t_tg) + ", \"s_tg\": " + fmt("%.3f", p.s_tg) + "}";
}

std::vector<SweepPoint> read_jsonl(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read '" + path + "'");
    std::vector<SweepPoint> out;
    std::string line;
    int lineno = 0;
    while (std::getline(in, line)) {
        ++lineno;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        SweepPoint p;
        double pp, tg, n_kv;
        if (!json_number(line, "pp", pp) || !json_number(line, "tg", tg) || !json_number(line, "n_kv", n_kv) ||
            !json_number(line, "t_pp", p.t_pp) || !json_number(line, "s_pp", p.s_pp) ||
            !json_number(line, "t_tg", p.t_tg) || !json_number(line, "s_tg", p.s_tg))
            throw std::runtime_error("'" + path + "' line " + std::to_string(lineno) +
                                     ": expected a latte-sweep JSON line with pp, tg, n_kv, t_pp, s_pp, t_tg, s_tg");
        p.pp = static_cast<int>(pp);
        p.tg = static_cast<int>(tg);
        p.n_kv = static_cast<int>(n_kv);
        out.push_back(p);
    }
    if (out.empty()) throw std::runtime_error("'" + path + "' holds no sweep rows");
    return out;
}

std::string table_header() {
    return "|    PP |     TG |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |\n"
           "|-------|--------|--------|----------|----------|----------|----------|\n";
}

std::string table_row(const SweepPoint& p) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "| %5d | %6d | %6d | %8.3f | %8.2f | %8.3f | %8.2f |\n", p.pp, p.tg, p.n_kv, p.t_pp,
                  p.s_pp, p.t_tg, p.s_tg);
    return buf;
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
    if (!(hi > lo)) hi = lo + 1.0;
    const double raw = (hi - lo) / std::max(target, 1);
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    const double r = raw / mag;
    const double step = (r <= 1.0 ? 1.0 : r <= 2.0 ? 2.0 : r <= 5.0 ? 5.0 : 10.0) * mag;
    std::vector<double> t;
    // From the first multiple of step >= lo to the first >= hi, so that the axis ends on a tick.
    const long first = static_cast<long>(std::ceil(lo / step - 1e-9)), last = static_cast<long>(std::ceil(hi / step - 1e-9));
    for (long k = first; k <= last; ++k) t.push_back(static_cast<double>(k) * step);
    return t;
}

std::string label_from_path(const std::string& path) {
    size_t b = path.find_last_of('/');
    b = b == std::string::npos ? 0 : b + 1;
    std::string name = path.substr(b);
    const size_t dot = name.rfind('.');
    if (dot != std::string::npos && dot > 0) name = name.substr(0, dot);
    return name;
}

std::string svg(const std::vector<Series>& series, const std::string& title) {
    // Two panels on the left, one legend (shared: same colour, same run) on the right.
    const double W = 980, H = 720;
    const double left = 80, right = 280, top = 60, panel_h = 250, gap = 80;
    const double plot_w = W - left - right;

    // x range over all series; y ranges per panel from 0.
    double xmax = 0, ypp = 0, ytg = 0;
    for (const auto& s : series)
        for (const auto& p : s.points) {
            xmax = std::max(xmax, static_cast<double>(p.n_kv));
            ypp = std::max(ypp, p.s_pp);
            ytg = std::max(ytg, p.s_tg);
        }
    const auto xt = nice_ticks(0, xmax > 0 ? xmax : 1);
    const double xhi = std::max(xt.back(), xmax > 0 ? xmax : 1.0);

    std::string o;
    o += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    o += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", W) + "\" height=\"" + fmt("%.0f", H) +
         "\" viewBox=\"0 0 " + fmt("%.0f", W) + " " + fmt("%.0f", H) +
         "\" font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"12\">\n";
    o += "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
    o += "<text x=\"" + fmt("%.0f", W / 2) + "\" y=\"28\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">" +
         xml_escape(title) + "</text>\n";

    struct Panel {
        const char* ylabel;
        double ymax;
        bool pp;
    };
    const Panel panels[2] = {{"PP speed (tokens/s)", ypp, true}, {"TG speed (tokens/s)", ytg, false}};
    for (int pi = 0; pi < 2; ++pi) {
        const Panel& P = panels[pi];
        const double y0 = top + pi * (panel_h + gap);  // panel top
        const auto yt = nice_ticks(0, P.ymax > 0 ? P.ymax : 1);
        const double yhi = std::max(yt.back(), P.ymax > 0 ? P.ymax : 1.0);
        const auto X = [&](double x) { return left + x / xhi * plot_w; };
        const auto Y = [&](double y) { return y0 + panel_h - y / yhi * panel_h; };
        o += "<g class=\"panel\" id=\"" + std::string(P.pp ? "pp" : "tg") + "\">\n";
        // grid and ticks
        for (double v : yt) {
            o += "<line x1=\"" + fmt("%.1f", left) + "\" y1=\"" + fmt("%.1f", Y(v)) + "\" x2=\"" + fmt("%.1f", left + plot_w) +
                 "\" y2=\"" + fmt("%.1f", Y(v)) + "\" stroke=\"#e0e0e0\"/>\n";
            o += "<text x=\"" + fmt("%.1f", left - 6) + "\" y=\"" + fmt("%.1f", Y(v) + 4) + "\" text-anchor=\"end\">" +
                 tick_label(v, yt.size() > 1 ? yt[1] - yt[0] : 1) + "</text>\n";
        }
        for (double v : xt) {
            o += "<line x1=\"" + fmt("%.1f", X(v)) + "\" y1=\"" + fmt("%.1f", y0 + panel_h) + "\" x2=\"" + fmt("%.1f", X(v)) +
                 "\" y2=\"" + fmt("%.1f", y0 + panel_h + 5) + "\" stroke=\"black\"/>\n";
            o += "<text x=\"" + fmt("%.1f", X(v)) + "\" y=\"" + fmt("%.1f", y0 + panel_h + 18) + "\" text-anchor=\"middle\">" +
                 tick_label(v, xt.size() > 1 ? xt[1] - xt[0] : 1) + "</text>\n";
        }
        // axes
        o += "<line x1=\"" + fmt("%.1f", left) + "\" y1=\"" + fmt("%.1f", y0) + "\" x2=\"" + fmt("%.1f", left) + "\" y2=\"" +
             fmt("%.1f", y0 + panel_h) + "\" stroke=\"black\"/>\n";
        o += "<line x1=\"" + fmt("%.1f", left) + "\" y1=\"" + fmt("%.1f", y0 + panel_h) + "\" x2=\"" +
             fmt("%.1f", left + plot_w) + "\" y2=\"" + fmt("%.1f", y0 + panel_h) + "\" stroke=\"black\"/>\n";
        // axis labels
        o += "<text x=\"" + fmt("%.1f", left + plot_w / 2) + "\" y=\"" + fmt("%.1f", y0 + panel_h + 38) +
             "\" text-anchor=\"middle\">N_KV (tokens in the cache)</text>\n";
        o += "<text transform=\"translate(" + fmt("%.1f", 22.0) + "," + fmt("%.1f", y0 + panel_h / 2) +
             ") rotate(-90)\" text-anchor=\"middle\">" + P.ylabel + "</text>\n";
        // series
        for (size_t si = 0; si < series.size(); ++si) {
            const char* color = kColors[si % std::size(kColors)];
            const auto& pts = series[si].points;
            if (pts.empty()) continue;
            std::string d;
            for (const auto& p : pts)
                d += fmt("%.1f", X(p.n_kv)) + "," + fmt("%.1f", Y(P.pp ? p.s_pp : p.s_tg)) + " ";
            o += "<polyline fill=\"none\" stroke=\"" + std::string(color) + "\" stroke-width=\"2\" points=\"" + d + "\"/>\n";
            for (const auto& p : pts)
                o += "<circle cx=\"" + fmt("%.1f", X(p.n_kv)) + "\" cy=\"" + fmt("%.1f", Y(P.pp ? p.s_pp : p.s_tg)) +
                     "\" r=\"3\" fill=\"" + color + "\"/>\n";
        }
        o += "</g>\n";
    }
    // legend
    double ly = top + 14;
    const double lx = left + plot_w + 30;
    o += "<g class=\"legend\">\n";
    o += "<rect x=\"" + fmt("%.1f", lx - 8) + "\" y=\"" + fmt("%.1f", top) + "\" width=\"" + fmt("%.1f", right - 30) +
         "\" height=\"" + fmt("%.1f", 20.0 * static_cast<double>(series.size()) + 8) + "\" fill=\"white\" stroke=\"#999\"/>\n";
    for (size_t si = 0; si < series.size(); ++si) {
        const char* color = kColors[si % std::size(kColors)];
        o += "<line x1=\"" + fmt("%.1f", lx) + "\" y1=\"" + fmt("%.1f", ly) + "\" x2=\"" + fmt("%.1f", lx + 24) +
             "\" y2=\"" + fmt("%.1f", ly) + "\" stroke=\"" + color + "\" stroke-width=\"2\"/>\n";
        o += "<circle cx=\"" + fmt("%.1f", lx + 12) + "\" cy=\"" + fmt("%.1f", ly) + "\" r=\"3\" fill=\"" + color + "\"/>\n";
        o += "<text x=\"" + fmt("%.1f", lx + 32) + "\" y=\"" + fmt("%.1f", ly + 4) + "\">" + xml_escape(series[si].label) +
             "</text>\n";
        ly += 20;
    }
    o += "</g>\n";
    o += "</svg>\n";
    return o;
}

}  // namespace latte::plot

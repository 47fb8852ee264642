// Tests of latte-sweep's pieces: the table, the JSON lines, the ticks and the SVG plot.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "plot.h"

using latte::plot::Series;
using latte::plot::SweepPoint;

namespace {

// A tiny XML well-formedness check: one root element, every start tag closed by the matching end
// tag, attributes quoted, no bare '<' or '&' in text, only the five predefined entities. Returns
// "" when well-formed, else what is wrong.
std::string xml_problem(const std::string& s) {
    std::vector<std::string> stack;
    size_t i = 0;
    int roots = 0;
    auto is_name = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ':' || c == '.'; };
    auto check_text = [&](size_t b, size_t e) -> std::string {
        for (size_t k = b; k < e; ++k) {
            if (s[k] == '&') {
                const size_t semi = s.find(';', k);
                if (semi == std::string::npos || semi >= e) return "bare '&'";
                const std::string ent = s.substr(k + 1, semi - k - 1);
                if (ent != "amp" && ent != "lt" && ent != "gt" && ent != "quot" && ent != "apos") return "unknown entity &" + ent + ";";
            }
        }
        return "";
    };
    while (i < s.size()) {
        const size_t lt = s.find('<', i);
        const size_t text_end = lt == std::string::npos ? s.size() : lt;
        if (auto p = check_text(i, text_end); !p.empty()) return p;
        if (stack.empty() && s.find_first_not_of(" \t\r\n", i) < text_end) return "text outside the root element";
        if (lt == std::string::npos) break;
        if (s.compare(lt, 5, "<?xml") == 0) {
            const size_t e = s.find("?>", lt);
            if (e == std::string::npos || lt != 0) return "bad XML declaration";
            i = e + 2;
            continue;
        }
        if (s.compare(lt, 2, "</") == 0) {
            size_t k = lt + 2;
            while (k < s.size() && is_name(s[k])) ++k;
            const std::string name = s.substr(lt + 2, k - lt - 2);
            if (k >= s.size() || s[k] != '>') return "bad end tag " + name;
            if (stack.empty() || stack.back() != name) return "end tag </" + name + "> does not match";
            stack.pop_back();
            i = k + 1;
            continue;
        }
        size_t k = lt + 1;
        while (k < s.size() && is_name(s[k])) ++k;
        const std::string name = s.substr(lt + 1, k - lt - 1);
        if (name.empty()) return "bare '<'";
        // attributes
        while (true) {
            while (k < s.size() && std::isspace(static_cast<unsigned char>(s[k]))) ++k;
            if (k >= s.size()) return "unterminated tag " + name;
            if (s[k] == '>' || s.compare(k, 2, "/>") == 0) break;
            const size_t an = k;
            while (k < s.size() && is_name(s[k])) ++k;
            if (k == an || k >= s.size() || s[k] != '=') return "bad attribute in " + name;
            ++k;
            if (k >= s.size() || (s[k] != '"' && s[k] != '\'')) return "unquoted attribute in " + name;
            const size_t close = s.find(s[k], k + 1);
            if (close == std::string::npos) return "unterminated attribute in " + name;
            if (s.substr(k + 1, close - k - 1).find('<') != std::string::npos) return "'<' in an attribute of " + name;
            if (auto p = check_text(k + 1, close); !p.empty()) return p;
            k = close + 1;
        }
        if (stack.empty()) {
            if (++roots > 1) return "more than one root element";
        }
        if (s[k] == '/') {
            i = k + 2;
        } else {
            stack.push_back(name);
            i = k + 1;
        }
    }
    if (!stack.empty()) return "unclosed <" + stack.back() + ">";
    if (roots != 1) return "no root element";
    return "";
}

size_t count(const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
    return n;
}

std::vector<SweepPoint> points(int n, double pp0) {
    std::vector<SweepPoint> v;
    for (int i = 0; i < n; ++i) {
        SweepPoint p;
        p.pp = 512;
        p.tg = 128;
        p.n_kv = i * 512;
        p.t_pp = 1.0 + i;
        p.s_pp = pp0 / (1.0 + 0.1 * i);
        p.t_tg = 2.0;
        p.s_tg = 64.0 - i;
        v.push_back(p);
    }
    return v;
}

}  // namespace

TEST_CASE("sweep: the XML check itself rejects malformed documents", "[sweep]") {
    CHECK(xml_problem("<svg><g></g></svg>").empty());
    CHECK(xml_problem("<?xml version=\"1.0\"?>\n<svg a=\"1\"><line/></svg>\n").empty());
    CHECK_FALSE(xml_problem("<svg><g></svg>").empty());
    CHECK_FALSE(xml_problem("<svg a=1></svg>").empty());
    CHECK_FALSE(xml_problem("<svg>a & b</svg>").empty());
    CHECK_FALSE(xml_problem("<svg>a < b</svg>").empty());
    CHECK_FALSE(xml_problem("<svg></svg><svg></svg>").empty());
    CHECK_FALSE(xml_problem("<svg>").empty());
}

TEST_CASE("sweep: the table follows sweep-bench", "[sweep]") {
    CHECK(latte::plot::table_header().rfind("|    PP |     TG |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |\n", 0) == 0);
    SweepPoint p{512, 128, 1024, 1.5, 341.333, 4.0, 32.0};
    CHECK(latte::plot::table_row(p) == "|   512 |    128 |   1024 |    1.500 |   341.33 |    4.000 |    32.00 |\n");
}

TEST_CASE("sweep: JSON lines round-trip through a file", "[sweep]") {
    const std::string path = std::string(LATTE_BUILD_DIR) + "/sweep-test-roundtrip.jsonl";
    const auto pts = points(3, 1000.0);
    {
        std::ofstream f(path);
        for (const auto& p : pts) f << latte::plot::to_jsonl(p) << "\n\n";
    }
    const auto back = latte::plot::read_jsonl(path);
    REQUIRE(back.size() == 3);
    CHECK(back[2].n_kv == 1024);
    CHECK(back[2].pp == 512);
    CHECK(back[2].tg == 128);
    CHECK(back[1].s_pp == Approx(pts[1].s_pp).epsilon(1e-5));
    CHECK(back[2].s_tg == Approx(62.0));
    {
        std::ofstream f(path);
        f << "{\"pp\": 1}\n";
    }
    CHECK_THROWS_WITH(latte::plot::read_jsonl(path), Catch::Contains("line 1"));
    std::remove(path.c_str());
    CHECK_THROWS_WITH(latte::plot::read_jsonl(path), Catch::Contains("cannot read"));
    CHECK(latte::plot::label_from_path("runs/v3-q8.jsonl") == "v3-q8");
    CHECK(latte::plot::label_from_path("plain") == "plain");
}

TEST_CASE("sweep: ticks are 1-2-5 steps that cover the range", "[sweep]") {
    CHECK(latte::plot::nice_ticks(0, 224) == std::vector<double>{0, 50, 100, 150, 200, 250});
    CHECK(latte::plot::nice_ticks(0, 2658) == std::vector<double>{0, 1000, 2000, 3000});
    const auto f = latte::plot::nice_ticks(0, 1);
    REQUIRE(f.size() == 6);
    CHECK(f[1] == Approx(0.2));
    CHECK(f.back() == Approx(1.0));
    const auto t = latte::plot::nice_ticks(0, 0);  // degenerate range: still an axis
    CHECK(t.size() >= 2);
}

TEST_CASE("sweep: the SVG is well-formed, with two panels, labels, ticks and a legend", "[sweep]") {
    const std::vector<Series> series = {{"mla 1 <q8_0> & f16", points(8, 2000.0)}, {"mla 3", points(5, 1500.0)}};
    const std::string doc = latte::plot::svg(series, "tiny \"sweep\"");
    INFO(doc.substr(0, 400));
    CHECK(xml_problem(doc).empty());
    CHECK(doc.find("<svg xmlns=\"http://www.w3.org/2000/svg\"") != std::string::npos);
    CHECK(count(doc, "<g class=\"panel\"") == 2);
    CHECK(count(doc, "<polyline") == 4);  // 2 series x 2 panels
    CHECK(count(doc, "<circle") == 2 * (8 + 5) + 2);  // markers + the legend's
    CHECK(doc.find("PP speed (tokens/s)") != std::string::npos);
    CHECK(doc.find("TG speed (tokens/s)") != std::string::npos);
    CHECK(count(doc, "N_KV (tokens in the cache)") == 2);
    CHECK(doc.find("mla 1 &lt;q8_0&gt; &amp; f16") != std::string::npos);  // escaped legend
    CHECK(doc.find("tiny &quot;sweep&quot;") != std::string::npos);
    CHECK(doc.find(">3000<") != std::string::npos);  // x ticks reach past the last N_KV (3584)
    CHECK(doc.find(">4000<") != std::string::npos);
    CHECK(doc.find(">2000<") != std::string::npos);  // PP panel's top tick
    // An empty series still gives a well-formed document.
    CHECK(xml_problem(latte::plot::svg({{"none", {}}}, "empty")).empty());
}

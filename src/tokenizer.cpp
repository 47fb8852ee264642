// Byte-level BPE tokenizer (GPT-2 style, as DeepSeek GGUFs carry it) and a small BPE trainer.
#include "latte/tokenizer.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <map>
#include <queue>
#include <tuple>

#include "latte/error.h"
#include "latte/gguf.h"
#include "unicode_tables.h"

namespace latte {

namespace {

// ---- GPT-2 byte <-> unicode ------------------------------------------------------------------

void append_utf8(std::string& s, uint32_t cp) {
    if (cp < 0x80) {
        s += static_cast<char>(cp);
    } else if (cp < 0x800) {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        s += static_cast<char>(0xE0 | (cp >> 12));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        s += static_cast<char>(0xF0 | (cp >> 18));
        s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

struct ByteMap {
    std::array<uint32_t, 256> cp{};         // byte -> code point
    std::array<std::string, 256> text;      // byte -> UTF-8 of that code point
    std::array<int16_t, 324> byte_of{};     // code point (< 256 + 68) -> byte, -1 if none
    ByteMap() {
        byte_of.fill(-1);
        uint32_t n = 0;
        for (uint32_t b = 0; b < 256; ++b) {
            const bool self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
            cp[b] = self ? b : 256 + n++;
            append_utf8(text[b], cp[b]);
            byte_of[cp[b]] = static_cast<int16_t>(b);
        }
    }
};

const ByteMap& byte_map() {
    static const ByteMap m;
    return m;
}

// ---- UTF-8 ----------------------------------------------------------------------------------

// Decodes one code point at s[i]. Returns its length (1..4); on an invalid sequence returns 1 and
// sets cp = 0xFFFFFFFF (the byte is then a unit of its own).
size_t utf8_next(std::string_view s, size_t i, uint32_t& cp) {
    const auto u = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
    const uint8_t c = u(i);
    const size_t left = s.size() - i;
    cp = 0xFFFFFFFFu;
    if (c < 0x80) { cp = c; return 1; }
    const auto cont = [&](size_t k) { return (u(k) & 0xC0) == 0x80; };
    if (c >= 0xC2 && c <= 0xDF) {
        if (left >= 2 && cont(i + 1)) { cp = ((c & 0x1Fu) << 6) | (u(i + 1) & 0x3Fu); return 2; }
        return 1;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (left < 3 || !cont(i + 1) || !cont(i + 2)) return 1;
        if (c == 0xE0 && u(i + 1) < 0xA0) return 1;  // overlong
        if (c == 0xED && u(i + 1) > 0x9F) return 1;  // surrogates
        cp = ((c & 0x0Fu) << 12) | ((u(i + 1) & 0x3Fu) << 6) | (u(i + 2) & 0x3Fu);
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (left < 4 || !cont(i + 1) || !cont(i + 2) || !cont(i + 3)) return 1;
        if (c == 0xF0 && u(i + 1) < 0x90) return 1;  // overlong
        if (c == 0xF4 && u(i + 1) > 0x8F) return 1;  // > U+10FFFF
        cp = ((c & 0x07u) << 18) | ((u(i + 1) & 0x3Fu) << 12) | ((u(i + 2) & 0x3Fu) << 6) | (u(i + 3) & 0x3Fu);
        return 4;
    }
    return 1;
}

// ---- pre-tokenizer --------------------------------------------------------------------------
//
// DeepSeek-V3's pre-tokenizer is a sequence of three regex splits (each keeps both the matches and
// the text between them as pieces; later splits work inside the pieces of earlier ones):
//   1. \p{N}{1,3}
//   2. [一-龥぀-ゟ゠-ヿ]+
//   3. [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+ | [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+ |
//      ' '?[\p{P}\p{S}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
// The splitter below implements those by hand. Code points are classified by their Unicode general
// category (src/unicode_tables.h, generated from the UCD by tools/gen_unicode_tables.py): L and M
// as letters (\p{M} only ever appears next to \p{L} in these regexes, so the two need not be told
// apart), N as numbers, P and S as punctuation; Unicode White_Space as \s; everything else (C*,
// non-space Z*, unassigned) as "other". A byte of invalid UTF-8 is a unit of its own that counts as
// a letter. Unknown `pre` values get this split too; "deepseek-llm" has its own (pre_split_llm).
// tests/pretok_check.py checks both splits against Python's `regex` running DeepSeek's patterns.

enum class Cls : uint8_t { Letter, Digit, Punct, Space, Newline, Other };

Cls classify(uint32_t cp) {
    if (cp == 0xFFFFFFFFu) return Cls::Letter;  // invalid UTF-8 byte
    if (cp < 0x80) {
        if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return Cls::Letter;
        if (cp >= '0' && cp <= '9') return Cls::Digit;
        if (cp == '\r' || cp == '\n') return Cls::Newline;
        if (cp == ' ' || cp == '\t' || cp == '\v' || cp == '\f') return Cls::Space;
        if (cp >= 0x21 && cp <= 0x7E) return Cls::Punct;
        return Cls::Other;
    }
    if (cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
        cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000)
        return Cls::Space;
    // The general category, by binary search over the generated ranges.
    size_t lo = 0, hi = unicode::kRangeCount;
    while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        if (unicode::kRanges[mid].hi < cp) lo = mid + 1;
        else hi = mid;
    }
    if (lo == unicode::kRangeCount || unicode::kRanges[lo].lo > cp) return Cls::Other;
    switch (unicode::kRanges[lo].cls) {
        case unicode::kLetter: return Cls::Letter;
        case unicode::kNumber: return Cls::Digit;
        default: return Cls::Punct;
    }
}

bool is_cjk(uint32_t cp) { return (cp >= 0x4E00 && cp <= 0x9FA5) || (cp >= 0x3040 && cp <= 0x30FF); }

struct Unit {
    uint32_t off;  // byte offset in the text
    uint32_t cp;   // code point, 0xFFFFFFFF for an invalid byte
    Cls cls;
};

bool is_space(Cls c) { return c == Cls::Space || c == Cls::Newline; }
bool ascii_letter(uint32_t cp) { return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z'); }
bool ascii_punct(uint32_t cp) { return cp < 0x80 && classify(cp) == Cls::Punct; }
bool is_nl(uint32_t cp) { return cp == '\r' || cp == '\n'; }

// Length (in units) of the regex-3 match at u[i] within [i, e), 0 if none matches there.
size_t match3(const std::vector<Unit>& u, size_t i, size_t e) {
    const Cls c = u[i].cls;
    const bool has_next = i + 1 < e;
    // [ASCII punct][A-Za-z]+
    if (ascii_punct(u[i].cp) && has_next && ascii_letter(u[i + 1].cp)) {
        size_t j = i + 1;
        while (j < e && ascii_letter(u[j].cp)) ++j;
        return j - i;
    }
    // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
    if (c == Cls::Letter || (c != Cls::Newline && c != Cls::Punct && has_next && u[i + 1].cls == Cls::Letter)) {
        size_t j = c == Cls::Letter ? i : i + 1;
        while (j < e && u[j].cls == Cls::Letter) ++j;
        return j - i;
    }
    // ' '?[\p{P}\p{S}]+[\r\n]*
    if (c == Cls::Punct || (u[i].cp == ' ' && has_next && u[i + 1].cls == Cls::Punct)) {
        size_t j = c == Cls::Punct ? i : i + 1;
        while (j < e && u[j].cls == Cls::Punct) ++j;
        while (j < e && is_nl(u[j].cp)) ++j;
        return j - i;
    }
    if (is_space(c)) {
        size_t j = i, last_nl = SIZE_MAX;
        for (; j < e && is_space(u[j].cls); ++j)
            if (u[j].cls == Cls::Newline) last_nl = j;
        if (last_nl != SIZE_MAX) return last_nl + 1 - i;  // \s*[\r\n]+
        if (j == e) return j - i;                          // \s+(?!\S) at the end
        if (j - 1 > i) return j - 1 - i;                   // \s+(?!\S): leave one for the next word
        return 1;                                          // \s+
    }
    return 0;
}

// Byte ranges [begin, end) of the pre-tokens of `text`.
std::vector<std::pair<size_t, size_t>> pre_split(std::string_view text) {
    std::vector<Unit> u;
    u.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        uint32_t cp;
        const size_t n = utf8_next(text, i, cp);
        u.push_back({static_cast<uint32_t>(i), cp, classify(cp)});
        i += n;
    }
    const size_t n = u.size();
    const auto off = [&](size_t k) { return k < n ? static_cast<size_t>(u[k].off) : text.size(); };
    std::vector<std::pair<size_t, size_t>> out;
    // Regex 3 inside the unit range [b, e).
    const auto split3 = [&](size_t b, size_t e) {
        size_t gap = SIZE_MAX;
        for (size_t i = b; i < e;) {
            const size_t m = match3(u, i, e);
            if (m == 0) {
                if (gap == SIZE_MAX) gap = i;
                ++i;
                continue;
            }
            if (gap != SIZE_MAX) out.emplace_back(off(gap), off(i)), gap = SIZE_MAX;
            out.emplace_back(off(i), off(i + m));
            i += m;
        }
        if (gap != SIZE_MAX) out.emplace_back(off(gap), off(e));
    };
    // Regexes 1 and 2: digit runs cut into threes, CJK runs; the text between goes to regex 3.
    size_t gap = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        if (u[i].cls == Cls::Digit) {
            while (j < n && j - i < 3 && u[j].cls == Cls::Digit) ++j;
        } else if (is_cjk(u[i].cp)) {
            while (j < n && is_cjk(u[j].cp)) ++j;
        } else {
            ++i;
            continue;
        }
        if (gap < i) split3(gap, i);
        split3(i, j);
        i = gap = j;
    }
    if (gap < n) split3(gap, n);
    return out;
}

// ---- the DeepSeek-LLM (V2) pre-tokenizer ----------------------------------------------------
//
// tokenizer.ggml.pre = "deepseek-llm": six regex splits in sequence (each applied inside every piece
// the earlier ones made, matches and gaps alike, as Hugging Face's Sequence of Split(Isolated) and
// llama.cpp's unicode_regex_split do):
//   1. [\r\n]
//   2. \s?[A-Za-zµÀ-ÖØ-öø-ƺ...𞤀-𞥃]+   (an explicit list of cased-letter ranges: kLlmLetters)
//   3. \s?[!-/:-~！-／：-～‘-‟　-。]+     (note: :-~ holds A-Z and a-z, ！-／：-～ the full-width ones)
//   4. \s+$
//   5. [一-龥ࠀ-一가-퟿]+                   (U+0800..U+9FA5 and U+AC00..U+D7FF)
//   6. \p{N}+
// Classes are exact code point ranges here but for \s (Unicode White_Space, as for V3) and \p{N}
// (the generated table). A byte of invalid UTF-8 is in none of the classes: it ends up in a gap piece.

struct CpRange { uint32_t lo, hi; };

// Regex 2's class, range by range as DeepSeek's tokenizer.json writes it. Mind U+1F7D, U+1FBE,
// U+1FD3, U+1FDB, U+2126 (OHM SIGN) and U+212A (KELVIN SIGN): NFC maps each to another code point,
// so a copy of the pattern through a normalising tool turns ranges like "ῖ-Ί" into invalid ones.
constexpr CpRange kLlmLetters[] = {
    {'A', 'Z'}, {'a', 'z'}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA}, {0x1BC, 0x1BF},
    {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377}, {0x37B, 0x37D}, {0x37F, 0x37F},
    {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C}, {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481},
    {0x48A, 0x52F}, {0x531, 0x556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D},
    {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D},
    {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC},
    {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102},
    {0x2107, 0x2107}, {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126},
    {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149},
    {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3},
    {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF},
    {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F},
    {0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF},
    {0x1E900, 0x1E943},
};

bool in_ranges(const CpRange* r, size_t n, uint32_t cp) {
    for (size_t i = 0; i < n; ++i)
        if (cp >= r[i].lo && cp <= r[i].hi) return true;
    return false;
}
bool llm_letter(uint32_t cp) {
    if (cp < 0x80) return ascii_letter(cp);
    return in_ranges(kLlmLetters, std::size(kLlmLetters), cp);
}
bool llm_punct(uint32_t cp) {  // [!-/:-~！-／：-～‘-‟　-。]
    return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x7E) || (cp >= 0xFF01 && cp <= 0xFF0F) ||
           (cp >= 0xFF1A && cp <= 0xFF5E) || (cp >= 0x2018 && cp <= 0x201F) || (cp >= 0x3000 && cp <= 0x3002);
}
bool llm_cjk(uint32_t cp) { return (cp >= 0x0800 && cp <= 0x9FA5) || (cp >= 0xAC00 && cp <= 0xD7FF); }

// \s?[class]+ : the leftmost match in [from, e) as [ms, me), false if none.
template <bool (*In)(uint32_t)>
bool space_run(const std::vector<Unit>& v, size_t from, size_t e, size_t& ms, size_t& me) {
    for (size_t i = from; i < e; ++i) {
        size_t j = i;
        if (is_space(v[i].cls) && i + 1 < e && In(v[i + 1].cp)) j = i + 1;
        else if (!In(v[i].cp)) continue;
        while (j < e && In(v[j].cp)) ++j;
        ms = i;
        me = j;
        return true;
    }
    return false;
}

// Byte ranges [begin, end) of the "deepseek-llm" pre-tokens of `text`.
std::vector<std::pair<size_t, size_t>> pre_split_llm(std::string_view text) {
    std::vector<Unit> u;
    u.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        uint32_t cp;
        const size_t n = utf8_next(text, i, cp);
        u.push_back({static_cast<uint32_t>(i), cp, classify(cp)});
        i += n;
    }
    const size_t n = u.size();
    using Find = bool (*)(const std::vector<Unit>&, size_t, size_t, size_t&, size_t&);
    // Each finder: the leftmost match in [from, e) as [ms, me), false if none.
    static const Find finders[] = {
        // 1. [\r\n]
        [](const std::vector<Unit>& v, size_t from, size_t e, size_t& ms, size_t& me) {
            for (size_t i = from; i < e; ++i)
                if (is_nl(v[i].cp)) { ms = i; me = i + 1; return true; }
            return false;
        },
        // 2. \s?[letters]+
        space_run<llm_letter>,
        // 3. \s?[punct]+
        space_run<llm_punct>,
        // 4. \s+$ (pieces hold no '\n' but a lone one, so '$' is the piece's end)
        [](const std::vector<Unit>& v, size_t from, size_t e, size_t& ms, size_t& me) {
            size_t t = e;
            while (t > from && is_space(v[t - 1].cls)) --t;
            if (t == e) return false;
            ms = t; me = e;
            return true;
        },
        // 5. [一-龥ࠀ-一가-퟿]+
        [](const std::vector<Unit>& v, size_t from, size_t e, size_t& ms, size_t& me) {
            for (size_t i = from; i < e; ++i)
                if (llm_cjk(v[i].cp)) {
                    size_t j = i;
                    while (j < e && llm_cjk(v[j].cp)) ++j;
                    ms = i; me = j;
                    return true;
                }
            return false;
        },
        // 6. \p{N}+
        [](const std::vector<Unit>& v, size_t from, size_t e, size_t& ms, size_t& me) {
            for (size_t i = from; i < e; ++i)
                if (v[i].cls == Cls::Digit) {
                    size_t j = i;
                    while (j < e && v[j].cls == Cls::Digit) ++j;
                    ms = i; me = j;
                    return true;
                }
            return false;
        },
    };
    std::vector<std::pair<size_t, size_t>> pieces, next;  // in units
    if (n > 0) pieces.emplace_back(0, n);
    for (Find find : finders) {
        next.clear();
        for (const auto& [b, e] : pieces) {
            size_t pos = b, ms = 0, me = 0;
            while (pos < e && find(u, pos, e, ms, me)) {
                if (ms > pos) next.emplace_back(pos, ms);
                next.emplace_back(ms, me);
                pos = me;
            }
            if (pos < e) next.emplace_back(pos, e);
        }
        pieces.swap(next);
    }
    const auto off = [&](size_t k) { return k < n ? static_cast<size_t>(u[k].off) : text.size(); };
    std::vector<std::pair<size_t, size_t>> out;
    out.reserve(pieces.size());
    for (const auto& [b, e] : pieces) out.emplace_back(off(b), off(e));
    return out;
}

std::vector<std::pair<size_t, size_t>> pre_split(std::string_view text, const std::string& pre) {
    return pre == "deepseek-llm" ? pre_split_llm(text) : pre_split(text);
}

std::string merge_label(size_t i) { return "merge " + std::to_string(i) + " "; }

}  // namespace

std::string bpe_byte_to_text(uint8_t b) { return byte_map().text[b]; }

int bpe_text_to_byte(std::string_view text) {
    if (text.empty()) return -1;
    uint32_t cp;
    const size_t n = utf8_next(text, 0, cp);
    if (n != text.size() || cp >= 324) return -1;
    return byte_map().byte_of[cp];
}

std::vector<std::string> bpe_pre_tokenize(std::string_view text, const std::string& pre) {
    std::vector<std::string> out;
    for (const auto& [b, e] : pre_split(text, pre)) out.emplace_back(text.substr(b, e - b));
    return out;
}

char bpe_char_class(uint32_t cp) {
    switch (classify(cp)) {
        case Cls::Letter: return 'L';
        case Cls::Digit: return 'N';
        case Cls::Punct: return 'P';
        case Cls::Space: return 's';
        case Cls::Newline: return 'n';
        case Cls::Other: break;
    }
    return 'O';
}

// ---- Tokenizer ------------------------------------------------------------------------------

Tokenizer::Tokenizer(std::vector<std::string> tokens, std::vector<int32_t> types, std::vector<std::string> merges,
                     int32_t bos, int32_t eos, std::string pre, bool add_bos)
    : tokens_(std::move(tokens)), types_(std::move(types)), merges_(std::move(merges)), bos_(bos), eos_(eos),
      pre_(std::move(pre)), add_bos_(add_bos) {
    build_index();
}

void Tokenizer::build_index() {
    const size_t n = tokens_.size();
    if (n == 0) throw Error("tokenizer: the token list is empty");
    if (n > static_cast<size_t>(INT32_MAX)) throw Error("tokenizer: too many tokens");
    if (types_.empty()) types_.assign(n, static_cast<int32_t>(TokenType::Normal));
    if (types_.size() != n)
        throw Error("tokenizer: " + std::to_string(types_.size()) + " token types for " + std::to_string(n) +
                    " tokens");
    for (size_t i = 0; i < n; ++i)
        if (types_[i] < 0 || types_[i] > 6)
            throw Error("tokenizer: token " + std::to_string(i) + " has type " + std::to_string(types_[i]) +
                        ", expected 0..6");
    const auto check_id = [&](int32_t id, const char* what) {
        if (id < -1 || id >= static_cast<int32_t>(n))
            throw Error(std::string("tokenizer: ") + what + " token id " + std::to_string(id) + " is outside [-1, " +
                        std::to_string(n) + ")");
    };
    check_id(bos_, "bos");
    check_id(eos_, "eos");

    token_id_.clear();
    token_id_.reserve(n);
    for (size_t i = 0; i < n; ++i) token_id_.emplace(tokens_[i], static_cast<int32_t>(i));

    const ByteMap& bm = byte_map();
    byte_id_.assign(256, -1);
    for (int b = 0; b < 256; ++b) {
        const auto it = token_id_.find(bm.text[b]);
        if (it == token_id_.end())
            throw Error("tokenizer: the byte token '" + bm.text[b] + "' (byte " + std::to_string(b) +
                        ") is missing from the vocabulary");
        byte_id_[b] = it->second;
    }

    merge_rank_.clear();
    merge_rank_.reserve(merges_.size());
    for (size_t i = 0; i < merges_.size(); ++i) {
        const std::string& m = merges_[i];
        const size_t sp = m.find(' ', 1);  // a token may itself be " " in odd vocabularies: skip position 0
        if (sp == std::string::npos || sp + 1 >= m.size())
            throw Error("tokenizer: " + merge_label(i) + "'" + m + "' is not of the form 'left right'");
        const std::string l = m.substr(0, sp), r = m.substr(sp + 1);
        for (const std::string* t : {&l, &r})
            if (!token_id_.count(*t))
                throw Error("tokenizer: " + merge_label(i) + "'" + m + "' references '" + *t +
                            "', which is not a token");
        merge_rank_.emplace(m, static_cast<int32_t>(i));
    }

    // Special tokens, sorted by (first byte, length descending, id) for longest-match lookup.
    special_ids_.clear();
    for (size_t i = 0; i < n; ++i) {
        const auto t = static_cast<TokenType>(types_[i]);
        if ((t == TokenType::Control || t == TokenType::UserDefined) && !tokens_[i].empty())
            special_ids_.push_back(static_cast<int32_t>(i));
    }
    std::sort(special_ids_.begin(), special_ids_.end(), [&](int32_t a, int32_t b) {
        const std::string &ta = tokens_[a], &tb = tokens_[b];
        if (ta[0] != tb[0]) return static_cast<uint8_t>(ta[0]) < static_cast<uint8_t>(tb[0]);
        if (ta.size() != tb.size()) return ta.size() > tb.size();
        return a < b;
    });
}

Tokenizer Tokenizer::from_gguf(const GGUFFile& f) {
    const std::string& path = f.path();
    const std::string model = f.get_str("tokenizer.ggml.model");
    if (model != "gpt2") throw Error(path + ": tokenizer.ggml.model is '" + model + "', expected 'gpt2'");
    std::string pre = f.get_str_or("tokenizer.ggml.pre", "default");
    std::vector<std::string> tokens = f.get_str_array("tokenizer.ggml.tokens");
    std::vector<int32_t> types;
    if (f.has("tokenizer.ggml.token_type")) {
        const std::vector<int64_t> t = f.get_int_array("tokenizer.ggml.token_type");
        if (t.size() != tokens.size())
            throw Error(path + ": tokenizer.ggml.token_type has " + std::to_string(t.size()) +
                        " entries, expected " + std::to_string(tokens.size()) + " (one per token)");
        types.resize(t.size());
        for (size_t i = 0; i < t.size(); ++i) {
            if (t[i] < 0 || t[i] > 6)
                throw Error(path + ": tokenizer.ggml.token_type[" + std::to_string(i) + "] is " +
                            std::to_string(t[i]) + ", expected 0..6");
            types[i] = static_cast<int32_t>(t[i]);
        }
    } else {
        types.assign(tokens.size(), static_cast<int32_t>(TokenType::Normal));
    }
    std::vector<std::string> merges = f.get_str_array("tokenizer.ggml.merges");
    const auto id_or = [&](const std::string& key) -> int32_t {
        if (!f.has(key)) return -1;
        const int64_t v = f.get_i64(key);
        if (v < 0 || v >= static_cast<int64_t>(tokens.size()))
            throw Error(path + ": " + key + " is " + std::to_string(v) + ", expected a token id in [0, " +
                        std::to_string(tokens.size()) + ")");
        return static_cast<int32_t>(v);
    };
    const int32_t bos = id_or("tokenizer.ggml.bos_token_id");
    const int32_t eos = id_or("tokenizer.ggml.eos_token_id");
    const bool add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", true);
    try {
        return Tokenizer(std::move(tokens), std::move(types), std::move(merges), bos, eos, std::move(pre), add_bos);
    } catch (const Error& e) {
        throw Error(path + ": " + e.what());
    }
}

void Tokenizer::encode_word(std::string_view w, std::vector<int32_t>& out) const {
    const size_t n = w.size();
    if (n == 0) return;
    if (n == 1) {
        out.push_back(byte_id_[static_cast<uint8_t>(w[0])]);
        return;
    }
    const ByteMap& bm = byte_map();
    std::string spelled;  // the word in GPT-2 spelling
    std::vector<uint32_t> off(n + 1);
    for (size_t k = 0; k < n; ++k) {
        off[k] = static_cast<uint32_t>(spelled.size());
        spelled += bm.text[static_cast<uint8_t>(w[k])];
    }
    off[n] = static_cast<uint32_t>(spelled.size());

    // Symbols form a linked list of byte ranges; merged-away symbols get len 0.
    struct Sym { int prev, next; uint32_t begin, len; };
    std::vector<Sym> sym(n);
    for (size_t k = 0; k < n; ++k)
        sym[k] = {static_cast<int>(k) - 1, k + 1 < n ? static_cast<int>(k) + 1 : -1, static_cast<uint32_t>(k), 1};
    struct Bigram {
        int32_t rank; int left, right; uint32_t len;
        bool operator>(const Bigram& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
    };
    std::priority_queue<Bigram, std::vector<Bigram>, std::greater<Bigram>> queue;
    std::string key;
    const auto text_of = [&](const Sym& s) {
        return std::string_view(spelled).substr(off[s.begin], off[s.begin + s.len] - off[s.begin]);
    };
    const auto try_add = [&](int l, int r) {
        if (l < 0 || r < 0) return;
        key.assign(text_of(sym[l]));
        key += ' ';
        key += text_of(sym[r]);
        const auto it = merge_rank_.find(key);
        if (it != merge_rank_.end()) queue.push({it->second, l, r, sym[l].len + sym[r].len});
    };
    for (size_t k = 0; k + 1 < n; ++k) try_add(static_cast<int>(k), static_cast<int>(k) + 1);
    while (!queue.empty()) {
        const Bigram bg = queue.top();
        queue.pop();
        Sym& l = sym[bg.left];
        Sym& r = sym[bg.right];
        if (l.len == 0 || r.len == 0 || l.next != bg.right || l.len + r.len != bg.len) continue;  // stale
        l.len += r.len;
        r.len = 0;
        l.next = r.next;
        if (r.next >= 0) sym[r.next].prev = bg.left;
        try_add(l.prev, bg.left);
        try_add(bg.left, l.next);
    }
    for (int k = 0; k >= 0; k = sym[k].next) {
        const auto it = token_id_.find(std::string(text_of(sym[k])));
        if (it != token_id_.end()) {
            out.push_back(it->second);
        } else {  // a merge whose result is not a token: fall back to the byte tokens
            for (uint32_t b = sym[k].begin; b < sym[k].begin + sym[k].len; ++b)
                out.push_back(byte_id_[static_cast<uint8_t>(w[b])]);
        }
    }
}

void Tokenizer::encode_text(std::string_view text, std::vector<int32_t>& out) const {
    for (const auto& [b, e] : pre_split(text, pre_)) encode_word(text.substr(b, e - b), out);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
    if (tokens_.empty()) throw Error("tokenizer: encode on an empty tokenizer");
    std::vector<int32_t> out;
    if (add_bos && add_bos_ && bos_ >= 0) out.push_back(bos_);
    // Control tokens are matched only with parse_special; user-defined ones always (as llama.cpp does).
    size_t start = 0;  // start of the plain text not yet encoded
    size_t i = 0;
    while (i < text.size()) {
        const uint8_t c = static_cast<uint8_t>(text[i]);
        auto it = std::lower_bound(special_ids_.begin(), special_ids_.end(), c, [&](int32_t id, uint8_t v) {
            return static_cast<uint8_t>(tokens_[id][0]) < v;
        });
        int32_t found = -1;
        for (; it != special_ids_.end() && static_cast<uint8_t>(tokens_[*it][0]) == c; ++it) {
            const bool control = static_cast<TokenType>(types_[*it]) == TokenType::Control;
            if (control && !parse_special) continue;
            const std::string& t = tokens_[*it];
            if (text.compare(i, t.size(), t) == 0) { found = *it; break; }  // longest first
        }
        if (found < 0) { ++i; continue; }
        encode_text(text.substr(start, i - start), out);
        out.push_back(found);
        i += tokens_[found].size();
        start = i;
    }
    encode_text(text.substr(start), out);
    return out;
}

std::string Tokenizer::token_to_piece(int32_t id, bool special) const {
    if (id < 0 || id >= n_vocab())
        throw Error("tokenizer: token id " + std::to_string(id) + " is outside [0, " + std::to_string(n_vocab()) + ")");
    const std::string& t = tokens_[id];
    switch (static_cast<TokenType>(types_[id])) {
        case TokenType::Control:
        case TokenType::Unused:
            return special ? t : std::string();
        case TokenType::UserDefined:
        case TokenType::Unknown:
            return t;
        case TokenType::Byte:
            if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') {
                char* end = nullptr;
                const long v = std::strtol(t.substr(3, 2).c_str(), &end, 16);
                if (end && *end == '\0') return std::string(1, static_cast<char>(v));
            }
            break;
        default:
            break;
    }
    // GPT-2 spelling -> bytes; code points that spell no byte (and stray bytes) are kept as they are.
    const ByteMap& bm = byte_map();
    std::string out;
    out.reserve(t.size());
    for (size_t i = 0; i < t.size();) {
        uint32_t cp;
        const size_t n = utf8_next(t, i, cp);
        if (cp < 324 && bm.byte_of[cp] >= 0) out += static_cast<char>(bm.byte_of[cp]);
        else out.append(t, i, n);
        i += n;
    }
    return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool special) const {
    std::string out;
    for (int32_t id : ids) out += token_to_piece(id, special);
    return out;
}

// ---- BPE training ---------------------------------------------------------------------------

namespace {

// Plain English prose (written for this project) that the tiny model's vocabulary is learned from.
constexpr const char* kTrainingText = R"TXT(
The weather this morning was cool and clear, with a light wind from the west and a few thin clouds
high over the hills. By noon the sun had warmed the valley, and people walked along the river with
their coats open. The forecast for the rest of the week calls for rain on Tuesday, some showers on
Wednesday, and then a long stretch of dry and sunny days. Farmers in the region will be glad of the
rain, because the fields have been dry since the end of the spring. In the evening the temperature
will fall to about 10 degrees, so it is a good idea to bring a warm sweater if you plan to be out late.

When the weather turns cold, many people like to stay at home and cook. A simple soup is one of the
easiest things to make. Start with an onion, two carrots, and a stick of celery. Cut them into small
pieces and cook them slowly in a little oil until they are soft. Add a few cloves of garlic, a spoon
of salt, and some pepper. Then pour in four cups of water or stock and let the pot simmer for twenty
minutes. You can add beans, rice, potatoes, or pasta, and at the end a handful of fresh green herbs.
Taste the soup before you serve it, and add more salt if it needs it. Bread and butter go well with
it, and so does a piece of cheese. If you have friends over for dinner, make a large pot: soup keeps
well for three or four days, and it often tastes even better on the second day.

Baking bread takes a little more time, but it is not hard. Mix 500 grams of flour with 10 grams of
salt, 7 grams of yeast, and 350 grams of warm water. Knead the dough for ten minutes, until it is
smooth and elastic, then cover it and let it rise for an hour. Shape the loaf, let it rise again, and
bake it in a hot oven for about 35 minutes. The bread is done when the crust is brown and the loaf
sounds hollow when you tap the bottom. Let it cool before you cut it; the inside keeps cooking for a
while after it leaves the oven.

Travel is another good way to spend a free week. Some people like to fly to a distant city, while
others would rather take the train and watch the country pass by the window. A train journey from
the north to the south of the country takes about eight hours, with stops in many small towns along
the way. In each town there is a station, a market, a church or a town hall, and usually a small
hotel near the square. It is wise to book a room in advance during the summer, when the towns are
full of visitors. Bring a map, a good pair of shoes, and enough water for the day. If you get lost,
ask someone for directions; most people are happy to help a traveler who has lost the way.

On the first day of our trip we took the early train at 6:45 in the morning. The station was quiet,
and the coffee from the small shop on the platform was strong and hot. We reached the coast just
after lunch, found our hotel, and walked down to the harbor. The boats were coming back with the day's
catch, and the market was busy with people buying fish, bread, fruit, and flowers. That night we ate
at a table outside, under a string of lights, and talked about where we would go the next day.

Numbers are part of every day. There are 24 hours in a day, 7 days in a week, 12 months in a year,
and 365 days in most years. A leap year has 366 days, and it comes once every four years. One hundred
is written as 100, one thousand as 1000, and one million as 1000000. If you add 15 and 27, you get 42;
if you multiply 6 by 7, you also get 42. Half of 50 is 25, and a quarter of 200 is 50. The price of
the tickets was 12.50 for an adult and 6.25 for a child, so a family of two adults and two children
paid 37.50 in total. The train left at 9:30 and arrived at 17:15, a trip of 7 hours and 45 minutes.

Punctuation helps the reader follow a sentence. A period ends a statement. A question mark ends a
question: "Where are you going?" An exclamation mark shows surprise or strong feeling: "What a
beautiful day!" Commas separate items in a list, such as apples, pears, plums, and grapes. A colon
introduces a list or an explanation; a semicolon joins two closely related ideas. Quotation marks
show the exact words that someone said, and parentheses (like these) hold extra information. The
dash - used with care - can add a pause. Writers also use the apostrophe, as in "it's", "don't",
"we're", "they'll", and "the children's books".

Some words appear again and again in almost every text: the, and, of, to, a, in, is, it, that, was,
for, on, are, with, as, at, be, this, have, from, or, by, one, had, not, but, what, all, were, when,
we, there, can, an, your, which, their, said, if, do, will, each, about, how, up, out, them, then,
she, many, some, so, these, would, other, into, has, more, her, two, like, him, see, time, could, no,
make, than, first, been, its, who, now, people, my, made, over, did, down, only, way, find, use, may,
water, long, little, very, after, words, called, just, where, most, know, get, through, back, much,
before, go, good, new, write, our, used, me, man, too, any, day, same, right, look, think, also,
around, another, came, come, work, three, word, must, because, does, part, even, place, well, such.

The old library in the center of the town is open every day except Sunday. Inside there are long
wooden tables, green lamps, and shelves that reach all the way to the ceiling. Students come in the
afternoon to read and to write, and older people come in the morning to look at the newspapers. The
librarian knows where every book is kept, and she is always ready to help someone find the right one.
On rainy days the library is full, and the only sounds are the turning of pages and the rain on the
tall windows. It is one of the quietest and most pleasant places in the whole town.

In the garden, the spring brings new life. The first flowers open in March, and by May the trees are
green again. A small garden can give a family fresh vegetables for much of the year: tomatoes, beans,
peas, lettuce, onions, and herbs grow well in most places, as long as they get enough sun and water.
Work the soil in the early spring, add some compost, and plant the seeds in straight rows. Water
them in the evening, when the air is cool, and pull the weeds before they grow too large. By the end
of the summer you will have more tomatoes than you can eat, and you can share them with your neighbors.

Learning a new language takes patience. Start with the most common words and simple sentences, and
practice a little every day. Listen to people speaking, read short stories, and do not be afraid to
make mistakes. After a few months you will understand much more than you expect, and after a year
you may be able to hold a long conversation. The best way to learn is to use the language: order
your coffee in it, ask for directions in it, and write a few lines in it each evening before bed.
Every season has its own kind of beauty. In the spring the days grow longer, the birds come back,
and the fields turn green. The summer is warm and bright, and children play outside until the sun
goes down. In the autumn the leaves change color, from green to yellow, orange, and red, and then
they fall and cover the paths in the park. The winter is the coldest season: the nights are long,
the lakes sometimes freeze, and on a few mornings the whole town wakes up under a blanket of snow.
Each season brings different work, different food, and different ways to spend the evenings.

The market in the old square opens at seven o'clock on Saturday morning. By eight it is already
crowded. There are stalls with apples and pears from the nearby farms, cheese from the mountains,
fresh fish from the coast, honey, eggs, bread, and cut flowers. The sellers call out their prices,
and the buyers walk slowly from one stall to the next, comparing the quality and the cost. A kilo of
tomatoes costs 3 euros, a dozen eggs costs 4, and a loaf of dark bread costs 2.80. Many families come
every week and know the sellers by name. After shopping, they often sit at a small cafe on the
corner, drink a cup of tea or coffee, and watch the people pass.

Dear Anna,

Thank you for your kind letter, which arrived on Monday. I am glad to hear that you and your family
are well, and that the new house is finally finished. We are all fine here. The children started
school again last week; they were sad that the holidays were over, but now they are happy to see
their friends every day. The weather has been wet and windy, so we have spent many evenings reading
by the fire. I hope you can visit us in the spring, when the garden is in flower and the roads are
dry. Please write again soon and tell me all your news.

With warm wishes,
Thomas

A clock measures time in hours, minutes, and seconds. There are 60 seconds in a minute and 60 minutes
in an hour, so an hour has 3600 seconds and a day has 86400. The short hand of the clock shows the
hour, and the long hand shows the minutes. When both hands point up, it is twelve o'clock: noon in
the middle of the day, or midnight at night. Some people like to wake up early, at five or six in the
morning, while others prefer to sleep late and work in the evening. What matters most is to find a
steady rhythm, to rest enough, and to make good use of the hours we have.

Once there was a small boat that lived in a quiet harbor. Every morning the fisherman who owned it
took it out to sea, and every evening he brought it back, full of fish. One day a storm came from
the north. The wind was strong, the waves were high, and the sky turned dark in the middle of the
afternoon. The fisherman held the rudder with both hands and kept the boat pointed toward the land.
After many hours the storm passed, the clouds opened, and he saw the lights of the harbor in the
distance. He came home tired and wet, but safe, and that night he slept for a very long time.
Walking is one of the simplest and healthiest habits. A walk of thirty minutes a day is good for the
heart, the legs, and the mind. You do not need special clothes or a gym: a comfortable pair of shoes
is enough. Walk to the shop instead of driving, take the stairs instead of the lift, and go for a
short walk after dinner. In the city, walk through the parks and along the quiet streets; in the
country, follow the paths between the fields and over the hills. Walking with a friend makes the
time pass quickly, and walking alone gives you a chance to think, to listen, and to notice the small
things around you: the smell of rain, the song of a bird, the light on an old wall in the evening.
A good kitchen does not need to be large. It needs a clean table, a sharp knife, a heavy pan, a pot
for soup, and a few wooden spoons. Keep the salt, the oil, and the spices close to the stove, and
wash the dishes while the food is cooking, so that the kitchen is clean when the meal is ready. Cook
with the seasons: fresh peas and beans in the summer, potatoes and cabbage in the winter, and apples
and pears in the autumn. Simple food, cooked with care and shared at a table with friends, is one
of the great pleasures of life.
At the end of a long day, it is pleasant to sit by an open window and listen to the town grow
quiet. The shops close, the streets empty, and the last bus passes slowly under the lamps. Somewhere
a dog barks, a door closes, and a neighbor says good night. Tomorrow will bring new work and new
questions, but for now there is only the cool air, a cup of tea, and the first stars over the roofs.
)TXT";

}  // namespace

BpeVocab build_bpe_vocab(int32_t vocab_size) {
    if (vocab_size < 258)
        throw Error("build_bpe_vocab: vocab_size is " + std::to_string(vocab_size) + ", expected at least 258");
    BpeVocab v;
    v.tokens.reserve(static_cast<size_t>(vocab_size));
    v.tokens.push_back("<｜begin▁of▁sentence｜>");
    v.tokens.push_back("<｜end▁of▁sentence｜>");
    v.types.assign(2, static_cast<int32_t>(TokenType::Control));
    const ByteMap& bm = byte_map();
    for (int b = 0; b < 256; ++b) {
        v.tokens.push_back(bm.text[b]);
        v.types.push_back(static_cast<int32_t>(TokenType::Normal));
    }
    v.bos = 0;
    v.eos = 1;
    std::unordered_map<std::string, int32_t> id_of;
    for (size_t i = 0; i < v.tokens.size(); ++i) id_of.emplace(v.tokens[i], static_cast<int32_t>(i));

    // Unique pre-tokens of the text with their counts, in a fixed (sorted) order.
    const std::string_view text(kTrainingText);
    std::map<std::string, int64_t> counted;
    for (const auto& [b, e] : pre_split(text)) ++counted[std::string(text.substr(b, e - b))];
    std::vector<std::vector<int32_t>> words;
    std::vector<int64_t> counts;
    for (const auto& [w, c] : counted) {
        if (w.size() < 2) continue;
        std::vector<int32_t> ids;
        for (char ch : w) ids.push_back(2 + static_cast<uint8_t>(ch));
        words.push_back(std::move(ids));
        counts.push_back(c);
    }

    std::unordered_map<uint64_t, int64_t> pairs;
    while (static_cast<int32_t>(v.tokens.size()) < vocab_size) {
        pairs.clear();
        for (size_t w = 0; w < words.size(); ++w)
            for (size_t k = 0; k + 1 < words[w].size(); ++k)
                pairs[(static_cast<uint64_t>(words[w][k]) << 32) | static_cast<uint32_t>(words[w][k + 1])] += counts[w];
        // Most frequent pair; ties go to the lexicographically smallest (left, right) texts.
        uint64_t best = 0;
        int64_t best_n = 0;
        for (const auto& [p, c] : pairs) {
            if (c < best_n) continue;
            if (c == best_n) {
                const std::string &la = v.tokens[p >> 32], &ra = v.tokens[p & 0xFFFFFFFFu];
                const std::string &lb = v.tokens[best >> 32], &rb = v.tokens[best & 0xFFFFFFFFu];
                if (std::tie(la, ra) >= std::tie(lb, rb)) continue;
            }
            best = p;
            best_n = c;
        }
        if (best_n < 2) break;
        const int32_t a = static_cast<int32_t>(best >> 32), b = static_cast<int32_t>(best & 0xFFFFFFFFu);
        std::string merged = v.tokens[a] + v.tokens[b];
        v.merges.push_back(v.tokens[a] + " " + v.tokens[b]);
        int32_t nid;
        if (const auto it = id_of.find(merged); it != id_of.end()) {
            nid = it->second;  // reached before through other merges: no new token
        } else {
            nid = static_cast<int32_t>(v.tokens.size());
            id_of.emplace(merged, nid);
            v.tokens.push_back(std::move(merged));
            v.types.push_back(static_cast<int32_t>(TokenType::Normal));
        }
        for (auto& w : words) {
            size_t o = 0;
            for (size_t k = 0; k < w.size(); ++k) {
                if (k + 1 < w.size() && w[k] == a && w[k + 1] == b) {
                    w[o++] = nid;
                    ++k;
                } else {
                    w[o++] = w[k];
                }
            }
            w.resize(o);
        }
    }
    for (int32_t n = 0; static_cast<int32_t>(v.tokens.size()) < vocab_size; ++n) {
        v.tokens.push_back("<｜unused_" + std::to_string(n) + "｜>");
        v.types.push_back(static_cast<int32_t>(TokenType::Unused));
    }
    return v;
}

}  // namespace latte

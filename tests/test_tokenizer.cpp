// Tests of the byte-level BPE tokenizer and the built-in BPE vocabulary trainer.
// (Loading from a GGUF file is tested end to end elsewhere.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "latte/error.h"
#include "latte/tokenizer.h"
#include "unicode_tables.h"

using latte::Tokenizer;
using latte::TokenType;

namespace {

// `bytes` in GPT-2's byte-level spelling.
std::string sp(std::string_view bytes) {
    std::string s;
    for (char c : bytes) s += latte::bpe_byte_to_text(static_cast<uint8_t>(c));
    return s;
}

// A hand-built vocabulary: ids 0..255 are the byte tokens (id == byte), then one token per merge
// in merge order, then two control tokens.
struct HandVocab {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    std::vector<std::string> merges;
    std::map<std::string, int32_t> id;  // raw text of a merged token -> id

    HandVocab() {
        for (int b = 0; b < 256; ++b) tokens.push_back(latte::bpe_byte_to_text(static_cast<uint8_t>(b)));
        // (left, right) in raw bytes, in rank order
        const std::vector<std::pair<std::string, std::string>> m = {
            {"h", "e"}, {"he", "l"}, {"hel", "l"}, {"hell", "o"},          // hello
            {" ", "w"}, {"o", "r"}, {"l", "d"}, {" w", "or"}, {" wor", "ld"},  //  world
            {"r", "l"},                                                     // never reached in " world"
            {"3", "4"}, {"1", "2"}, {"12", "3"},                            // digits
            {" ", " "}, {" ", "b"},                                         // whitespace
            {"H", "i"}, {"!", "!"}, {"\n", "\n"}, {"!!", "\n\n"}, {"y", "o"},
            {"\xE6", "\x97"}, {"\xE6\x97", "\xA5"},                          // 日
            {"\xE6", "\x9C"}, {"\xE6\x9C", "\xAC"},                          // 本
            {"\xE6\x97\xA5", "\xE6\x9C\xAC"},                                // 日本
            {"\xF0", "\x9F"},                                               // start of 🙂
            {"\xFF", "\xFE"},                                               // two invalid bytes
        };
        for (const auto& [l, r] : m) {
            merges.push_back(sp(l) + " " + sp(r));
            const std::string raw = l + r;
            if (!id.count(raw)) {
                id[raw] = static_cast<int32_t>(tokens.size());
                tokens.push_back(sp(raw));
            }
        }
        id["<|bos|>"] = static_cast<int32_t>(tokens.size());
        tokens.push_back("<|bos|>");
        id["<|ctl|>"] = static_cast<int32_t>(tokens.size());
        tokens.push_back("<|ctl|>");
        id["<|ctl|>!"] = static_cast<int32_t>(tokens.size());
        tokens.push_back("<|ctl|>!");
        types.assign(tokens.size(), static_cast<int32_t>(TokenType::Normal));
        types[id["<|bos|>"]] = types[id["<|ctl|>"]] = types[id["<|ctl|>!"]] = static_cast<int32_t>(TokenType::Control);
    }
    Tokenizer make(bool add_bos = true) const {
        return Tokenizer(tokens, types, merges, id.at("<|bos|>"), -1, "deepseek-v3", add_bos);
    }
};

int32_t B(char c) { return static_cast<uint8_t>(c); }  // id of a byte token in HandVocab

}  // namespace

TEST_CASE("tokenizer: byte-to-unicode map is a bijection over the 256 bytes", "[tokenizer]") {
    std::set<std::string> seen;
    for (int b = 0; b < 256; ++b) {
        const std::string t = latte::bpe_byte_to_text(static_cast<uint8_t>(b));
        REQUIRE(!t.empty());
        REQUIRE(latte::bpe_text_to_byte(t) == b);
        seen.insert(t);
    }
    CHECK(seen.size() == 256);
    // GPT-2's well-known spellings
    CHECK(latte::bpe_byte_to_text(' ') == "\xC4\xA0");   // U+0120 Ġ
    CHECK(latte::bpe_byte_to_text('\n') == "\xC4\x8A");  // U+010A Ċ
    CHECK(latte::bpe_byte_to_text(0) == "\xC4\x80");     // U+0100 Ā
    CHECK(latte::bpe_byte_to_text(127) == "\xC4\xA1");   // U+0121
    CHECK(latte::bpe_byte_to_text(173) == "\xC5\x83");   // U+0143, the last one
    CHECK(latte::bpe_byte_to_text('a') == "a");
    CHECK(latte::bpe_byte_to_text(0xE9) == "\xC3\xA9");  // é maps to itself
    CHECK(latte::bpe_text_to_byte("ab") == -1);
    CHECK(latte::bpe_text_to_byte("\xE6\x97\xA5") == -1);
    CHECK(latte::bpe_text_to_byte("") == -1);
}

TEST_CASE("tokenizer: pre-tokenizer splits like DeepSeek-V3", "[tokenizer]") {
    using V = std::vector<std::string>;
    CHECK(latte::bpe_pre_tokenize("Hello world") == V{"Hello", " world"});
    CHECK(latte::bpe_pre_tokenize("123456") == V{"123", "456"});
    CHECK(latte::bpe_pre_tokenize("12345") == V{"123", "45"});
    CHECK(latte::bpe_pre_tokenize("abc123def") == V{"abc", "123", "def"});
    CHECK(latte::bpe_pre_tokenize("a  b") == V{"a", " ", " b"});
    CHECK(latte::bpe_pre_tokenize("a   b") == V{"a", "  ", " b"});
    CHECK(latte::bpe_pre_tokenize("end  ") == V{"end", "  "});
    CHECK(latte::bpe_pre_tokenize("a \n b") == V{"a", " \n", " b"});
    CHECK(latte::bpe_pre_tokenize("a\t\tb") == V{"a", "\t", "\tb"});
    CHECK(latte::bpe_pre_tokenize("\nhello") == V{"\n", "hello"});
    CHECK(latte::bpe_pre_tokenize("Hi!!\n\nyo") == V{"Hi", "!!\n\n", "yo"});
    CHECK(latte::bpe_pre_tokenize("x.y") == V{"x", ".y"});
    CHECK(latte::bpe_pre_tokenize("don't stop") == V{"don", "'t", " stop"});
    CHECK(latte::bpe_pre_tokenize("a, b") == V{"a", ",", " b"});
    CHECK(latte::bpe_pre_tokenize("x = (1)") == V{"x", " =", " (", "1", ")"});
    CHECK(latte::bpe_pre_tokenize(" 日本語abc") == V{" ", "日本語", "abc"});
    CHECK(latte::bpe_pre_tokenize("ça va") == V{"ça", " va"});
    CHECK(latte::bpe_pre_tokenize(" 🙂!") == V{" 🙂!"});
    CHECK(latte::bpe_pre_tokenize("\xff\xfe") == V{"\xff\xfe"});
    CHECK(latte::bpe_pre_tokenize("") == V{});
    // pieces always cover the input exactly
    const std::string s = "  Mixed: 3.14159, naïve café!\r\n\tEnd\x01\x02 ok\xc3";
    std::string joined;
    for (const auto& p : latte::bpe_pre_tokenize(s)) {
        CHECK(!p.empty());
        joined += p;
    }
    CHECK(joined == s);
}

// deepseek-llm (DeepSeek-V2/V2-Lite GGUFs): six splits in sequence, each inside every earlier piece
// (expected pieces from Python's regex module with DeepSeek's patterns: tests/pretok_check.py).
TEST_CASE("tokenizer: pre-tokenizer splits like DeepSeek-LLM (V2)", "[tokenizer]") {
    using V = std::vector<std::string>;
    const auto llm = [](std::string_view s) { return latte::bpe_pre_tokenize(s, "deepseek-llm"); };
    CHECK(llm("Hello world") == V{"Hello", " world"});
    CHECK(llm("12345 678") == V{"12345", " ", "678"});           // \p{N}+: no groups of three
    CHECK(llm("\xC3\xA7" "a va") == V{"\xC3\xA7", "a", " va"});  // "ça": regex 3's :-~ takes the a
    CHECK(llm("don't stop") == V{"don", "'", "t", " stop"});
    CHECK(llm("Hi!!\n\nyo") == V{"Hi", "!!", "\n", "\n", "yo"});
    CHECK(llm("a  b  ") == V{"a", " ", " b", "  "});
    CHECK(llm("x = (1)") == V{"x", " =", " (", "1", ")"});
    CHECK(llm("") == V{});
    // The V3 split differs on the same strings (and any other `pre` value gets the V3 split).
    CHECK(latte::bpe_pre_tokenize("12345 678") == V{"123", "45", " ", "678"});
    CHECK(latte::bpe_pre_tokenize("12345", "default") == V{"123", "45"});
}

TEST_CASE("tokenizer: hand-built vocabulary gives the expected ids", "[tokenizer]") {
    const HandVocab hv;
    const Tokenizer tok = hv.make();
    const auto& id = hv.id;
    using V = std::vector<int32_t>;
    CHECK(tok.encode("hello", false) == V{id.at("hello")});
    CHECK(tok.encode(" hello world", false) == V{B(' '), id.at("hello"), id.at(" world")});
    CHECK(tok.encode("123456", false) == V{id.at("123"), B('4'), B('5'), B('6')});
    CHECK(tok.encode("a  b", false) == V{B('a'), B(' '), id.at(" b")});
    CHECK(tok.encode("a   b", false) == V{B('a'), id.at("  "), id.at(" b")});
    CHECK(tok.encode("Hi!!\n\nyo", false) == V{id.at("Hi"), id.at("!!\n\n"), id.at("yo")});
    CHECK(tok.encode("日本語", false) == V{id.at("日本"), 0xE8, 0xAA, 0x9E});
    CHECK(tok.encode("🙂", false) == V{id.at("\xF0\x9F"), 0x99, 0x82});
    CHECK(tok.encode("\xff\xfe", false) == V{id.at("\xFF\xFE")});
    CHECK(tok.encode("", false).empty());
    // add_bos
    CHECK(tok.encode("hello", true) == V{id.at("<|bos|>"), id.at("hello")});
    CHECK(hv.make(false).encode("hello", true) == V{id.at("hello")});
    // decoding goes back to the bytes
    for (const char* s : {"hello", " hello world", "123456", "a  b", "Hi!!\n\nyo", "日本語", "🙂", "\xff\xfe"})
        CHECK(tok.decode(tok.encode(s, true)) == s);
}

TEST_CASE("tokenizer: control and unused tokens decode only with special", "[tokenizer]") {
    const HandVocab hv;
    const Tokenizer tok = hv.make();
    const int32_t bos = hv.id.at("<|bos|>");
    CHECK(tok.token_type(bos) == TokenType::Control);
    CHECK(tok.token_to_piece(bos) == "");
    CHECK(tok.token_to_piece(bos, true) == "<|bos|>");
    CHECK(tok.decode({bos, hv.id.at("hello")}) == "hello");
    CHECK(tok.decode({bos, hv.id.at("hello")}, true) == "<|bos|>hello");
    CHECK(tok.token_to_piece(hv.id.at(" world")) == " world");
    CHECK_THROWS_AS(tok.token_to_piece(-1), latte::Error);
    CHECK_THROWS_AS(tok.token_to_piece(tok.n_vocab()), latte::Error);

    const latte::BpeVocab v = latte::build_bpe_vocab(100000);
    const Tokenizer big(v.tokens, v.types, v.merges, v.bos, v.eos);
    const int32_t unused = big.n_vocab() - 1;
    REQUIRE(big.token_type(unused) == TokenType::Unused);
    CHECK(big.token_to_piece(unused) == "");
    CHECK(big.token_to_piece(unused, true) == big.token_text(unused));
}

TEST_CASE("tokenizer: special tokens are parsed only with parse_special, longest match first", "[tokenizer]") {
    const HandVocab hv;
    const Tokenizer tok = hv.make();
    const auto& id = hv.id;
    using V = std::vector<int32_t>;
    CHECK(tok.encode("hello<|ctl|>hello", false, true) == V{id.at("hello"), id.at("<|ctl|>"), id.at("hello")});
    CHECK(tok.encode("<|ctl|>!!", false, true) == V{id.at("<|ctl|>!"), B('!')});
    CHECK(tok.encode("<|ctl|><|ctl|>", false, true) == V{id.at("<|ctl|>"), id.at("<|ctl|>")});
    CHECK(tok.encode("<|ctl", false, true) == V{B('<'), B('|'), B('c'), B('t'), B('l')});
    const V plain = tok.encode("hello<|ctl|>hello", false, false);
    for (int32_t t : plain) CHECK(tok.token_type(t) == TokenType::Normal);
    CHECK(tok.decode(plain) == "hello<|ctl|>hello");

    const latte::BpeVocab v = latte::build_bpe_vocab(1024);
    const Tokenizer t2(v.tokens, v.types, v.merges, v.bos, v.eos);
    const V ids = t2.encode("<｜begin▁of▁sentence｜>Hello", false, true);
    REQUIRE(ids.size() >= 2);
    CHECK(ids[0] == 0);
    CHECK(t2.decode(V(ids.begin() + 1, ids.end())) == "Hello");
    CHECK(t2.encode("<｜begin▁of▁sentence｜>Hello", true, true)[1] == 0);
    const V lit = t2.encode("<｜begin▁of▁sentence｜>Hello", false, false);
    CHECK(lit[0] != 0);
    CHECK(std::find(lit.begin(), lit.end(), 0) == lit.end());
    CHECK(t2.decode(lit) == "<｜begin▁of▁sentence｜>Hello");
    CHECK(t2.decode(ids, true) == "<｜begin▁of▁sentence｜>Hello");
}

TEST_CASE("tokenizer: the constructor rejects bad vocabularies", "[tokenizer]") {
    HandVocab hv;
    SECTION("missing byte token") {
        hv.tokens[200] = "not a byte";
        CHECK_THROWS_AS(hv.make(), latte::Error);
    }
    SECTION("merge of an unknown token") {
        hv.merges.push_back("zz q");
        CHECK_THROWS_WITH(hv.make(), Catch::Contains("merge " + std::to_string(hv.merges.size() - 1)));
    }
    SECTION("merge without a space") {
        hv.merges.push_back("ab");
        CHECK_THROWS_AS(hv.make(), latte::Error);
    }
    SECTION("types of the wrong length") {
        hv.types.pop_back();
        CHECK_THROWS_AS(hv.make(), latte::Error);
    }
    SECTION("bos out of range") {
        CHECK_THROWS_AS(Tokenizer(hv.tokens, hv.types, hv.merges, static_cast<int32_t>(hv.tokens.size()), -1),
                        latte::Error);
    }
    SECTION("empty types mean all normal") {
        const Tokenizer t(hv.tokens, {}, hv.merges, -1, -1);
        CHECK(t.token_type(0) == TokenType::Normal);
        CHECK(t.encode("hello", true) == std::vector<int32_t>{hv.id.at("hello")});
    }
}

TEST_CASE("tokenizer: decode(encode(s)) == s for random bytes and random UTF-8", "[tokenizer]") {
    const latte::BpeVocab v = latte::build_bpe_vocab(1024);
    const Tokenizer tok(v.tokens, v.types, v.merges, v.bos, v.eos);
    std::mt19937 rng(1234);
    auto check = [&](const std::string& s) {
        const std::vector<int32_t> ids = tok.encode(s, false);
        for (int32_t t : ids) REQUIRE((t >= 2 && t < tok.n_vocab()));
        REQUIRE(tok.decode(ids) == s);
        std::vector<int32_t> with_bos = tok.encode(s, true);
        REQUIRE(with_bos.size() == ids.size() + 1);
        REQUIRE(with_bos[0] == 0);
    };
    for (int n = 0; n < 500; ++n) {  // any bytes, mostly invalid UTF-8
        std::string s(rng() % 65, '\0');
        for (char& c : s) c = static_cast<char>(rng() & 0xFF);
        check(s);
    }
    const uint32_t ranges[][2] = {{0x20, 0x7E}, {0x09, 0x0D}, {0xA0, 0x17F}, {0x300, 0x36F}, {0x2000, 0x206F},
                                  {0x3040, 0x30FF}, {0x4E00, 0x9FFF}, {0xAC00, 0xD7A3}, {0xFF00, 0xFFEF},
                                  {0x1F300, 0x1FAFF}, {0x10000, 0x10FFFF}};
    for (int n = 0; n < 500; ++n) {  // valid UTF-8 from a mix of scripts
        std::string s;
        const int len = static_cast<int>(rng() % 40);
        for (int k = 0; k < len; ++k) {
            const auto& r = ranges[rng() % std::size(ranges)];
            uint32_t cp = r[0] + rng() % (r[1] - r[0] + 1);
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
            if (cp < 0x80) s += static_cast<char>(cp);
            else if (cp < 0x800) s += {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
            else if (cp < 0x10000)
                s += {static_cast<char>(0xE0 | (cp >> 12)), static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
                      static_cast<char>(0x80 | (cp & 0x3F))};
            else
                s += {static_cast<char>(0xF0 | (cp >> 18)), static_cast<char>(0x80 | ((cp >> 12) & 0x3F)),
                      static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), static_cast<char>(0x80 | (cp & 0x3F))};
        }
        check(s);
    }
}

TEST_CASE("tokenizer: build_bpe_vocab layout, determinism and compression", "[tokenizer]") {
    CHECK_THROWS_AS(latte::build_bpe_vocab(257), latte::Error);
    const auto t0 = std::chrono::steady_clock::now();
    const latte::BpeVocab v = latte::build_bpe_vocab(1024);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(secs < 2.0);  // < 0.5 s in an optimized build; generous for sanitizer builds
    REQUIRE(v.tokens.size() == 1024);
    REQUIRE(v.types.size() == 1024);
    CHECK(v.bos == 0);
    CHECK(v.eos == 1);
    CHECK(v.tokens[0] == "<｜begin▁of▁sentence｜>");
    CHECK(v.tokens[1] == "<｜end▁of▁sentence｜>");
    CHECK(v.types[0] == static_cast<int32_t>(TokenType::Control));
    CHECK(v.types[1] == static_cast<int32_t>(TokenType::Control));
    for (int b = 0; b < 256; ++b) {
        CHECK(v.tokens[2 + b] == latte::bpe_byte_to_text(static_cast<uint8_t>(b)));
        CHECK(v.types[2 + b] == static_cast<int32_t>(TokenType::Normal));
    }
    // The text is long enough for the tiny vocabulary to be all real merges, no unused tokens.
    int normal = 0;
    for (int32_t t : v.types) normal += t == static_cast<int32_t>(TokenType::Normal);
    CHECK(normal == 1022);
    CHECK(v.merges.size() >= 1024 - 258);
    // distinct tokens; merges reference tokens, and each merge's result is a token
    std::set<std::string> all(v.tokens.begin(), v.tokens.end());
    CHECK(all.size() == v.tokens.size());
    for (const std::string& m : v.merges) {
        const size_t sp_at = m.find(' ');
        REQUIRE(sp_at != std::string::npos);
        CHECK(all.count(m.substr(0, sp_at)) == 1);
        CHECK(all.count(m.substr(sp_at + 1)) == 1);
        CHECK(all.count(m.substr(0, sp_at) + m.substr(sp_at + 1)) == 1);
    }
    // deterministic
    const latte::BpeVocab v2 = latte::build_bpe_vocab(1024);
    CHECK(v2.tokens == v.tokens);
    CHECK(v2.merges == v.merges);
    CHECK(v2.types == v.types);
    // a smaller vocabulary is a prefix of a larger one (training is greedy)
    const latte::BpeVocab small = latte::build_bpe_vocab(300);
    REQUIRE(small.tokens.size() == 300);
    CHECK(std::equal(small.tokens.begin(), small.tokens.end(), v.tokens.begin()));

    // English text compresses by well over 30%.
    const Tokenizer tok(v.tokens, v.types, v.merges, v.bos, v.eos);
    for (const std::string s : {"The weather this morning was cool and clear, and the people walked along the river.",
                                "Every evening we cook a simple soup with onions, carrots, beans and fresh herbs.",
                                "She said that the train would arrive in the town after lunch."}) {
        const auto ids = tok.encode(s, false);
        CHECK(ids.size() * 10 <= s.size() * 7);
        CHECK(tok.decode(ids) == s);
    }
    // digit runs never give tokens of more than three digits
    for (int32_t t : tok.encode("12345678901000000", false)) CHECK(tok.token_to_piece(t).size() <= 3);
}

TEST_CASE("tokenizer: build_bpe_vocab with a huge size stops learning and fills unused tokens", "[tokenizer]") {
    const auto t0 = std::chrono::steady_clock::now();
    const latte::BpeVocab v = latte::build_bpe_vocab(129280);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(secs < 5.0);
    REQUIRE(v.tokens.size() == 129280);
    REQUIRE(v.types.size() == 129280);
    size_t first_unused = 0;
    while (v.types[first_unused] != static_cast<int32_t>(TokenType::Unused)) ++first_unused;
    CHECK(first_unused > 1024);
    CHECK(first_unused < 20000);
    CHECK(v.tokens[first_unused] == "<｜unused_0｜>");
    CHECK(v.tokens.back() == "<｜unused_" + std::to_string(129280 - first_unused - 1) + "｜>");
    for (size_t i = first_unused; i < v.types.size(); ++i)
        REQUIRE(v.types[i] == static_cast<int32_t>(TokenType::Unused));
    const Tokenizer tok(v.tokens, v.types, v.merges, v.bos, v.eos);
    CHECK(tok.n_vocab() == 129280);
    const std::string s = "A small garden can give a family fresh vegetables for much of the year.";
    CHECK(tok.decode(tok.encode(s, true)) == s);
}

// Unicode general categories (src/unicode_tables.h, generated by tools/gen_unicode_tables.py).
TEST_CASE("tokenizer: the generated Unicode range table is sorted, disjoint and spot-on", "[tokenizer]") {
    using latte::unicode::kRanges;
    REQUIRE(latte::unicode::kRangeCount == std::size(kRanges));
    REQUIRE(latte::unicode::kRangeCount > 500);
    for (size_t i = 0; i < std::size(kRanges); ++i) {
        INFO(i);
        REQUIRE(kRanges[i].lo <= kRanges[i].hi);
        if (i) REQUIRE(kRanges[i - 1].hi < kRanges[i].lo);
    }
    const auto cls_of = [&](uint32_t cp) -> int {
        for (const auto& r : kRanges)
            if (r.lo <= cp && cp <= r.hi) return r.cls;
        return -1;
    };
    CHECK(cls_of('A') == latte::unicode::kLetter);
    CHECK(cls_of(0x0301) == latte::unicode::kLetter);   // combining acute (Mn)
    CHECK(cls_of(0x4E2D) == latte::unicode::kLetter);   // 中 (Lo, in the CJK block range)
    CHECK(cls_of(0x20000) == latte::unicode::kLetter);  // CJK Extension B (a First/Last range)
    CHECK(cls_of(0x0663) == latte::unicode::kNumber);   // Arabic-Indic three (Nd)
    CHECK(cls_of(0x216B) == latte::unicode::kNumber);   // Roman numeral twelve (Nl)
    CHECK(cls_of(0x00B2) == latte::unicode::kNumber);   // superscript two (No)
    CHECK(cls_of(0x3002) == latte::unicode::kPunct);    // 。 (Po)
    CHECK(cls_of(0x02C2) == latte::unicode::kPunct);    // modifier letter left arrowhead (Sk)
    CHECK(cls_of(0x1F600) == latte::unicode::kPunct);   // 😀 (So)
    CHECK(cls_of(' ') == -1);
    CHECK(cls_of(0x200D) == -1);   // ZWJ (Cf)
    CHECK(cls_of(0xE000) == -1);   // private use (Co)
    CHECK(cls_of(0x0378) == -1);   // unassigned
}

TEST_CASE("tokenizer: pre-tokenizer uses real Unicode categories", "[tokenizer]") {
    using V = std::vector<std::string>;
    // \p{N} beyond ASCII: cut into threes like ASCII digits.
    CHECK(latte::bpe_pre_tokenize("٣٤٥٦") == V{"٣٤٥", "٦"});            // Arabic-Indic
    CHECK(latte::bpe_pre_tokenize("๑๒๓๔ baht") == V{"๑๒๓", "๔", " baht"});  // Thai
    CHECK(latte::bpe_pre_tokenize("１２３４") == V{"１２３", "４"});      // fullwidth
    CHECK(latte::bpe_pre_tokenize("xⅫy") == V{"x", "Ⅻ", "y"});          // Nl
    CHECK(latte::bpe_pre_tokenize("x²") == V{"x", "²"});                // No
    // Marks stay with their letters; scripts without spaces are one word.
    CHECK(latte::bpe_pre_tokenize("नमस्ते दुनिया") == V{"नमस्ते", " दुनिया"});
    CHECK(latte::bpe_pre_tokenize("cafe\xcc\x81 ok") == V{"cafe\xcc\x81", " ok"});  // e + U+0301
    CHECK(latte::bpe_pre_tokenize("𝐀𝐁 c") == V{"𝐀𝐁", " c"});            // math letters (Lu)
    // CJK: the ideograph regex, then CJK punctuation as \p{P}.
    CHECK(latte::bpe_pre_tokenize("中文，标点。") == V{"中文", "，", "标点", "。"});
    CHECK(latte::bpe_pre_tokenize("𠀀𠀁 x") == V{"𠀀𠀁", " x"});          // Extension B: letters, not regex 2
    // Symbols (S*) outside the ranges the old approximation knew.
    CHECK(latte::bpe_pre_tokenize("a˂b") == V{"a", "˂", "b"});
    // Emoji are \p{S}; ZWJ (Cf) is "other".
    CHECK(latte::bpe_pre_tokenize("hi 😀😀!") == V{"hi", " 😀😀!"});
    CHECK(latte::bpe_pre_tokenize("👨\u200d👩") == V{"👨", "\u200d", "👩"});
    // Private use is "other": it can only be the one-character prefix of a word.
    CHECK(latte::bpe_pre_tokenize("a\xee\x80\x80" "b") == V{"a", "\xee\x80\x80" "b"});
    // White space beyond ASCII.
    CHECK(latte::bpe_pre_tokenize("a\u3000\u3000b") == V{"a", "\u3000", "\u3000b"});
    CHECK(latte::bpe_pre_tokenize("1\u00a02") == V{"1", "\u00a0", "2"});
    CHECK(latte::bpe_pre_tokenize("x \n\n  \ty") == V{"x", " \n\n", "  ", "\ty"});
    // Invalid UTF-8: each bad byte is a unit of its own that counts as a letter.
    CHECK(latte::bpe_pre_tokenize("ab\xc3(cd") == V{"ab\xc3", "(cd"});
    CHECK(latte::bpe_pre_tokenize("x\xf0\x9f") == V{"x\xf0\x9f"});
    CHECK(latte::bpe_pre_tokenize("\x80\x80 1") == V{"\x80\x80", " ", "1"});
}

#!/usr/bin/env python3
"""Checks latte's hand-written pre-tokenizers against a real regex engine.

    python3 tests/pretok_check.py PATH/TO/latte-pretok [--n N] [--seed S]

DeepSeek's tokenizer.json pre-tokenizes with a Sequence of Split(pattern, behavior=Isolated)
steps: each pattern is applied inside every piece the earlier steps made, and both the matches and
the text between them become pieces. This script runs that with Python's `regex` module (a real
engine with \\p{..} classes; Debian: python3-regex) and with the exact pattern strings DeepSeek's
tokenizer.json uses (as llama.cpp's llama-vocab.cpp lists them for LLAMA_VOCAB_PRE_TYPE_DEEPSEEK_LLM
and DEEPSEEK3_LLM), and compares the pieces with latte's (the latte-pretok tool, a thin wrapper of
latte::bpe_pre_tokenize) on many strings: hand-picked cases, then random strings from
pools of ASCII, CJK, kana, Hangul, emoji, digits of several scripts, white space runs, punctuation,
combining marks, letters of many scripts and code points from all planes.

Unicode version: latte's tables come from one UCD version, the `regex` module from another. Code
points the two class differently (new assignments) are listed once and left out of the random
strings; a code point both know but class differently is a failure.

Exit 0: every split equal. Exit 1: a difference (the first few are printed). Exit 77: no `regex`
module (the CTest reports the test as skipped)."""
import random
import subprocess
import sys

try:
    import regex
except ImportError:
    print("SKIP: python3 has no `regex` module (Debian: apt-get install python3-regex)")
    sys.exit(77)

# The patterns, character for character as DeepSeek's tokenizer.json / llama-vocab.cpp have them.
# Six characters of the deepseek-llm letter class are written as escapes: they have canonical
# singleton decompositions (U+1F7D, U+1FBE, U+1FD3, U+1FDB, U+2126 OHM SIGN, U+212A KELVIN SIGN),
# and a text tool that normalises to NFC would silently turn them into other code points.
DEEPSEEK_LLM = [
    "[\r\n]",
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-"
    "ὗὙὛὝὟ-\u1f7dᾀ-ᾴᾶ-ᾼ\u1fbeῂ-ῄῆ-ῌῐ-\u1fd3ῖ-\u1fdbῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\u2126ℨ\u212a-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-"
    "ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
    "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
    "\\s+$",
    "[一-龥ࠀ-一가-퟿]+",
    "\\p{N}+",
]
DEEPSEEK_V3 = [
    "\\p{N}{1,3}",
    "[一-龥぀-ゟ゠-ヿ]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
]
PRE = {"deepseek-llm": [regex.compile(p) for p in DEEPSEEK_LLM],
       "deepseek-v3": [regex.compile(p) for p in DEEPSEEK_V3]}


def split(text, patterns):
    pieces = [text] if text else []
    for pat in patterns:
        out = []
        for p in pieces:
            pos = 0
            for m in pat.finditer(p):
                if m.start() == m.end():
                    continue
                if m.start() > pos:
                    out.append(p[pos:m.start()])
                out.append(m.group())
                pos = m.end()
            if pos < len(p):
                out.append(p[pos:])
        pieces = out
    return pieces


def regex_class(c):
    if c in "\r\n":
        return "n"
    if regex.match(r"\s", c):
        return "s"
    if regex.match(r"[\p{L}\p{M}]", c):
        return "L"
    if regex.match(r"\p{N}", c):
        return "N"
    if regex.match(r"[\p{P}\p{S}]", c):
        return "P"
    return "O"


class Latte:
    def __init__(self, tool):
        self.p = subprocess.Popen([tool], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def ask(self, line):
        self.p.stdin.write(line.encode() + b"\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().decode().rstrip("\n")

    def split(self, pre, text):
        r = self.ask(pre + " " + text.encode("utf-8").hex())
        return [bytes.fromhex(h).decode("utf-8") for h in r.split(" ") if h]

    def classes(self):
        return self.ask("classes")

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 2
    tool = args[0]
    n = int(args[args.index("--n") + 1]) if "--n" in args else 4000
    seed = int(args[args.index("--seed") + 1]) if "--seed" in args else 1234
    latte = Latte(tool)

    # ---- code point classes: latte's tables vs the regex module's ----
    lc = latte.classes()
    assert len(lc) == 0x110000, len(lc)
    newer, wrong = [], []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        a, b = lc[cp], regex_class(chr(cp))
        if a != b:
            # one side "other" (unassigned there): a Unicode version difference
            (newer if "O" in (a, b) else wrong).append((cp, a, b))
    print(f"classes: {len(newer)} code points differ only as assigned/unassigned (Unicode versions: "
          f"latte's tables vs regex {regex.__version__}), {len(wrong)} class differently")
    for cp, a, b in wrong[:20]:
        print(f"  U+{cp:04X}: latte {a}, regex {b}")
    skip = {cp for cp, _, _ in newer}

    def ok(cp):
        return not (0xD800 <= cp <= 0xDFFF) and cp not in skip

    # ---- the strings ----
    cases = [
        "", "Hello world", "123456", "12345", "abc123def", "a  b", "a   b", "end  ", "a \n b", "a\t\tb",
        "\nhello", "Hi!!\n\nyo", "x.y", "don't stop", "a, b", "x = (1)", " 日本語abc", "ça va", " 🙂!",
        "  Mixed: 3.14159, naïve café!\r\n\tEnd\x01\x02 ok", "\r\n\r\n  \n", "   ", " \u3000\u3000x",
        "Ａｂｃ！？", "“quoted” ‘x’", "한국어 텍스트 123", "日本語のテキスト。カタカナ・ひらがな", "Ελληνικά λέξεις",
        "Русский текст, да!", "עברית ועוד", "العربية ١٢٣٤", "हिन्दी पाठ", "ไทย ภาษา", "e\u0301te\u0301",
        "a\u0300\u0301\u0302b", "\u0301abc", "١٢٣٤٥٦٧", "x²³ ½ Ⅻ", "🙂🙃 👨‍👩‍👧 🇫🇷", "tab\there", "\u00a0nbsp\u00a0",
        "\u2028line\u2029para", "\u200bzero\u200dwidth", "$100.00 — 50% off!!!", "<b>bold</b>", "def f(x):\n    return x**2\n",
        "ＡＢＣ１２３", "µ ſ ǅ ʔ ˆ", "Ⰰ ⱻ Ꙁ", "𐐀𐐁 𞤀", "\t\n\u000b\u000c\r\u0085", "a\x1cb\x1fc",
    ]
    rng = random.Random(seed)
    pools = {
        "ascii": [chr(c) for c in range(0x20, 0x7F)] + ["\t", "\n", "\r"],
        "letters": list("abcXYZ"),
        "digits": list("0123456789") + ["٣", "४", "¹", "½", "Ⅻ", "𝟘", "〇"],
        "space": [" ", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2009", "\u000b", "\u0085", "\u2028"],
        "punct": list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + list("！，。、；：？（）「」『』【】《》…—–‘’“”·•§¶©®°±×÷€£¥"),
        "cjk": [chr(c) for c in range(0x4E00, 0x4E80)] + [chr(0x9FA5), chr(0x9FA6), chr(0x9FFF), chr(0x3400)],
        "kana": [chr(c) for c in range(0x3040, 0x3100)],
        "hangul": [chr(c) for c in range(0xAC00, 0xAC40)] + [chr(0xD7A3), chr(0xD7B0), chr(0x1100)],
        "emoji": ["🙂", "🙃", "👍", "🏽", "\u200d", "\ufe0f", "🇫", "🇷", "✨", "❤", "🤖", "🧪"],
        "marks": [chr(c) for c in range(0x300, 0x370)] + ["\u0903", "\u093f", "\u0e31", "\u20dd"],
        "scripts": list("éñüßøłđħıĳœÆÐÞαβγΩσςжщЯԱաגשعربहिन्दीไทยᏣᏴⴀⰀꙀ𐐀𞤀µſǅʔˆ") + [chr(0x1F00), chr(0x2C00)],
        "fullwidth": [chr(c) for c in range(0xFF01, 0xFF60)],
        "other": ["\x00", "\x01", "\x1c", "\x7f", "\u00ad", "\u200b", "\u200e", "\ue000", "\U000f0000", "\ufffd", "\uffff"],
    }

    def any_cp():  # a code point from any plane
        while True:
            r = rng.random()
            if r < 0.5:
                cp = rng.randrange(0x80, 0x10000)
            elif r < 0.8:
                cp = rng.randrange(0x10000, 0x40000)
            else:
                cp = rng.randrange(0x40000, 0x110000)
            if ok(cp):
                return chr(cp)

    names = list(pools)
    for _ in range(n):
        k = rng.randrange(1, 40)
        mix = rng.sample(names, rng.randrange(1, 5))
        s = []
        for _ in range(k):
            if rng.random() < 0.15:
                s.append(any_cp())
            else:
                s.append(rng.choice(pools[rng.choice(mix)]))
        cases.append("".join(c for c in "".join(s) if ok(ord(c))))

    bad = 0
    for pre, pats in PRE.items():
        for text in cases:
            want = split(text, pats)
            got = latte.split(pre, text)
            if got != want:
                bad += 1
                if bad <= 15:
                    print(f"DIFF {pre} {text!r}\n  regex: {want!r}\n  latte: {got!r}")
    latte.close()
    total = 2 * len(cases)
    print(f"{total - bad}/{total} splits equal ({len(cases)} strings x deepseek-llm, deepseek-v3; seed {seed})")
    return 1 if bad or wrong else 0


if __name__ == "__main__":
    sys.exit(main())

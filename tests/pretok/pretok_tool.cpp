// latte-pretok: latte's pre-tokenizer on stdin lines, for tests/pretok_check.py.
//   "<pre> <hex of UTF-8 text>"  ->  the pieces, each as hex, separated by spaces (one line)
//   "classes"                    ->  latte::bpe_char_class of U+0000..U+10FFFF, one char each (one line)
#include <cstdio>
#include <iostream>
#include <string>

#include "latte/tokenizer.h"

int main() {
    std::ios::sync_with_stdio(false);
    std::string line;
    static const char* hex = "0123456789abcdef";
    while (std::getline(std::cin, line)) {
        std::string out;
        if (line == "classes") {
            out.reserve(0x110000);
            for (uint32_t cp = 0; cp < 0x110000; ++cp) out += latte::bpe_char_class(cp);
        } else {
            const size_t sp = line.find(' ');
            const std::string pre = line.substr(0, sp);
            const std::string h = sp == std::string::npos ? "" : line.substr(sp + 1);
            std::string text;
            for (size_t i = 0; i + 1 < h.size(); i += 2) text += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
            for (const std::string& p : latte::bpe_pre_tokenize(text, pre)) {
                if (!out.empty()) out += ' ';
                for (unsigned char c : p) out += hex[c >> 4], out += hex[c & 15];
            }
        }
        std::cout << out << '\n' << std::flush;
    }
    return 0;
}

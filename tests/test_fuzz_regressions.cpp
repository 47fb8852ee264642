// Replays the fuzz targets' seed corpora and every saved crash input (tests/fuzz/regressions/T/)
// through the same bodies the libFuzzer targets run (tests/fuzz/fuzz_bodies.h), in the ordinary
// build: a fixed crash stays fixed even where clang/libFuzzer are not available.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_bodies.h"

namespace fs = std::filesystem;

namespace {

int replay(const std::string& target, int (*one)(const uint8_t*, size_t)) {
    int n = 0;
    for (const char* kind : {"corpus", "regressions"}) {
        const fs::path dir = fs::path(LATTE_SOURCE_DIR) / "tests" / "fuzz" / kind / target;
        if (!fs::exists(dir)) continue;
        for (const auto& e : fs::directory_iterator(dir)) {
            if (!e.is_regular_file() || e.path().filename().string()[0] == '.') continue;
            std::ifstream in(e.path(), std::ios::binary);
            // A heap copy of exactly the file's size, as libFuzzer passes it (ASan sees overreads).
            const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            std::unique_ptr<uint8_t[]> exact(new uint8_t[bytes.size() + (bytes.empty() ? 1 : 0)]);
            std::copy(bytes.begin(), bytes.end(), exact.get());
            INFO(e.path().string());
            REQUIRE_NOTHROW(one(exact.get(), bytes.size()));
            ++n;
        }
    }
    return n;
}

}  // namespace

TEST_CASE("fuzz: the GGUF target's seeds and saved crash inputs pass", "[fuzz][gguf]") {
    CHECK(replay("gguf", latte::fuzz::gguf_one) >= 4);
}

TEST_CASE("fuzz: the tokenizer target's seeds and saved crash inputs pass", "[fuzz][tokenizer]") {
    CHECK(replay("tokenizer", latte::fuzz::tokenizer_one) >= 8);
}

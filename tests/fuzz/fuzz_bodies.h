// The bodies of the libFuzzer targets (tests/fuzz/fuzz_*.cpp, built with clang by tools/fuzz.sh),
// kept in a header so that the ordinary test suite (tests/test_fuzz_regressions.cpp) replays the
// seed corpora and every crash input saved under tests/fuzz/regressions/ through the same code.
//
// Contract checked: any input either parses or throws latte::Error; nothing else (no crash, no
// out-of-bounds read, no other exception type, no UB under -fsanitize=address,undefined).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "latte/error.h"
#include "latte/gguf.h"
#include "latte/tokenizer.h"

namespace latte::fuzz {

// A broken contract: a crash under libFuzzer (LATTE_FUZZING, so that it saves the input), an
// exception that fails the replay test in the ordinary suite.
[[noreturn]] inline void fuzz_fail(const char* what) {
#ifdef LATTE_FUZZING
    (void)what;
    __builtin_trap();
#else
    throw std::logic_error(std::string("fuzz contract broken: ") + what);
#endif
}

// GGUF: from_memory, then every accessor a loader uses, over every key and tensor, and the
// tokenizer's reading of the file's tokenizer.ggml.* keys.
inline int gguf_one(const uint8_t* data, size_t size) {
    std::unique_ptr<GGUFFile> f;
    try {
        f = GGUFFile::from_memory(data, size, "fuzz.gguf");
    } catch (const Error&) {
        return 0;
    }
    volatile uint64_t sink = 0;
    volatile double fsink = 0;
    for (const auto& [key, v] : f->metadata()) {
        if (f->find(key) == nullptr) fuzz_fail("a listed key is not found");
        try { sink = sink + f->get_u64(key); } catch (const Error&) {}
        try { sink = sink + static_cast<uint64_t>(f->get_i64(key)); } catch (const Error&) {}
        try { sink = sink + f->get_u32(key); } catch (const Error&) {}
        try { fsink = fsink + f->get_f64(key); } catch (const Error&) {}
        try { sink = sink + f->get_bool(key); } catch (const Error&) {}
        try { sink = sink + f->get_str(key).size(); } catch (const Error&) {}
        try { sink = sink + f->get_str_array(key).size(); } catch (const Error&) {}
        try { sink = sink + f->get_int_array(key).size(); } catch (const Error&) {}
        try { sink = sink + f->get_float_array(key).size(); } catch (const Error&) {}
    }
    for (const GGUFTensorInfo& t : f->tensors()) {
        if (f->find_tensor(t.name) == nullptr) fuzz_fail("a listed tensor is not found");
        sink = sink + static_cast<uint64_t>(t.nelements()) + t.shape_str().size();
        if (t.nbytes > 0) {
            // The tensor's bytes must lie inside the image: touch the first and the last.
            if (t.data == nullptr) fuzz_fail("tensor without data");
            sink = sink + t.data[0] + t.data[t.nbytes - 1];
            if (t.data < data || t.data + t.nbytes > data + size) fuzz_fail("tensor data outside the image");
        }
        if (t.ne.size() > 0) sink = sink + static_cast<uint64_t>(t.nrows());
    }
    try {
        const Tokenizer tok = Tokenizer::from_gguf(*f);
        const std::vector<int32_t> ids = tok.encode("Hello, world! 123 <｜end▁of▁sentence｜>", true, true);
        sink = sink + tok.decode(ids, true).size();
    } catch (const Error&) {
    }
    (void)sink;
    (void)fsink;
    return 0;
}

// The tiny model's vocabulary (latte-mkmodel --preset tiny: build_bpe_vocab(1024)).
inline const Tokenizer& tiny_tokenizer() {
    static const Tokenizer tok = [] {
        const BpeVocab v = build_bpe_vocab(1024);
        return Tokenizer(v.tokens, v.types, v.merges, v.bos, v.eos);
    }();
    return tok;
}

// Tokenizer: byte 0 picks the mode, the rest is text. Modes 0-3: encode (add_bos, parse_special),
// check the ids and, without parse_special, that decode(encode(s)) == s. Mode 4+: the rest is read
// as int32 ids (any value) and decoded: out-of-range ids must be an Error, nothing worse.
inline int tokenizer_one(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const Tokenizer& tok = tiny_tokenizer();
    const uint8_t mode = data[0] % 6;
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    if (mode < 4) {
        const bool add_bos = mode & 1, special = mode & 2;
        std::vector<int32_t> ids;
        try {
            ids = tok.encode(text, add_bos, special);
        } catch (const Error&) {
            fuzz_fail("encode threw on text");
        }
        for (int32_t id : ids)
            if (id < 0 || id >= tok.n_vocab()) fuzz_fail("encode gave an id outside the vocabulary");
        if (add_bos && (ids.empty() || ids[0] != tok.bos())) fuzz_fail("no BOS");
        const std::string back = tok.decode(ids, special);
        if (!special && back != text) fuzz_fail("decode(encode(s)) != s");
        (void)bpe_pre_tokenize(text);
    } else {
        std::vector<int32_t> ids((size - 1) / 4);
        if (!ids.empty()) std::memcpy(ids.data(), data + 1, ids.size() * 4);
        if (mode == 5)  // mostly valid ids
            for (int32_t& id : ids) id = static_cast<int32_t>(static_cast<uint32_t>(id) % static_cast<uint32_t>(tok.n_vocab() + 2)) - 1;
        bool bad = false;
        for (int32_t id : ids) bad |= id < 0 || id >= tok.n_vocab();
        try {
            const std::string s = tok.decode(ids, mode == 5);
            if (bad) fuzz_fail("decode accepted an id outside the vocabulary");
            // Re-encoding decoded text must give valid ids again.
            for (int32_t id : tok.encode(s, false)) if (id < 2 || id >= tok.n_vocab()) fuzz_fail("re-encode: bad id");
        } catch (const Error&) {
            if (!bad) fuzz_fail("decode threw on valid ids");
        }
    }
    return 0;
}

}  // namespace latte::fuzz

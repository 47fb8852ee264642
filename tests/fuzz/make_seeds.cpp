// Writes the seed corpora of tests/fuzz/corpus/ (committed; rerun only to change them). The GGUF
// seeds carry no .gguf suffix: .gitignore ignores *.gguf.
//   g++ -std=c++20 -Iinclude tests/fuzz/make_seeds.cpp build/liblatte.a -lhwloc -lpthread -o /tmp/make_seeds
//   /tmp/make_seeds MODEL.gguf tests/fuzz/corpus
// MODEL.gguf: latte-mkmodel --preset tiny --type q4_0 --vocab 300 --n-embd 32 --heads 1 --layers 1
//   --ff 32 --ff-exp 32 --experts 0 --q-lora-rank 0 (its metadata and its small tensors are kept:
//   the whole file is 110 KB, over the 100 KB a seed should be).
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "latte/gguf.h"
#include "latte/tokenizer.h"

using namespace latte;

static void put(const std::string& path, const std::vector<uint8_t>& b) {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    std::printf("%s: %zu bytes\n", path.c_str(), b.size());
}
static void put_s(const std::string& path, const std::string& s) {
    put(path, std::vector<uint8_t>(s.begin(), s.end()));
}

int main(int argc, char** argv) {
    if (argc != 3) return 2;
    const std::string dir = argv[2];
    // 1. the model's metadata (deepseek2 keys, 300-token BPE vocabulary) and tensors under 4 KB.
    {
        auto f = GGUFFile::open(argv[1]);
        GGUFWriter w;
        for (const auto& [k, v] : f->metadata()) w.set(k, v);
        for (const auto& t : f->tensors())
            if (t.nbytes <= 4096) w.add_tensor(t.name, t.ne, t.type, std::vector<uint8_t>(t.data, t.data + t.nbytes));
        put(dir + "/gguf/tiny_model_meta", w.to_bytes());
    }
    // 2. every metadata type, nested arrays, every tensor type we convert, 1-D to 4-D, alignment 64.
    {
        GGUFWriter w(64);
        w.set("general.architecture", GGUFValue::str("deepseek2"));
        w.set("general.alignment", GGUFValue::u32(64));
        w.set("t.u8", GGUFValue::u8(200));
        w.set("t.i8", GGUFValue::i8(-5));
        w.set("t.u16", GGUFValue::u16(60000));
        w.set("t.i16", GGUFValue::i16(-30000));
        w.set("t.u32", GGUFValue::u32(4000000000u));
        w.set("t.i32", GGUFValue::i32(-7));
        w.set("t.u64", GGUFValue::u64(1ull << 40));
        w.set("t.i64", GGUFValue::i64(-(1ll << 40)));
        w.set("t.f32", GGUFValue::f32(1.5f));
        w.set("t.f64", GGUFValue::f64(-2.25));
        w.set("t.bool", GGUFValue::boolean(true));
        w.set("t.str", GGUFValue::str("héllo"));
        w.set("t.strs", GGUFValue::str_array({"a", "", "<｜end▁of▁sentence｜>"}));
        w.set("t.i32s", GGUFValue::i32_array({1, -2, 3}));
        w.set("t.f32s", GGUFValue::f32_array({0.5f, -1.0f}));
        w.set("t.nested", GGUFValue::array(GGUFType::ARRAY, {GGUFValue::i32_array({4, 5}), GGUFValue::i32_array({})}));
        std::vector<float> vals(256);
        for (size_t i = 0; i < vals.size(); ++i) vals[i] = static_cast<float>(i) * 0.01f - 1.0f;
        w.add_tensor_f32("a.f32", {8}, GGMLType::F32, vals.data());
        w.add_tensor_f32("b.f16", {32, 2}, GGMLType::F16, vals.data());
        w.add_tensor_f32("c.bf16", {4, 2, 2}, GGMLType::BF16, vals.data());
        w.add_tensor_f32("d.q8_0", {64, 2}, GGMLType::Q8_0, vals.data());
        w.add_tensor_f32("e.q4_0", {32, 2, 1, 2}, GGMLType::Q4_0, vals.data());
        put(dir + "/gguf/types_a64", w.to_bytes());
    }
    // 3. empty: header only.
    put(dir + "/gguf/empty", GGUFWriter().to_bytes());
    // 4. a tokenizer-only file: the 300-token vocabulary as the model maker writes it.
    {
        const BpeVocab v = build_bpe_vocab(300);
        GGUFWriter w;
        w.set("tokenizer.ggml.model", GGUFValue::str("gpt2"));
        w.set("tokenizer.ggml.pre", GGUFValue::str("deepseek-v3"));
        w.set("tokenizer.ggml.tokens", GGUFValue::str_array(v.tokens));
        w.set("tokenizer.ggml.token_type", GGUFValue::i32_array(v.types));
        w.set("tokenizer.ggml.merges", GGUFValue::str_array(v.merges));
        w.set("tokenizer.ggml.bos_token_id", GGUFValue::u32(0));
        w.set("tokenizer.ggml.eos_token_id", GGUFValue::u32(1));
        w.set("tokenizer.ggml.add_bos_token", GGUFValue::boolean(true));
        put(dir + "/gguf/tokenizer_300", w.to_bytes());
    }
    // Tokenizer seeds: byte 0 is the mode (fuzz_bodies.h), then text or ids.
    put_s(dir + "/tokenizer/en", std::string("\0", 1) + "The weather this morning was cool and clear, with a light wind.");
    put_s(dir + "/tokenizer/en_bos", "\x01" "Mr. Darcy said: \"It is 1813!\"\n\n  Tabs\tand   spaces.");
    put_s(dir + "/tokenizer/special", "\x03" "<｜begin▁of▁sentence｜>Hi<｜end▁of▁sentence｜><｜end▁of▁sentence｜x");
    put_s(dir + "/tokenizer/utf8", std::string("\0", 1) + "naïve café — 日本語のテキスト 한국어 😀👍🏽 e\xcc\x81");
    put_s(dir + "/tokenizer/invalid_utf8", std::string("\x02\xff\xfe\xc3\x28\xe2\x82\xf0\x9f\x98", 10));
    put_s(dir + "/tokenizer/digits", std::string("\0", 1) + "3.14159 1234567890 $1,000.00 ٣٤٥");
    std::string ids = "\x04";
    for (int32_t id : {0, 5, 300, 1023, 2, -1}) ids.append(reinterpret_cast<const char*>(&id), 4);
    put_s(dir + "/tokenizer/ids_raw", ids);
    ids[0] = '\x05';
    put_s(dir + "/tokenizer/ids_mod", ids);
    return 0;
}

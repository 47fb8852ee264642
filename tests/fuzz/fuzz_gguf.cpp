// libFuzzer target: the GGUF parser (GGUFFile::from_memory) and the tokenizer's reading of a file.
// Built by tools/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined); seeds in corpus/gguf/.
#include "fuzz_bodies.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return latte::fuzz::gguf_one(data, size); }

// libFuzzer target: Tokenizer::encode/decode with the tiny model's vocabulary (build_bpe_vocab(1024)).
// Built by tools/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined); seeds in corpus/tokenizer/.
#include "fuzz_bodies.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return latte::fuzz::tokenizer_one(data, size); }

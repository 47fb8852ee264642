// Byte-level BPE tokenizer as GGUF files of DeepSeek models carry it (tokenizer.ggml.model = "gpt2").
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace latte {

class GGUFFile;

// GGUF token types (tokenizer.ggml.token_type).
enum class TokenType : int32_t { Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

class Tokenizer {
public:
    // Reads tokenizer.ggml.{model,pre,tokens,token_type,merges,bos_token_id,eos_token_id,add_bos_token}.
    // Throws latte::Error naming the file and key when the model is not "gpt2" or a key is missing/bad.
    static Tokenizer from_gguf(const GGUFFile& f);
    // Builds one directly (used by tests and by the model maker).
    Tokenizer(std::vector<std::string> tokens, std::vector<int32_t> types, std::vector<std::string> merges,
              int32_t bos, int32_t eos, std::string pre = "deepseek-v3", bool add_bos = true);
    Tokenizer() = default;

    // Text -> ids. Special (control) tokens written literally in the text are matched as such
    // when parse_special is true. add_bos prepends BOS if the vocabulary says to add it.
    std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special = false) const;
    // Id -> the bytes it stands for (control tokens give their text only when `special` is set).
    std::string token_to_piece(int32_t id, bool special = false) const;
    std::string decode(const std::vector<int32_t>& ids, bool special = false) const;

    int32_t n_vocab() const { return static_cast<int32_t>(tokens_.size()); }
    int32_t bos() const { return bos_; }
    int32_t eos() const { return eos_; }
    bool add_bos() const { return add_bos_; }
    const std::string& token_text(int32_t id) const { return tokens_.at(static_cast<size_t>(id)); }
    TokenType token_type(int32_t id) const { return static_cast<TokenType>(types_.at(static_cast<size_t>(id))); }

private:
    void build_index();
    void encode_text(std::string_view text, std::vector<int32_t>& out) const;  // pre-tokenize + BPE
    void encode_word(std::string_view word, std::vector<int32_t>& out) const;  // BPE of one pre-token
    std::vector<std::string> tokens_;
    std::vector<int32_t> types_;
    std::vector<std::string> merges_;
    int32_t bos_ = -1, eos_ = -1;
    std::string pre_;
    bool add_bos_ = true;
    std::unordered_map<std::string, int32_t> token_id_;
    std::unordered_map<std::string, int32_t> merge_rank_;  // "left right" -> rank
    std::vector<int32_t> byte_id_;      // byte -> id of its byte token (256 entries)
    std::vector<int32_t> special_ids_;  // Control/UserDefined ids matched by parse_special, longest text first
};

// GPT-2's byte-to-unicode spelling: the UTF-8 text of the code point that stands for byte `b`.
std::string bpe_byte_to_text(uint8_t b);
// The byte that the single code point `text` (UTF-8) stands for, or -1 if it spells no byte.
int bpe_text_to_byte(std::string_view text);
// The pre-tokenizer split for tokenizer.ggml.pre = `pre`: "deepseek-llm" (DeepSeek-V2) or
// "deepseek-v3" (also used for any other value). See tokenizer.cpp for the regexes.
std::vector<std::string> bpe_pre_tokenize(std::string_view text, const std::string& pre = "deepseek-v3");
// The class the pre-tokenizer gives code point `cp` (for tests): 'L' (\p{L} or \p{M}), 'N' (\p{N}),
// 'P' (\p{P} or \p{S}), 's' (white space but CR/LF), 'n' (CR, LF), 'O' (anything else).
char bpe_char_class(uint32_t cp);

// A byte-level BPE vocabulary trained on a built-in English text, for the model maker.
// Ids: 0 = BOS "<｜begin▁of▁sentence｜>", 1 = EOS "<｜end▁of▁sentence｜>", then the 256 byte tokens in
// GPT-2's byte-to-unicode spelling, then one token per learned merge; if the text runs out of
// pairs before vocab_size, the rest are "<｜unused_N｜>" tokens of type Unused.
struct BpeVocab {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    std::vector<std::string> merges;
    int32_t bos = 0, eos = 1;
};
BpeVocab build_bpe_vocab(int32_t vocab_size);  // vocab_size >= 258, throws latte::Error otherwise

}  // namespace latte

// DeepSeek-V2 and V3 chat templates (as llama.cpp writes them) for latte-cli's conversation mode.
//   V2: {system}\n\nUser: {user}\n\nAssistant: {reply}<｜end▁of▁sentence｜>User: ...   (then "Assistant:")
//   V3: {system}<｜User｜>{user}<｜Assistant｜>{reply}<｜end▁of▁sentence｜><｜User｜>...   (then "<｜Assistant｜>")
// BOS is not part of the text: the caller adds it when tokenizing the first turn.
#pragma once
#include <string>
#include <vector>

namespace latte {
class Tokenizer;
}

namespace latte::chat {

enum class Template { DeepSeek2, DeepSeek3 };

struct Message {
    std::string role;  // "system", "user", "assistant"
    std::string content;
};

extern const char* const kEndOfSentence;  // "<｜end▁of▁sentence｜>"

// "deepseek2" | "deepseek3" | "auto" (deepseek3 when the vocabulary has "<｜User｜>", else deepseek2).
// Throws std::invalid_argument for other names.
Template pick(const std::string& name, const Tokenizer& tok);
const char* name(Template t);

// The whole conversation; add_assistant appends the prefix of the assistant's next reply.
std::string format(Template t, const std::vector<Message>& messages, bool add_assistant);
// What one more user turn appends to the text so far: the system prompt (first turn only), the
// user message and the assistant prefix. The reply then follows, closed by kEndOfSentence.
std::string user_turn(Template t, const std::string& system, const std::string& user, bool first);

}  // namespace latte::chat

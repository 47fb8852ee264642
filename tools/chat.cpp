// DeepSeek chat templates (see chat.h).
#include "chat.h"

#include <stdexcept>

#include "latte/tokenizer.h"

namespace latte::chat {

const char* const kEndOfSentence = "<｜end▁of▁sentence｜>";

namespace {
const char* const kUser3 = "<｜User｜>";
const char* const kAssistant3 = "<｜Assistant｜>";

bool has_token(const Tokenizer& tok, const std::string& text) {
    for (int32_t i = 0; i < tok.n_vocab(); ++i)
        if (tok.token_text(i) == text) return true;
    return false;
}
}  // namespace

Template pick(const std::string& n, const Tokenizer& tok) {
    if (n == "deepseek2") return Template::DeepSeek2;
    if (n == "deepseek3") return Template::DeepSeek3;
    if (n == "auto") return has_token(tok, kUser3) ? Template::DeepSeek3 : Template::DeepSeek2;
    throw std::invalid_argument("expected deepseek2, deepseek3 or auto, got '" + n + "'");
}

const char* name(Template t) { return t == Template::DeepSeek3 ? "deepseek3" : "deepseek2"; }

std::string format(Template t, const std::vector<Message>& messages, bool add_assistant) {
    std::string s;
    for (const Message& m : messages) {
        if (t == Template::DeepSeek2) {
            if (m.role == "system") s += m.content + "\n\n";
            else if (m.role == "user") s += "User: " + m.content + "\n\n";
            else if (m.role == "assistant") s += "Assistant: " + m.content + kEndOfSentence;
        } else {
            if (m.role == "system") s += m.content;
            else if (m.role == "user") s += kUser3 + m.content;
            else if (m.role == "assistant") s += kAssistant3 + m.content + kEndOfSentence;
        }
    }
    if (add_assistant) s += t == Template::DeepSeek2 ? "Assistant:" : kAssistant3;
    return s;
}

std::string user_turn(Template t, const std::string& system, const std::string& user, bool first) {
    std::vector<Message> m;
    if (first && !system.empty()) m.push_back({"system", system});
    m.push_back({"user", user});
    return format(t, m, true);
}

}  // namespace latte::chat

// Tests of latte-cli's DeepSeek chat templates (tools/chat.h).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "chat.h"
#include "latte/tokenizer.h"

using latte::chat::Message;
using latte::chat::Template;

namespace {
latte::Tokenizer vocab_with(std::vector<std::string> extra) {
    std::vector<std::string> toks = {"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"};
    for (int b = 0; b < 256; ++b) toks.push_back(latte::bpe_byte_to_text(static_cast<uint8_t>(b)));
    for (auto& e : extra) toks.push_back(e);
    std::vector<int32_t> types(toks.size(), 1);
    types[0] = types[1] = 3;
    return latte::Tokenizer(toks, types, {}, 0, 1);
}
}  // namespace

TEST_CASE("chat: DeepSeek-V2 template as llama.cpp writes it", "[chat]") {
    const std::vector<Message> m = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Why?"}};
    CHECK(latte::chat::format(Template::DeepSeek2, m, true) ==
          "Be brief.\n\nUser: Hi\n\nAssistant: Hello!<｜end▁of▁sentence｜>User: Why?\n\nAssistant:");
    CHECK(latte::chat::user_turn(Template::DeepSeek2, "Be brief.", "Hi", true) == "Be brief.\n\nUser: Hi\n\nAssistant:");
    CHECK(latte::chat::user_turn(Template::DeepSeek2, "Be brief.", "Why?", false) == "User: Why?\n\nAssistant:");
    CHECK(latte::chat::user_turn(Template::DeepSeek2, "", "Hi", true) == "User: Hi\n\nAssistant:");
}

TEST_CASE("chat: DeepSeek-V3 template as llama.cpp writes it", "[chat]") {
    const std::vector<Message> m = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Why?"}};
    CHECK(latte::chat::format(Template::DeepSeek3, m, true) ==
          "Be brief.<｜User｜>Hi<｜Assistant｜>Hello!<｜end▁of▁sentence｜><｜User｜>Why?<｜Assistant｜>");
    CHECK(latte::chat::format(Template::DeepSeek3, m, false).substr(0, 9) == "Be brief.");
    // The turns, each followed by its reply and EOS, give the whole conversation.
    const std::string turns = latte::chat::user_turn(Template::DeepSeek3, "Be brief.", "Hi", true) + "Hello!" +
                              latte::chat::kEndOfSentence + latte::chat::user_turn(Template::DeepSeek3, "x", "Why?", false);
    CHECK(turns == latte::chat::format(Template::DeepSeek3, m, true));
}

TEST_CASE("chat: auto picks V3 when the vocabulary has <｜User｜>", "[chat]") {
    CHECK(latte::chat::pick("auto", vocab_with({})) == Template::DeepSeek2);
    CHECK(latte::chat::pick("auto", vocab_with({"<｜User｜>", "<｜Assistant｜>"})) == Template::DeepSeek3);
    CHECK(latte::chat::pick("deepseek3", vocab_with({})) == Template::DeepSeek3);
    CHECK_THROWS_AS(latte::chat::pick("chatml", vocab_with({})), std::invalid_argument);
    CHECK(std::string(latte::chat::name(Template::DeepSeek3)) == "deepseek3");
}

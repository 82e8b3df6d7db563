// load_chat_template + make_chat_context against AutoTokenizer.apply_chat_template
// on real tokenizer_config.json files (Llama 3.1, Qwen 3, DeepSeek V3) and on
// directories exercising chat_template.jinja, template lists and token objects.

#include <gtest/gtest.h>

#include <algorithm>

#include "tests/chat/chat_test_support.hpp"

namespace troupe::chat_test {
namespace {

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(fixture_dir() / "models"))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

/// What apply_chat_template gives for one conversation: the text, or "<type>: <message>".
std::pair<bool, std::string> apply(const chat_template_source& source, const boost::json::object& conversation) {
  try {
    chat_template_inputs inputs = inputs_of(conversation, source.special_tokens);
    const std::string& text = source.select(inputs.tools.has_value());
    chat_template tpl = chat_template::compile(text);
    return {true, tpl.render(make_chat_context(inputs), fixed_clock_options())};
  } catch (const chat_template_error& e) {
    return {false, e.python_type() + ": " + e.message()};
  }
}

class ModelDir : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelDir, MatchesApplyChatTemplate) {
  std::filesystem::path dir = fixture_dir() / "models" / GetParam();
  chat_template_source source = load_chat_template(dir);
  boost::json::object conversations = conversations_by_name();
  boost::json::value expected = read_json(dir / "expected.json");
  for (const auto& c : expected.at("cases").as_array()) {
    std::string name(c.at("conversation").as_string());
    SCOPED_TRACE(GetParam() + " / " + name);
    auto [ok, text] = apply(source, conversations.at(name).as_object());
    if (const auto* error = c.as_object().if_contains("error")) {
      EXPECT_FALSE(ok) << text;
      EXPECT_EQ(text,
                std::string(error->at("type").as_string()) + ": " + std::string(error->at("message").as_string()));
    } else {
      EXPECT_TRUE(ok) << text;
      EXPECT_EQ(text, std::string(c.at("output").as_string()));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ModelDir, ::testing::ValuesIn(model_names()));

TEST(LoadChatTemplate, ReadsSpecialTokensFromStringsAndObjects) {
  chat_template_source llama = load_chat_template(fixture_dir() / "models" / "llama3_1");
  EXPECT_EQ(llama.special_tokens.at("bos_token").as_string(), "<|begin_of_text|>");
  EXPECT_EQ(llama.special_tokens.at("eos_token").as_string(), "<|eot_id|>");
  chat_template_source objects = load_chat_template(fixture_dir() / "models" / "token_objects");
  EXPECT_EQ(objects.special_tokens.at("bos_token").as_string(), "<BOS>");
  EXPECT_EQ(objects.special_tokens.at("eos_token").as_string(), "<EOS>");
  chat_template_source qwen = load_chat_template(fixture_dir() / "models" / "qwen3");
  EXPECT_FALSE(qwen.special_tokens.contains("bos_token"));  // null in the file
}

TEST(LoadChatTemplate, JinjaFileTakesPrecedenceAndListsPickToolUse) {
  chat_template_source overridden = load_chat_template(fixture_dir() / "models" / "jinja_file_overrides_config");
  EXPECT_NE(overridden.select(false).find("[jinja file]"), std::string::npos);
  chat_template_source listed = load_chat_template(fixture_dir() / "models" / "template_list");
  EXPECT_NE(listed.select(true).find("[tool_use]"), std::string::npos);
  EXPECT_NE(listed.select(false).find("[default]"), std::string::npos);
}

TEST(LoadChatTemplate, BadInputsNameTheFile) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "troupe_chat_bad_config";
  std::filesystem::create_directories(dir);
  { std::ofstream(dir / "tokenizer_config.json") << "{\"chat_template\": 5}"; }
  try {
    load_chat_template(dir);
    ADD_FAILURE() << "expected an error";
  } catch (const chat_template_error& e) {
    EXPECT_EQ(e.kind(), chat_template_error_kind::input);
    EXPECT_NE(std::string(e.what()).find("tokenizer_config.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("chat_template"), std::string::npos) << e.what();
  }
  { std::ofstream(dir / "tokenizer_config.json") << "{not json"; }
  EXPECT_THROW(load_chat_template(dir), chat_template_error);
  std::filesystem::remove_all(dir);
  EXPECT_THROW(load_chat_template(dir), chat_template_error);
}

}  // namespace
}  // namespace troupe::chat_test

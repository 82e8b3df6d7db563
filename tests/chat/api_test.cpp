// The public API beyond rendering fidelity: concurrent renders of one
// compiled template, the context builder, template selection and the clock.

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "tests/chat/chat_test_support.hpp"

namespace troupe::chat_test {
namespace {

boost::json::object sample_context() {
  chat_template_inputs inputs;
  inputs.messages = boost::json::parse(R"([{"role": "system", "content": "Be terse."},
                                           {"role": "user", "content": "Weather?"},
                                           {"role": "assistant", "content": null,
                                            "tool_calls": [{"type": "function", "function":
                                              {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
                                           {"role": "tool", "content": "sunny"}])")
                        .as_array();
  inputs.tools = boost::json::parse(R"([{"type": "function", "function": {"name": "get_weather",
                                        "description": "Weather", "parameters": {"type": "object",
                                        "properties": {"city": {"type": "string"}}}}}])")
                     .as_array();
  inputs.add_generation_prompt = true;
  inputs.special_tokens["bos_token"] = "<|begin_of_text|>";
  inputs.special_tokens["eos_token"] = "<|eot_id|>";
  return make_chat_context(inputs);
}

TEST(ChatTemplateApi, ConcurrentRendersOfOneTemplateAgree) {
  chat_template tpl =
      chat_template::compile(read_text(fixture_dir() / "templates" / "meta-llama-Llama-3.1-8B-Instruct.jinja"));
  boost::json::object context = sample_context();
  const std::string expected = tpl.render(context, fixed_clock_options());
  ASSERT_NE(expected.find("get_weather"), std::string::npos);
  std::vector<std::thread> threads;
  std::vector<int> mismatches(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      chat_template copy = tpl;  // copies share the immutable syntax tree
      for (int i = 0; i < 50; ++i)
        if (copy.render(context, fixed_clock_options()) != expected) ++mismatches[static_cast<std::size_t>(t)];
    });
  }
  for (std::thread& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

TEST(ChatTemplateApi, ContextDropsNullKeysAndFillsAbsentArgumentsWithNone) {
  boost::json::object context = sample_context();
  const boost::json::object& assistant = context.at("messages").as_array().at(2).as_object();
  EXPECT_FALSE(assistant.contains("content"));
  EXPECT_TRUE(context.at("documents").is_null());
  EXPECT_EQ(context.at("add_generation_prompt").as_bool(), true);
  EXPECT_EQ(context.at("bos_token").as_string(), "<|begin_of_text|>");
  chat_template tpl = chat_template::compile("{{ tools is none }}|{{ documents is none }}|{{ messages[0].content }}");
  chat_template_inputs bare;
  bare.messages.push_back(boost::json::object{{"role", "user"}, {"content", "hi"}});
  EXPECT_EQ(tpl.render(make_chat_context(bare)), "True|True|hi");
}

TEST(ChatTemplateApi, ContextAliasesReasoningLikeTransformers) {
  chat_template_inputs inputs;
  inputs.messages.push_back(boost::json::object{{"role", "assistant"}, {"content", "x"}, {"reasoning", "why"}});
  boost::json::object message = make_chat_context(inputs).at("messages").as_array().at(0).as_object();
  std::vector<std::string> keys;
  for (const auto& [k, v] : message) keys.emplace_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"thinking", "role", "content", "reasoning", "reasoning_content"}));
  EXPECT_EQ(message.at("reasoning_content").as_string(), "why");
}

TEST(ChatTemplateApi, ContextRejectsUnusableInputs) {
  chat_template_inputs empty;
  EXPECT_THROW(make_chat_context(empty), chat_template_error);
  chat_template_inputs not_object;
  not_object.messages.push_back("just a string");
  EXPECT_THROW(make_chat_context(not_object), chat_template_error);
  chat_template_inputs clash;
  clash.messages.push_back(boost::json::object{{"role", "user"}, {"content", "hi"}});
  clash.extra["messages"] = boost::json::array();
  EXPECT_THROW(make_chat_context(clash), chat_template_error);
}

TEST(ChatTemplateApi, ExtraVariablesOverrideSpecialTokens) {
  chat_template_inputs inputs;
  inputs.messages.push_back(boost::json::object{{"role", "user"}, {"content", "hi"}});
  inputs.special_tokens["bos_token"] = "<s>";
  inputs.extra["bos_token"] = "<override>";
  inputs.extra["enable_thinking"] = false;
  chat_template tpl = chat_template::compile("{{ bos_token }}{{ enable_thinking }}");
  EXPECT_EQ(tpl.render(make_chat_context(inputs)), "<override>False");
}

TEST(ChatTemplateApi, TemplateSelectionFollowsTransformers) {
  chat_template_source single;
  single.templates["default"] = "d";
  EXPECT_EQ(single.select(true), "d");
  chat_template_source named;
  named.templates["rag"] = "r";
  named.templates["tool_use"] = "t";
  EXPECT_EQ(named.select(true), "t");
  EXPECT_THROW(named.select(false), chat_template_error);
  EXPECT_THROW(chat_template_source{}.select(false), chat_template_error);
}

TEST(ChatTemplateApi, StrftimeNowUsesTheGivenClock) {
  chat_render_options options;
  std::tm t{};
  t.tm_year = 124;
  t.tm_mon = 6;
  t.tm_mday = 26;
  options.now = t;
  EXPECT_EQ(chat_template::compile("{{ strftime_now('%d %b %Y') }}").render({}, options), "26 Jul 2024");
  EXPECT_EQ(chat_template::compile("{{ strftime_now('%Y')|length }}").render({}), "4");
}

TEST(ChatTemplateApi, SourceIsNormalisedLikeJinja) {
  chat_template tpl = chat_template::compile("a\r\nb\n");
  EXPECT_EQ(tpl.source(), "a\nb");
  EXPECT_EQ(tpl.render({}), "a\nb");
}

}  // namespace
}  // namespace troupe::chat_test

// Response JSON shapes, checked field by field against OpenAI's documented
// objects (text_completion, chat.completion, chat.completion.chunk).

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "api/http/response_render.hpp"

namespace troupe::api {
namespace {

std::vector<token_logprobs> two_tokens() {
  return {{11, "He", -0.5f, {{"He", -0.5f}, {"She", -1.5f}}, {11, 12}}, {13, "llo", -0.25f, {{"y", -0.1f}}, {14}}};
}

TEST(LogprobsJson, CompletionsShapeHasParallelListsAndOffsets) {
  std::size_t offset = 6;  // e.g. after an echoed prompt
  const boost::json::object logprobs = completion_logprobs_json(two_tokens(), offset);
  EXPECT_EQ(boost::json::serialize(logprobs.at("tokens")), R"(["He","llo"])");
  EXPECT_DOUBLE_EQ(logprobs.at("token_logprobs").as_array()[0].as_double(), -0.5);
  EXPECT_DOUBLE_EQ(logprobs.at("token_logprobs").as_array()[1].as_double(), -0.25);
  EXPECT_EQ(boost::json::serialize(logprobs.at("text_offset")), "[6,8]");
  EXPECT_EQ(offset, 11u);
  const boost::json::array& tops = logprobs.at("top_logprobs").as_array();
  ASSERT_EQ(tops.size(), 2u);
  EXPECT_EQ(tops[0].as_object().size(), 2u);  // "He" is both sampled and an alternative
  EXPECT_DOUBLE_EQ(tops[0].at("She").as_double(), -1.5);
  EXPECT_DOUBLE_EQ(tops[1].at("llo").as_double(), -0.25);  // the sampled token is always listed
  EXPECT_DOUBLE_EQ(tops[1].at("y").as_double(), -0.1);     // the float's shortest decimal, not -0.10000000149
}

TEST(LogprobsJson, ChatShapeHasBytesAndAlternatives) {
  const boost::json::object logprobs = chat_logprobs_json(two_tokens());
  const boost::json::array& content = logprobs.at("content").as_array();
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0].at("token").as_string(), "He");
  EXPECT_DOUBLE_EQ(content[0].at("logprob").as_double(), -0.5);
  EXPECT_EQ(boost::json::serialize(content[0].at("bytes")), "[72,101]");
  const boost::json::array& top = content[0].at("top_logprobs").as_array();
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[1].at("token").as_string(), "She");
  EXPECT_EQ(boost::json::serialize(top[1].at("bytes")), "[83,104,101]");
}

TEST(LogprobsJson, PartialUtf8TokensStayValidJsonAndKeepTheirBytes) {
  const std::vector<token_logprobs> tokens = {{1, "\xE2\x82", -1.0f, {}, {}},
                                              {2, "x", -std::numeric_limits<float>::infinity(), {}, {}}};
  const boost::json::object logprobs = chat_logprobs_json(tokens);
  const std::string json = boost::json::serialize(logprobs);
  EXPECT_NO_THROW(boost::json::parse(json));  // Boost.JSON rejects invalid UTF-8 on parse
  const auto& first = logprobs.at("content").as_array()[0];
  EXPECT_EQ(first.at("token").as_string(), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(boost::json::serialize(first.at("bytes")), "[226,130]");
  EXPECT_DOUBLE_EQ(logprobs.at("content").as_array()[1].at("logprob").as_double(), -9999.0);
}

TEST(ResponseJson, CompletionObjectMatchesOpenAI) {
  const response_identity identity{endpoint_kind::completions, "cmpl-1", 1700000000, "m"};
  const std::vector<choice_result> choices = {{0, "Hello", 0, {}, finish_reason::length, {}},
                                              {1, "Hi", 0, {}, finish_reason::stop, "\n"}};
  const boost::json::object response = response_json(identity, choices, {7, 3, 5}, false);
  EXPECT_EQ(response.at("id").as_string(), "cmpl-1");
  EXPECT_EQ(response.at("object").as_string(), "text_completion");
  EXPECT_EQ(response.at("created").as_int64(), 1700000000);
  EXPECT_EQ(response.at("model").as_string(), "m");
  const auto& first = response.at("choices").as_array()[0];
  EXPECT_EQ(first.at("index").as_int64(), 0);
  EXPECT_EQ(first.at("text").as_string(), "Hello");
  EXPECT_TRUE(first.at("logprobs").is_null());
  EXPECT_EQ(first.at("finish_reason").as_string(), "length");
  EXPECT_EQ(response.at("choices").as_array()[1].at("stop_reason").as_string(), "\n");
  const auto& usage = response.at("usage");
  EXPECT_EQ(usage.at("prompt_tokens").as_int64(), 7);
  EXPECT_EQ(usage.at("completion_tokens").as_int64(), 5);
  EXPECT_EQ(usage.at("total_tokens").as_int64(), 12);
  EXPECT_EQ(usage.at("prompt_tokens_details").at("cached_tokens").as_int64(), 3);
}

TEST(ResponseJson, ChatObjectMatchesOpenAI) {
  const response_identity identity{endpoint_kind::chat, "chatcmpl-1", 5, "m"};
  const std::vector<choice_result> choices = {{0, "Hey", 0, two_tokens(), finish_reason::abort, {}}};
  const boost::json::object response = response_json(identity, choices, {1, 0, 2}, true);
  EXPECT_EQ(response.at("object").as_string(), "chat.completion");
  const auto& choice = response.at("choices").as_array()[0];
  EXPECT_EQ(choice.at("message").at("role").as_string(), "assistant");
  EXPECT_EQ(choice.at("message").at("content").as_string(), "Hey");
  EXPECT_EQ(choice.at("finish_reason").as_string(), "abort");
  EXPECT_EQ(choice.at("logprobs").at("content").as_array().size(), 2u);
}

TEST(StreamChunks, ChatChunksFollowOpenAIStreaming) {
  const chunk_builder builder({endpoint_kind::chat, "chatcmpl-9", 5, "m"}, true);
  const boost::json::object role = builder.role(2);
  EXPECT_EQ(role.at("object").as_string(), "chat.completion.chunk");
  EXPECT_TRUE(role.at("usage").is_null());  // include_usage: every chunk carries usage null
  const auto& role_choice = role.at("choices").as_array()[0];
  EXPECT_EQ(role_choice.at("index").as_int64(), 2);
  EXPECT_EQ(role_choice.at("delta").at("role").as_string(), "assistant");
  EXPECT_TRUE(role_choice.at("finish_reason").is_null());
  const boost::json::object text_chunk = builder.text(2, "abc", nullptr);
  const auto& text_choice = text_chunk.at("choices").as_array()[0];
  EXPECT_EQ(text_choice.at("delta").at("content").as_string(), "abc");
  EXPECT_FALSE(text_choice.at("delta").as_object().contains("role"));
  const boost::json::object finish_chunk = builder.finish(2, finish_reason::length, {});
  const auto& finish_choice = finish_chunk.at("choices").as_array()[0];
  EXPECT_TRUE(finish_choice.at("delta").as_object().empty());
  EXPECT_EQ(finish_choice.at("finish_reason").as_string(), "length");
  const boost::json::object usage = builder.usage({4, 1, 6});
  EXPECT_TRUE(usage.at("choices").as_array().empty());
  EXPECT_EQ(usage.at("usage").at("total_tokens").as_int64(), 10);
}

TEST(StreamChunks, CompletionChunksAndSseFraming) {
  const chunk_builder builder({endpoint_kind::completions, "cmpl-9", 5, "m"}, false);
  const boost::json::object chunk = builder.text(0, "xy", nullptr);
  EXPECT_EQ(chunk.at("object").as_string(), "text_completion");
  EXPECT_FALSE(chunk.contains("usage"));
  EXPECT_EQ(chunk.at("choices").as_array()[0].at("text").as_string(), "xy");
  const std::string event = sse_event(chunk);
  EXPECT_EQ(event.rfind("data: {", 0), 0u);
  EXPECT_EQ(event.substr(event.size() - 2), "\n\n");
  EXPECT_EQ(event.find('\n'), event.size() - 2);  // one line: JSON never spans lines
  EXPECT_EQ(sse_done_event, "data: [DONE]\n\n");
}

TEST(ResponseIds, ResponseIdsHaveThePrefixAndDiffer) {
  const std::string a = make_response_id(endpoint_kind::chat);
  const std::string b = make_response_id(endpoint_kind::chat);
  EXPECT_EQ(a.rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(a.size(), 9u + 32u);
  EXPECT_NE(a, b);
  EXPECT_EQ(make_response_id(endpoint_kind::completions).rfind("cmpl-", 0), 0u);
}

}  // namespace
}  // namespace troupe::api

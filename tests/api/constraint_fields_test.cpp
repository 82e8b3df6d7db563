// Structured-output fields → the request's constraint: OpenAI's
// response_format, vLLM's structured_outputs and guided_* fields, on both
// endpoints and the WebSocket API; one constraint per request.

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

#include "api/http/api_error.hpp"
#include "api/http/json_fields.hpp"
#include "api/http/openai_request.hpp"
#include "api/http/ws_protocol.hpp"

namespace troupe::api {
namespace {

using constraints::constraint_kind;

model_info small_model() {
  model_info model;
  model.served_model_name = "m";
  model.vocab_size = 1000;
  model.max_model_len = 2048;
  return model;
}

const std::string chat_head = R"({"messages":[{"role":"user","content":"x"}],)";
const std::string completions_head = R"({"prompt":"x",)";

generation_request chat_with(const std::string& fields) {
  return parse_chat_request(parse_json_object(chat_head + fields + "}"), request_limits{}, small_model()).prompts[0];
}

generation_request completions_with(const std::string& fields) {
  return parse_completions_request(parse_json_object(completions_head + fields + "}"), request_limits{}, small_model())
      .prompts[0];
}

/// The param of the 400 a chat request with `fields` gets ("" when accepted).
std::string chat_rejection(const std::string& fields) {
  try {
    chat_with(fields);
  } catch (const api_error& error) {
    EXPECT_EQ(error.status, 400) << fields;
    return error.param;
  }
  return "";
}

TEST(ConstraintFields, ResponseFormatJsonObjectAndJsonSchema) {
  EXPECT_FALSE(chat_with(R"("response_format":{"type":"text"})").constraint.has_value());
  const generation_request object = chat_with(R"("response_format":{"type":"json_object"})");
  ASSERT_TRUE(object.constraint.has_value());
  EXPECT_EQ(object.constraint->kind, constraint_kind::json_object);
  EXPECT_EQ(object.constraint_field, "response_format");
  const generation_request schema = completions_with(
      R"("response_format":{"type":"json_schema","json_schema":{"name":"p","strict":true,
         "schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}}})");
  ASSERT_TRUE(schema.constraint.has_value());
  EXPECT_EQ(schema.constraint->kind, constraint_kind::json_schema);
  EXPECT_EQ(boost::json::parse(schema.constraint->text),
            boost::json::parse(R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]})"));
  EXPECT_EQ(schema.constraint_field, "response_format.json_schema.schema");
}

TEST(ConstraintFields, StructuralTagAsObjectOrString) {
  const std::string tag = R"({"structures":[{"begin":"<a>","schema":{"type":"integer"},"end":"</a>"}]})";
  const generation_request object = chat_with(R"("structured_outputs":{"structural_tag":)" + tag + "}");
  ASSERT_TRUE(object.constraint.has_value());
  EXPECT_EQ(object.constraint->kind, constraint_kind::structural_tag);
  EXPECT_EQ(boost::json::parse(object.constraint->text), boost::json::parse(tag));
  EXPECT_EQ(object.constraint_field, "structured_outputs.structural_tag");
  const generation_request text = completions_with(R"("structured_outputs":{"structural_tag":)" +
                                                   boost::json::serialize(boost::json::string(tag)) + "}");
  ASSERT_TRUE(text.constraint.has_value());
  EXPECT_EQ(text.constraint->text, tag);
  EXPECT_EQ(chat_rejection(R"("structured_outputs":{"structural_tag":7})"), "structured_outputs.structural_tag");
}

TEST(ConstraintFields, VllmStructuredOutputsAndGuidedFields) {
  const generation_request regex = chat_with(R"("structured_outputs":{"regex":"[a-z]+"})");
  ASSERT_TRUE(regex.constraint.has_value());
  EXPECT_EQ(regex.constraint->kind, constraint_kind::regex);
  EXPECT_EQ(regex.constraint->text, "[a-z]+");
  EXPECT_EQ(regex.constraint_field, "structured_outputs.regex");
  const generation_request choice = completions_with(R"("structured_outputs":{"choice":["yes","no"]})");
  EXPECT_EQ(choice.constraint->kind, constraint_kind::choice);
  EXPECT_EQ(boost::json::parse(choice.constraint->text), boost::json::parse(R"(["yes","no"])"));
  const generation_request json_text = chat_with(R"("structured_outputs":{"json":"{\"type\":\"string\"}"})");
  EXPECT_EQ(json_text.constraint->kind, constraint_kind::json_schema);
  EXPECT_EQ(json_text.constraint->text, R"({"type":"string"})");
  EXPECT_EQ(chat_with(R"("structured_outputs":{"grammar":"root ::= \"a\""})").constraint->kind,
            constraint_kind::grammar);
  EXPECT_EQ(chat_with(R"("structured_outputs":{"json_object":true})").constraint->kind, constraint_kind::json_object);
  EXPECT_EQ(chat_with(R"("guided_json":{"type":"number"})").constraint->kind, constraint_kind::json_schema);
  EXPECT_EQ(chat_with(R"("guided_regex":"\\d+")").constraint->text, "\\d+");
  EXPECT_EQ(completions_with(R"("guided_choice":["a"])").constraint->kind, constraint_kind::choice);
  const generation_request grammar = completions_with(R"("guided_grammar":"root ::= \"b\"")");
  EXPECT_EQ(grammar.constraint->kind, constraint_kind::grammar);
  EXPECT_EQ(grammar.constraint_field, "guided_grammar");
}

TEST(ConstraintFields, BadOrSeveralConstraintsNameTheField) {
  EXPECT_EQ(chat_rejection(R"("response_format":{"type":"json_schema"})"), "response_format.json_schema");
  EXPECT_EQ(chat_rejection(R"("response_format":{"type":"json_schema","json_schema":{"name":"x"}})"),
            "response_format.json_schema.schema");
  EXPECT_EQ(chat_rejection(R"("response_format":{"type":"json_schema","json_schema":{"schema":{},"extra":1}})"),
            "response_format.json_schema.extra");
  EXPECT_EQ(chat_rejection(R"("response_format":{"type":"yaml"})"), "response_format.type");
  EXPECT_EQ(chat_rejection(R"("structured_outputs":{"choice":[]})"), "structured_outputs.choice");
  EXPECT_EQ(chat_rejection(R"("structured_outputs":{"choice":["a",3]})"), "structured_outputs.choice[1]");
  EXPECT_EQ(chat_rejection(R"("structured_outputs":{"regex":5})"), "structured_outputs.regex");
  EXPECT_EQ(chat_rejection(R"("structured_outputs":{"whitespace":"x"})"), "structured_outputs.whitespace");
  EXPECT_EQ(chat_rejection(R"("structured_outputs":{"json_object":false})"), "structured_outputs.json_object");
  EXPECT_EQ(chat_rejection(R"("guided_json":7)"), "guided_json");
  EXPECT_EQ(chat_rejection(R"("response_format":{"type":"json_object"},"guided_regex":"a")"), "guided_regex");
  EXPECT_EQ(chat_rejection(R"("structured_outputs":{"regex":"a","choice":["a"]})"), "structured_outputs.choice");
}

TEST(ConstraintFields, WebSocketGenerateTakesTheSameFields) {
  const ws_client_message message = parse_ws_message(
      R"({"type":"generate","id":1,"endpoint":"completions","prompt":"x","structured_outputs":{"regex":"a|b"}})",
      request_limits{}, small_model());
  ASSERT_TRUE(message.generation.prompts[0].constraint.has_value());
  EXPECT_EQ(message.generation.prompts[0].constraint->kind, constraint_kind::regex);
  EXPECT_THROW(parse_ws_message(R"({"type":"generate","id":2,"endpoint":"chat","messages":[{"role":"user",
                   "content":"x"}],"response_format":{"type":"json_object"},"guided_choice":["a"]})",
                                request_limits{}, small_model()),
               ws_message_error);
}

}  // namespace
}  // namespace troupe::api

// Tool calling through the API: tool_choice validation, tool calls parsed
// out of chat output into OpenAI's message and delta shapes (HTTP, SSE and
// WebSocket), parallel_tool_calls, and malformed calls left as content.

#include <boost/json/serialize.hpp>
#include <map>
#include <regex>
#include <set>

#include "api/http/api_error.hpp"
#include "api/http/json_fields.hpp"
#include "api/http/openai_request.hpp"
#include "server_fixture.hpp"

namespace troupe::testing {
namespace {

model_info model_with_parser(const std::string& parser) {
  model_info model;
  model.served_model_name = "m";
  model.vocab_size = 1000;
  model.max_model_len = 2048;
  model.tool_call_parser = parser;
  return model;
}

const std::string messages = R"("messages":[{"role":"user","content":"x"}])";
const std::string two_tools = R"("tools":[{"type":"function","function":{"name":"get_weather","parameters":
    {"type":"object","properties":{"city":{"type":"string"}}}}},{"type":"function","function":{"name":"get_time"}}])";

api::parsed_generation parse(const std::string& fields, const std::string& parser = "hermes") {
  return api::parse_chat_request(api::parse_json_object("{" + messages + "," + fields + "}"), api::request_limits{},
                                 model_with_parser(parser));
}

TEST(ToolChoice, EveryFormIsReadWithTheModelsFormat) {
  const api::parsed_generation automatic = parse(two_tools);
  EXPECT_EQ(automatic.tools.family, tool_call_family::hermes);
  EXPECT_EQ(automatic.tools.choice.kind, tool_choice::mode::automatic);
  EXPECT_TRUE(automatic.tools.parallel);
  EXPECT_EQ(boost::json::parse(automatic.prompts[0].chat_tools_json).as_array().size(), 2u);

  const api::parsed_generation required = parse(two_tools + R"(,"tool_choice":"required","parallel_tool_calls":false)");
  EXPECT_EQ(required.tools.choice.kind, tool_choice::mode::required);
  EXPECT_FALSE(required.tools.parallel);

  const api::parsed_generation named =
      parse(two_tools + R"(,"tool_choice":{"type":"function","function":{"name":"get_time"}})");
  EXPECT_EQ(named.tools.choice.kind, tool_choice::mode::named);
  EXPECT_EQ(named.tools.choice.function, "get_time");

  const api::parsed_generation none = parse(two_tools + R"(,"tool_choice":"none")");
  EXPECT_EQ(none.tools.family, tool_call_family::none);  // nothing parsed, tools not rendered
  EXPECT_TRUE(none.prompts[0].chat_tools_json.empty());

  EXPECT_EQ(parse(R"("tool_choice":"auto")").tools.family, tool_call_family::none);  // no tools: nothing to parse
  EXPECT_EQ(parse(two_tools, "none").tools.family, tool_call_family::none);
}

TEST(ToolChoice, RejectionsNameTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("tool_choice":"sometimes")", "tool_choice"},
      {R"("tool_choice":3)", "tool_choice"},
      {R"("tool_choice":"required")", "tool_choice"},  // no tools
      {two_tools + R"(,"tool_choice":{"type":"function","function":{"name":"get_stock"}})",
       "tool_choice.function.name"},
      {two_tools + R"(,"tool_choice":{"type":"function"})", "tool_choice.function"},
      {two_tools + R"(,"tool_choice":{"type":"tool","function":{"name":"get_time"}})", "tool_choice.type"},
      {two_tools + R"(,"tool_choice":{"type":"function","function":{"name":"get_time","x":1}})",
       "tool_choice.function.x"},
      {two_tools + R"(,"tool_choice":{"type":"function","function":{"name":7}})", "tool_choice.function.name"},
      {two_tools + R"(,"parallel_tool_calls":"yes")", "parallel_tool_calls"},
  };
  for (const auto& [fields, param] : cases) {
    try {
      parse(fields);
      ADD_FAILURE() << "accepted " << fields;
    } catch (const api::api_error& error) {
      EXPECT_EQ(error.status, 400) << fields;
      EXPECT_EQ(error.param, param) << fields << " → " << error.what();
    }
  }
  try {
    parse(two_tools + R"(,"tool_choice":"required")", "none");
    ADD_FAILURE() << "required accepted without a tool-call format";
  } catch (const api::api_error& error) {
    EXPECT_EQ(error.param, "tool_choice");
    EXPECT_NE(std::string(error.what()).find("tool_call_parser"), std::string::npos) << error.what();
  }
}

TEST(ToolChoice, RequiredAndNamedBecomeTheForcedCallConstraint) {
  EXPECT_FALSE(parse(two_tools).prompts[0].constraint);  // auto: the model decides, nothing forced
  const generation_request required = parse(two_tools + R"(,"tool_choice":"required")").prompts[0];
  ASSERT_TRUE(required.constraint);
  EXPECT_EQ(required.constraint->kind, constraints::constraint_kind::structural_tag);
  EXPECT_EQ(required.constraint_field, "tool_choice");
  const boost::json::value tag = boost::json::parse(required.constraint->text);
  EXPECT_EQ(tag.at("structures").as_array().size(), 2u);  // either tool
  EXPECT_EQ(tag.at("structures").at(0).at("begin"), "<tool_call>\n");
  EXPECT_EQ(tag.at("separator"), "\n");

  const generation_request named =
      parse(two_tools + R"(,"tool_choice":{"type":"function","function":{"name":"get_time"}},)" +
                R"("parallel_tool_calls":false)",
            "llama3_json")
          .prompts[0];
  ASSERT_TRUE(named.constraint);
  const boost::json::value one = boost::json::parse(named.constraint->text);
  ASSERT_EQ(one.at("structures").as_array().size(), 1u);
  EXPECT_EQ(one.at("structures").at(0).at("schema").at("properties").at("name").at("const"), "get_time");
  EXPECT_FALSE(one.as_object().contains("separator"));  // one call only

  for (const std::string other : {R"("response_format":{"type":"json_object"})",
                                  R"("structured_outputs":{"regex":"a+"})", R"("guided_choice":["a"])"}) {
    try {
      parse(two_tools + R"(,"tool_choice":"required",)" + other);
      ADD_FAILURE() << "accepted " << other;
    } catch (const api::api_error& error) {
      EXPECT_EQ(error.param, "tool_choice") << other;
      EXPECT_EQ(error.code, "conflicting_fields") << other;
    }
  }
  EXPECT_TRUE(parse(two_tools + R"(,"response_format":{"type":"json_object"})").prompts[0].constraint);  // auto
}

using ToolCallServer = server_fixture;

std::string chat_body(const std::string& keyword, const std::string& extra = {}) {
  return R"({"messages":[{"role":"user","content":")" + keyword + "\"}]," + two_tools + extra + "}";
}

const std::regex call_id_pattern("call_[0-9a-f]{24}");

TEST_F(ToolCallServer, CompleteResponseCarriesToolCalls) {
  const http_response response = post("/v1/chat/completions", chat_body("tool-calls"));
  ASSERT_EQ(response.status, 200) << response.body;
  const boost::json::value choice = boost::json::parse(response.body).at("choices").at(0);
  EXPECT_EQ(choice.at("finish_reason"), "tool_calls");
  const boost::json::object& message = choice.at("message").as_object();
  EXPECT_EQ(message.at("content"), "Checking.\n");
  const boost::json::array& calls = message.at("tool_calls").as_array();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].at("type"), "function");
  EXPECT_EQ(calls[0].at("function").at("name"), "get_weather");
  EXPECT_EQ(calls[0].at("function").at("arguments"), R"({"city": "Paris"})");
  EXPECT_EQ(calls[1].at("function").at("name"), "get_time");
  EXPECT_EQ(calls[1].at("function").at("arguments"), R"({"zone": "CET"})");
  const std::string id0(calls[0].at("id").as_string()), id1(calls[1].at("id").as_string());
  EXPECT_TRUE(std::regex_match(id0, call_id_pattern)) << id0;
  EXPECT_NE(id0, id1);
}

TEST_F(ToolCallServer, OnlyACallLeavesContentNullAndParallelFalseKeepsTheFirst) {
  const http_response only = post("/v1/chat/completions", chat_body("tool-call-only"));
  ASSERT_EQ(only.status, 200) << only.body;
  const boost::json::value message = boost::json::parse(only.body).at("choices").at(0).at("message");
  EXPECT_TRUE(message.at("content").is_null());
  EXPECT_EQ(message.at("tool_calls").as_array().size(), 1u);

  const http_response first = post("/v1/chat/completions", chat_body("tool-calls", R"(,"parallel_tool_calls":false)"));
  const boost::json::value calls = boost::json::parse(first.body).at("choices").at(0).at("message").at("tool_calls");
  ASSERT_EQ(calls.as_array().size(), 1u);
  EXPECT_EQ(calls.at(0).at("function").at("name"), "get_weather");
}

TEST_F(ToolCallServer, MalformedCallAndToolChoiceNoneStayContent) {
  const http_response broken = post("/v1/chat/completions", chat_body("tool-call-broken"));
  const boost::json::value choice = boost::json::parse(broken.body).at("choices").at(0);
  EXPECT_EQ(choice.at("finish_reason"), "stop");
  EXPECT_FALSE(choice.at("message").as_object().contains("tool_calls"));
  EXPECT_NE(std::string(choice.at("message").at("content").as_string()).find("<tool_call>"), std::string::npos);

  const http_response none = post("/v1/chat/completions", chat_body("tool-call-only", R"(,"tool_choice":"none")"));
  const boost::json::value unparsed = boost::json::parse(none.body).at("choices").at(0);
  EXPECT_EQ(unparsed.at("finish_reason"), "stop");
  EXPECT_TRUE(unparsed.at("message").at("content").as_string().starts_with("<tool_call>"));
}

/// Content and tool calls put together from a stream's chunks, as clients do.
struct streamed_choice {
  std::string content;
  std::map<std::int64_t, boost::json::object> calls;  ///< by call index: id, type, name, arguments
  std::string finish_reason;
};

streamed_choice accumulate(const std::vector<boost::json::value>& chunks) {
  streamed_choice out;
  for (const boost::json::value& chunk : chunks) {
    const boost::json::value& choice = chunk.at("choices").at(0);
    const boost::json::object& delta = choice.at("delta").as_object();
    if (const auto* content = delta.if_contains("content")) out.content += content->as_string();
    if (const auto* calls = delta.if_contains("tool_calls")) {
      for (const boost::json::value& call : calls->as_array()) {
        boost::json::object& entry = out.calls[call.at("index").as_int64()];
        if (const auto* id = call.as_object().if_contains("id")) {
          EXPECT_FALSE(entry.contains("id")) << "the id comes once, first";
          entry["id"] = *id;
          entry["type"] = call.at("type");
          entry["name"] = call.at("function").at("name");
          entry["arguments"] = "";
        }
        EXPECT_TRUE(entry.contains("id")) << "a call's first chunk carries its id";
        const std::string more(call.at("function").at("arguments").as_string());
        entry["arguments"] = std::string(entry["arguments"].as_string()) + more;
      }
    }
    if (!choice.at("finish_reason").is_null()) out.finish_reason = choice.at("finish_reason").as_string();
  }
  return out;
}

TEST_F(ToolCallServer, StreamedCallsArriveAsDeltaToolCalls) {
  const http_response response = post("/v1/chat/completions", chat_body("tool-calls", R"(,"stream":true)"));
  ASSERT_EQ(response.status, 200) << response.body;
  const std::vector<std::string> payloads = sse_payloads(response.body);
  ASSERT_EQ(payloads.back(), "[DONE]");
  std::vector<boost::json::value> chunks;
  for (std::size_t i = 0; i + 1 < payloads.size(); ++i) chunks.push_back(boost::json::parse(payloads[i]));
  const streamed_choice streamed = accumulate(chunks);
  EXPECT_EQ(streamed.content, "Checking.\n");
  EXPECT_EQ(streamed.finish_reason, "tool_calls");
  ASSERT_EQ(streamed.calls.size(), 2u);
  EXPECT_EQ(streamed.calls.at(0).at("name"), "get_weather");
  EXPECT_EQ(streamed.calls.at(0).at("arguments"), R"({"city": "Paris"})");
  EXPECT_EQ(streamed.calls.at(0).at("type"), "function");
  EXPECT_EQ(streamed.calls.at(1).at("name"), "get_time");
  EXPECT_EQ(streamed.calls.at(1).at("arguments"), R"({"zone": "CET"})");
  EXPECT_TRUE(std::regex_match(std::string(streamed.calls.at(1).at("id").as_string()), call_id_pattern));
  for (const std::string& payload : payloads) EXPECT_EQ(payload.find("<tool_call>"), std::string::npos) << payload;

  const http_response single =
      post("/v1/chat/completions", chat_body("tool-calls", R"(,"stream":true,"parallel_tool_calls":false)"));
  std::vector<boost::json::value> single_chunks;
  for (const std::string& payload : sse_payloads(single.body)) {
    if (payload != "[DONE]") single_chunks.push_back(boost::json::parse(payload));
  }
  EXPECT_EQ(accumulate(single_chunks).calls.size(), 1u);
}

TEST_F(ToolCallServer, WebSocketDeltasCarryToolCallsAndDoneSaysToolCalls) {
  socket_client client(port);
  ASSERT_EQ(client.websocket_handshake().status, 101);
  std::string frame = chat_body("tool-calls");
  frame.insert(1, R"("type":"generate","id":"w1","endpoint":"chat",)");
  ASSERT_TRUE(client.ws_send_text(frame));
  std::vector<boost::json::value> chunks;
  boost::json::value done;
  while (done.is_null()) {
    const boost::json::value message = boost::json::parse(client.ws_read().payload);
    if (message.at("type") == "delta") {
      chunks.push_back(message.at("chunk"));
    } else {
      done = message;
    }
  }
  EXPECT_EQ(done.at("type"), "done");
  EXPECT_EQ(done.at("finish_reason"), "tool_calls");
  const streamed_choice streamed = accumulate(chunks);
  ASSERT_EQ(streamed.calls.size(), 2u);
  EXPECT_EQ(streamed.calls.at(1).at("arguments"), R"({"zone": "CET"})");
  EXPECT_EQ(streamed.content, "Checking.\n");
}

}  // namespace
}  // namespace troupe::testing

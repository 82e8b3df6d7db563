// Request bodies → validated engine requests, and every rejection's status
// and `param`, following OpenAI's and vLLM's documented field semantics.

#include <gtest/gtest.h>
#include <cctype>
#include <cstdlib>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "api/http/api_error.hpp"
#include "api/http/json_fields.hpp"
#include "api/http/openai_request.hpp"
#include "api/http/ws_protocol.hpp"

namespace troupe::api {
namespace {

model_info test_model() {
  model_info model;
  model.served_model_name = "m";
  model.vocab_size = 1000;
  model.max_model_len = 2048;
  return model;
}

parsed_generation completions(const std::string& body) {
  return parse_completions_request(parse_json_object(body), request_limits{}, test_model());
}

parsed_generation chat(const std::string& body) {
  return parse_chat_request(parse_json_object(body), request_limits{}, test_model());
}

/// The api_error a parse raises (fails the test when none is raised).
template <typename Parse>
api_error error_of(Parse parse, const std::string& body) {
  try {
    parse(body);
  } catch (const api_error& error) {
    return error;
  }
  ADD_FAILURE() << "accepted: " << body;
  return api_error(0, "", "");
}

TEST(CompletionsRequest, StringPromptWithDefaults) {
  const parsed_generation parsed = completions(R"({"model":"m","prompt":"Hello"})");
  ASSERT_EQ(parsed.prompts.size(), 1u);
  const generation_request& request = parsed.prompts[0];
  EXPECT_EQ(request.kind, prompt_kind::text);
  EXPECT_EQ(request.prompt_text, "Hello");
  EXPECT_EQ(request.max_tokens, 16);  // OpenAI's default for completions
  EXPECT_EQ(request.n, 1);
  EXPECT_FLOAT_EQ(request.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(request.sampling.top_p, 1.0f);
  EXPECT_FALSE(request.sampling.logprobs);
  EXPECT_FALSE(request.seed.has_value());
  EXPECT_FALSE(parsed.stream);
  EXPECT_EQ(parsed.model, "m");
}

TEST(CompletionsRequest, EveryPromptFormBecomesEngineRequests) {
  EXPECT_EQ(completions(R"({"prompt":["a","b","c"]})").prompts.size(), 3u);
  const parsed_generation ids = completions(R"({"prompt":[1,2,3]})");
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_EQ(ids.prompts[0].kind, prompt_kind::token_ids);
  EXPECT_EQ(ids.prompts[0].prompt_token_ids, (std::vector<std::int32_t>{1, 2, 3}));
  const parsed_generation lists = completions(R"({"prompt":[[5],[6,7]]})");
  ASSERT_EQ(lists.prompts.size(), 2u);
  EXPECT_EQ(lists.prompts[1].prompt_token_ids, (std::vector<std::int32_t>{6, 7}));
}

TEST(CompletionsRequest, SamplingAndExtraFieldsReachTheEngineRequest) {
  const parsed_generation parsed = completions(R"({"prompt":"x","max_tokens":5,"temperature":0,"top_p":0.5,
      "n":3,"stop":["\n","END"],"presence_penalty":-1.5,"frequency_penalty":2,"logit_bias":{"42":-100,"7":3.5},
      "logprobs":2,"seed":-1,"user":"u1","top_k":-1,"min_p":0.1,"repetition_penalty":1.2,
      "ignore_eos":true,"min_tokens":2,"stop_token_ids":[9],"skip_special_tokens":false,"priority":-3,
      "deadline_ms":250.5,"stream":true,"stream_options":{"include_usage":true}})");
  const generation_request& r = parsed.prompts.at(0);
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.n, 3);
  EXPECT_EQ(parsed.n, 3);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, -1.5f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, 2.0f);
  ASSERT_EQ(r.sampling.logit_bias.size(), 2u);
  EXPECT_EQ(r.sampling.logit_bias[0], (std::pair<std::int32_t, float>{42, -100.0f}));
  EXPECT_TRUE(r.sampling.logprobs);
  EXPECT_EQ(r.sampling.top_logprobs, 2);
  EXPECT_EQ(r.seed, std::optional<std::uint64_t>(~std::uint64_t{0}));
  EXPECT_EQ(r.user, "u1");
  EXPECT_EQ(r.sampling.top_k, 0);  // -1 disables, as in vLLM
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.2f);
  EXPECT_TRUE(r.ignore_eos);
  EXPECT_EQ(r.min_tokens, 2);
  EXPECT_EQ(r.stop_token_ids, (std::vector<std::int32_t>{9}));
  EXPECT_FALSE(r.skip_special_tokens);
  EXPECT_EQ(r.priority, -3);
  EXPECT_DOUBLE_EQ(r.deadline_ms.value(), 250.5);
  EXPECT_TRUE(parsed.stream);
  EXPECT_TRUE(parsed.include_usage);
  EXPECT_FALSE(parsed.echo);
  EXPECT_TRUE(completions(R"({"prompt":"x","echo":true})").prompts[0].echo);
}

struct rejection {
  std::string body;
  int status;
  std::string param;
};

void PrintTo(const rejection& r, std::ostream* os) {
  *os << (r.body.size() > 80 ? r.body.substr(0, 80) + "..." : r.body);
}

class CompletionsRejection : public ::testing::TestWithParam<rejection> {};

TEST_P(CompletionsRejection, NamesTheField) {
  const api_error error = error_of(completions, GetParam().body);
  EXPECT_EQ(error.status, GetParam().status) << error.what();
  EXPECT_EQ(error.param, GetParam().param) << error.what();
  EXPECT_NE(std::string(error.what()), "");
}

std::string many_stops(int count) {
  std::string list = "[";
  for (int i = 0; i < count; ++i) list += (i ? ",\"s" : "\"s") + std::to_string(i) + "\"";
  return R"({"prompt":"x","stop":)" + list + "]}";
}

INSTANTIATE_TEST_SUITE_P(
    AbuseCases, CompletionsRejection,
    ::testing::Values(
        rejection{R"({"prompt":"x","n":100000})", 400, "n"}, rejection{R"({"prompt":"x","n":0})", 400, "n"},
        rejection{R"({"prompt":"x","n":"3"})", 400, "n"},
        rejection{R"({"prompt":"x","max_tokens":-1})", 400, "max_tokens"},
        rejection{R"({"prompt":"x","max_tokens":1000000000})", 400, "max_tokens"},
        rejection{R"({"prompt":"x","max_tokens":1.5})", 400, "max_tokens"},
        rejection{R"({"prompt":"x","temperature":2.5})", 400, "temperature"},
        rejection{R"({"prompt":"x","temperature":"hot"})", 400, "temperature"},
        rejection{R"({"prompt":"x","top_p":0})", 400, "top_p"},
        rejection{R"({"prompt":"x","stream":"yes"})", 400, "stream"},
        rejection{R"({"prompt":"x","stream_options":{"include_usage":true}})", 400, "stream_options"},
        rejection{many_stops(10000), 400, "stop"}, rejection{R"({"prompt":"x","stop":[""]})", 400, "stop[0]"},
        rejection{R"({"prompt":"x","stop":[1]})", 400, "stop[0]"},
        rejection{R"({"prompt":"x","logit_bias":{"abc":1}})", 400, "logit_bias.abc"},
        rejection{R"({"prompt":"x","logit_bias":{"5":101}})", 400, "logit_bias.5"},
        rejection{R"({"prompt":"x","logit_bias":{"1000":1}})", 400, "logit_bias.1000"},
        rejection{R"({"prompt":"x","logprobs":21})", 400, "logprobs"},
        rejection{R"({"prompt":"x","logprobs":1,"echo":true})", 400, "echo"},
        rejection{R"({"prompt":[1,2,1000]})", 400, "prompt[2]"},
        rejection{R"({"prompt":[[1],[-1]]})", 400, "prompt[1][0]"},
        rejection{R"({"prompt":[1,"a"]})", 400, "prompt[1]"}, rejection{R"({"prompt":""})", 400, "prompt"},
        rejection{R"({"prompt":[]})", 400, "prompt"}, rejection{R"({"prompt":["a",""]})", 400, "prompt[1]"},
        rejection{R"({"prompt":[[]]})", 400, "prompt[0]"}, rejection{R"({"max_tokens":3})", 400, "prompt"},
        rejection{R"({"prompt":{"text":"x"}})", 400, "prompt"},
        rejection{R"({"prompt":"x","model":"other"})", 404, "model"},
        rejection{R"({"prompt":"x","frobnicate":1})", 400, "frobnicate"},
        rejection{R"({"prompt":"x","min_tokens":17})", 400, "min_tokens"},
        rejection{R"({"prompt":"x","stop_token_ids":[5000]})", 400, "stop_token_ids[0]"},
        rejection{R"({"prompt":"x","suffix":"tail"})", 400, "suffix"},
        rejection{R"({"prompt":"x","best_of":2})", 400, "best_of"},
        rejection{R"({"prompt":"x","deadline_ms":0})", 400, "deadline_ms"},
        rejection{R"({"prompt":"x","seed":1e30})", 400, "seed"}),
    [](const ::testing::TestParamInfo<rejection>& info) {  // e.g. "7_prompt_1_0_"
      std::string name = std::to_string(info.index) + "_" + info.param.param;
      for (char& c : name) {
        if (std::isalnum(static_cast<unsigned char>(c)) == 0) c = '_';
      }
      return name;
    });

TEST(CompletionsRequest, LimitsAreTheEngineConfigsAdmissionLimits) {
  const engine_config defaults;
  EXPECT_EQ(request_limits{}.engine.max_n, defaults.max_n);
  engine_config config;
  config.max_n = 2;
  const request_limits limits = request_limits::from_engine_config(config);
  EXPECT_EQ(parse_completions_request(parse_json_object(R"({"prompt":"x","n":2})"), limits, test_model()).n, 2);
  const auto parse_limited = [&](const std::string& body) {
    parse_completions_request(parse_json_object(body), limits, test_model());
  };
  EXPECT_EQ(error_of(parse_limited, R"({"prompt":"x","n":3})").param, "n");
}

TEST(CompletionsRequest, OutputBudgetCountsEveryPromptAndChoice) {
  engine_config config;
  config.max_request_output_tokens = 65536;
  config.max_n = 64;
  const request_limits limits = request_limits::from_engine_config(config);
  const auto parse_limited = [&](const std::string& body) {
    return parse_completions_request(parse_json_object(body), limits, test_model());
  };
  std::string prompts = "[";
  for (int i = 0; i < 64; ++i) prompts += (i ? ",\"p\"" : "\"p\"");
  prompts += "]";
  // 64 prompts × 16 choices × 64 tokens = 65536: at the limit.
  EXPECT_EQ(parse_limited(R"({"n":16,"max_tokens":64,"prompt":)" + prompts + "}").prompts.size(), 64u);
  const api_error error =
      error_of(parse_limited, R"({"n":16,"max_tokens":65,"ignore_eos":true,"prompt":)" + prompts + "}");
  EXPECT_EQ(error.status, 400);
  EXPECT_EQ(error.param, "max_tokens");
  EXPECT_NE(std::string(error.what()).find("65536"), std::string::npos) << error.what();
  const auto parse_chat_limited = [&](const std::string& body) {
    return parse_chat_request(parse_json_object(body), limits, test_model());
  };
  // Chat's unset max_tokens counts as the context length (2048): 32 choices fit, 33 do not.
  const std::string messages = R"("messages":[{"role":"user","content":"hi"}])";
  EXPECT_EQ(parse_chat_limited(R"({"n":32,)" + messages + "}").n, 32);
  EXPECT_EQ(error_of(parse_chat_limited, R"({"n":33,)" + messages + "}").param, "max_tokens");
}

TEST(CompletionsRequest, TokenPromptLongerThanTheContextIs413) {
  std::string ids = "[";
  for (int i = 0; i < 2049; ++i) ids += (i ? ",1" : "1");
  const api_error error = error_of(completions, R"({"prompt":)" + ids + "]}");
  EXPECT_EQ(error.status, 413);
  EXPECT_EQ(error.code, "context_length_exceeded");
}

TEST(RequestBodyJson, MalformedJsonAndInvalidUtf8AreRejected) {
  for (const std::string& body : {std::string("{\"prompt\":"), std::string("[1,2]"), std::string("nul"),
                                  std::string("{\"prompt\":\"\xff\xfe\"}"), std::string("{\"prompt\":\"\xc0\xaf\"}")}) {
    try {
      parse_json_object(body);
      ADD_FAILURE() << "accepted " << body;
    } catch (const api_error& error) {
      EXPECT_EQ(error.status, 400);
      EXPECT_TRUE(error.code == "invalid_json" || error.code == "invalid_utf8") << error.code;
    }
  }
  std::string deep(100, '[');
  EXPECT_THROW(parse_json_object("{\"a\":" + deep + std::string(100, ']') + "}"), api_error);
}

// Deep nesting is refused at a fixed depth (64) before anything recurses
// over it: a megabyte of brackets is a 400, not a stack overflow, in a body,
// in a field a template or schema would walk, and on the WebSocket.
TEST(RequestBodyJson, DeeplyNestedJsonIsA400AtAFixedDepth) {
  const auto nested = [](std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  for (const std::string& body :
       {"{\"prompt\":" + nested(1 << 20) + "}",
        R"({"messages":[{"role":"user","content":"x"}],"tools":)" + nested(100) + "}",
        R"({"prompt":"x","response_format":{"type":"json_schema","json_schema":)" + nested(65) + "}}"}) {
    try {
      parse_json_object(body);
      ADD_FAILURE() << "accepted " << body.substr(0, 80);
    } catch (const api_error& error) {
      EXPECT_EQ(error.status, 400);
      EXPECT_EQ(error.code, "invalid_json");
    }
  }
  EXPECT_NO_THROW(parse_json_object("{\"a\":" + nested(60) + "}")) << "ordinary nesting is kept";
  EXPECT_THROW(parse_ws_message(R"({"type":"ping","data":)" + nested(1 << 20) + "}", request_limits{}, test_model()),
               ws_message_error);
}

TEST(RequestBodyJson, NumbersAreCorrectlyRounded) {
  // Boost.JSON's own parser reads this literal one ulp off; chat templates'
  // tojson would then print a number Python never would.
  const boost::json::object body = parse_json_object(R"({"t":0.11935319286735585,"n":[1e-7,2.5e300]})");
  EXPECT_EQ(body.at("t").as_double(), std::strtod("0.11935319286735585", nullptr));
  EXPECT_EQ(body.at("n").as_array().at(0).as_double(), 1e-7);
  EXPECT_EQ(body.at("n").as_array().at(1).as_double(), 2.5e300);
}

TEST(ChatRequest, MessagesAreNormalisedForTheTemplate) {
  const parsed_generation parsed = chat(R"({"model":"m","messages":[
      {"role":"system","content":"Be brief."},
      {"role":"user","content":[{"type":"text","text":"Hi"},{"type":"text","text":"there"}]},
      {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",
        "function":{"name":"f","arguments":"{}"}}]},
      {"role":"tool","content":"42","tool_call_id":"c1"}],
      "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],
      "logprobs":true,"top_logprobs":3,"max_completion_tokens":7,"max_tokens":99})");
  const generation_request& r = parsed.prompts.at(0);
  EXPECT_EQ(r.kind, prompt_kind::chat);
  const boost::json::array messages = boost::json::parse(r.chat_messages_json).as_array();
  ASSERT_EQ(messages.size(), 4u);
  EXPECT_EQ(messages[1].at("content").as_string(), "Hi\nthere");
  EXPECT_TRUE(messages[2].at("content").is_null());
  EXPECT_EQ(messages[2].at("tool_calls").as_array().size(), 1u);
  EXPECT_EQ(messages[3].at("tool_call_id").as_string(), "c1");
  EXPECT_EQ(boost::json::parse(r.chat_tools_json).as_array().size(), 1u);
  EXPECT_EQ(r.max_tokens, 7);  // max_completion_tokens wins over max_tokens
  EXPECT_TRUE(parsed.logprobs);
  EXPECT_EQ(parsed.top_logprobs, 3);
  EXPECT_EQ(chat(R"({"messages":[{"role":"user","content":"x"}]})").prompts[0].max_tokens, -1);
  EXPECT_TRUE(chat(R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function",
      "function":{"name":"f"}}],"tool_choice":"none"})")
                  .prompts[0]
                  .chat_tools_json.empty());
}

TEST(ChatRequest, RejectionsNameTheField) {
  const std::vector<rejection> cases = {
      {R"({"messages":[]})", 400, "messages"},
      {R"({"messages":"hi"})", 400, "messages"},
      {R"({"messages":[{"role":"robot","content":"x"}]})", 400, "messages[0].role"},
      {R"({"messages":[{"role":"user"}]})", 400, "messages[0].content"},
      {R"({"messages":[{"role":"user","content":5}]})", 400, "messages[0].content"},
      {R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})", 400,
       "messages[0].content[0].type"},
      {R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", 400, "top_logprobs"},
      {R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21})", 400, "top_logprobs"},
      {R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"required"})", 400, "tool_choice"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]})", 400, "tools[0].function"},
      {R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"xml"}})", 400, "response_format.type"},
      {R"({"messages":[{"role":"user","content":"x"}],"echo":true})", 400, "echo"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":0})", 400, "max_completion_tokens"},
  };
  for (const rejection& rejected : cases) {
    const api_error error = error_of(chat, rejected.body);
    EXPECT_EQ(error.status, rejected.status) << rejected.body;
    EXPECT_EQ(error.param, rejected.param) << rejected.body << " → " << error.what();
  }
}

TEST(WebSocketMessage, GenerateCancelPingAndErrorsCarryTheId) {
  const ws_client_message generate = parse_ws_message(
      R"({"type":"generate","id":"a1","endpoint":"chat","messages":[{"role":"user","content":"x"}],
          "max_tokens":4,"stream":false})",
      request_limits{}, test_model());
  EXPECT_EQ(generate.type, ws_client_message::kind::generate);
  EXPECT_EQ(generate.id_key, "\"a1\"");
  EXPECT_TRUE(generate.generation.stream);  // a socket always streams
  EXPECT_EQ(generate.generation.endpoint, endpoint_kind::chat);
  EXPECT_EQ(generate.generation.prompts.at(0).max_tokens, 4);

  const ws_client_message cancel = parse_ws_message(R"({"type":"cancel","id":7})", request_limits{}, test_model());
  EXPECT_EQ(cancel.type, ws_client_message::kind::cancel);
  EXPECT_EQ(cancel.id_key, "7");
  EXPECT_EQ(parse_ws_message(R"({"type":"ping","data":{"t":1}})", request_limits{}, test_model()).ping_data,
            boost::json::parse(R"({"t":1})"));

  try {
    parse_ws_message(R"({"type":"generate","id":"b","endpoint":"completions","prompt":"x","n":0})", request_limits{},
                     test_model());
    ADD_FAILURE();
  } catch (const ws_message_error& error) {
    EXPECT_EQ(error.id, boost::json::value("b"));
    EXPECT_EQ(error.param, "n");
  }
  for (const char* bad :
       {R"({"type":"dance","id":"c"})", R"({"type":"generate","endpoint":"chat"})",
        R"({"type":"generate","id":"d","endpoint":"images"})", R"({"type":"cancel","id":[1]})", "not json"}) {
    EXPECT_THROW(parse_ws_message(bad, request_limits{}, test_model()), ws_message_error) << bad;
  }
}

}  // namespace
}  // namespace troupe::api

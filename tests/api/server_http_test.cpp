// The server over real loopback sockets: endpoints, keep-alive, request ids,
// authentication, health, metrics, tokenize.

#include <boost/json/serialize.hpp>

#include "server_fixture.hpp"

namespace troupe::testing {
namespace {

using HttpServer = server_fixture;

TEST_F(HttpServer, CompletionAggregatesChoicesFromSeveralPrompts) {
  const http_response response =
      post("/v1/completions", R"({"model":"fake-model","prompt":["a","b"],"n":2,"max_tokens":3})");
  ASSERT_EQ(response.status, 200) << response.body;
  EXPECT_EQ(response.headers.at("content-type"), "application/json");
  const boost::json::value body = boost::json::parse(response.body);
  EXPECT_EQ(body.at("object").as_string(), "text_completion");
  EXPECT_EQ(std::string(body.at("id").as_string()).rfind("cmpl-", 0), 0u);
  EXPECT_EQ(body.at("model").as_string(), "fake-model");
  const boost::json::array& choices = body.at("choices").as_array();
  ASSERT_EQ(choices.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(choices[i].at("index").as_int64(), static_cast<std::int64_t>(i));
    const std::string c = std::to_string(i % 2);
    EXPECT_EQ(choices[i].at("text").as_string(), " c" + c + "t0 c" + c + "t1 c" + c + "t2");
    EXPECT_EQ(choices[i].at("finish_reason").as_string(), "length");
  }
  EXPECT_EQ(body.at("usage").at("prompt_tokens").as_int64(), 2);
  EXPECT_EQ(body.at("usage").at("completion_tokens").as_int64(), 12);
  EXPECT_EQ(body.at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64(), 4);
  ASSERT_EQ(engine.submitted().size(), 2u);
  EXPECT_EQ(engine.submitted()[0].max_tokens, 3);
}

TEST_F(HttpServer, ChatWithLogprobsHasTheChatShape) {
  const http_response response = post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}],
      "max_tokens":2,"logprobs":true,"top_logprobs":2})");
  ASSERT_EQ(response.status, 200) << response.body;
  const boost::json::value body = boost::json::parse(response.body);
  EXPECT_EQ(body.at("object").as_string(), "chat.completion");
  const auto& choice = body.at("choices").at(0);
  EXPECT_EQ(choice.at("message").at("content").as_string(), " t0 t1");
  const auto& content = choice.at("logprobs").at("content").as_array();
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[1].at("token").as_string(), " t1");
  EXPECT_DOUBLE_EQ(content[1].at("logprob").as_double(), -0.5);
  EXPECT_EQ(content[1].at("top_logprobs").as_array().size(), 2u);
  EXPECT_EQ(engine.submitted().at(0).kind, prompt_kind::chat);
}

TEST_F(HttpServer, KeepAliveServesSeveralRequestsOnOneConnection) {
  socket_client client(port);
  const std::string body = R"({"prompt":"x","max_tokens":1})";
  for (int i = 0; i < 3; ++i) {
    client.send_all("POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: " + std::to_string(body.size()) +
                    "\r\n\r\n" + body);
    EXPECT_EQ(client.read_response().status, 200);
  }
  const std::string stream = R"({"prompt":"x","max_tokens":2,"stream":true})";
  client.send_all("POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: " + std::to_string(stream.size()) +
                  "\r\n\r\n" + stream);
  const http_response streamed = client.read_response();  // an SSE response ends with its last chunk
  EXPECT_TRUE(streamed.chunked);
  EXPECT_EQ(sse_payloads(streamed.body).back(), "[DONE]");
  client.send_all("GET /version HTTP/1.1\r\nHost: h\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: h\r\n\r\n");  // pipelined
  EXPECT_EQ(client.read_response().status, 200);
  const http_response models = client.read_response();
  EXPECT_EQ(boost::json::parse(models.body).at("data").at(0).at("id").as_string(), "fake-model");
}

TEST_F(HttpServer, ExpectContinueIsAnsweredBeforeTheBody) {
  socket_client client(port);
  const std::string body = R"({"prompt":"x","max_tokens":1})";
  client.send_all("POST /v1/completions HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: " +
                  std::to_string(body.size()) + "\r\n\r\n");
  EXPECT_EQ(client.read_response().status, 100);
  client.send_all(body);
  EXPECT_EQ(client.read_response().status, 200);
}

TEST_F(HttpServer, RequestIdIsEchoedOrGenerated) {
  EXPECT_EQ(get("/version", "X-Request-Id: abc-123\r\n").headers.at("x-request-id"), "abc-123");
  const std::string generated = get("/version").headers.at("x-request-id");
  EXPECT_EQ(generated.size(), 32u);
  EXPECT_NE(get("/version", "X-Request-Id: bad id with spaces\r\n").headers.at("x-request-id"), "bad id with spaces");
  EXPECT_EQ(post("/v1/completions", "{", "X-Request-Id: e1\r\n").headers.at("x-request-id"), "e1");
}

TEST_F(HttpServer, UnknownRoutesAndMethods) {
  const http_response missing = get("/v2/nothing");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(error_of(missing).at("code").as_string(), "not_found");
  const http_response wrong_method = get("/v1/completions");
  EXPECT_EQ(wrong_method.status, 405);
  EXPECT_EQ(wrong_method.headers.at("allow"), "POST");
  EXPECT_EQ(get("/v1/ws").status, 426);
}

TEST_F(HttpServer, ApiKeyGuardsTheV1Routes) {
  api::server_config config = test_server_config();
  config.api_key = "sekrit";
  start(config);
  const http_response missing = post("/v1/completions", R"({"prompt":"x"})");
  EXPECT_EQ(missing.status, 401);
  EXPECT_EQ(error_of(missing).at("code").as_string(), "invalid_api_key");
  EXPECT_EQ(post("/v1/completions", R"({"prompt":"x"})", "Authorization: Bearer wrong\r\n").status, 401);
  EXPECT_EQ(post("/v1/completions", R"({"prompt":"x"})", "Authorization: Bearer sekrit\r\n").status, 200);
  EXPECT_EQ(get("/v1/models").status, 401);
  EXPECT_EQ(get("/health").status, 200);  // probes stay open
  EXPECT_TRUE(engine.submitted().size() == 1u);
}

TEST_F(HttpServer, HealthFollowsTheEngine) {
  EXPECT_EQ(get("/health").status, 200);
  EXPECT_EQ(get("/ready").status, 200);
  engine.set_healthy(false, "executor 0 stuck for 3 s");
  const http_response sick = get("/health");
  EXPECT_EQ(sick.status, 503);
  EXPECT_NE(std::string(error_of(sick).at("message").as_string()).find("executor 0 stuck"), std::string::npos);
  EXPECT_EQ(get("/ready").status, 503);
  engine.set_healthy(true);
  EXPECT_EQ(get("/health").status, 200);
}

TEST_F(HttpServer, MetricsExposeEngineStats) {
  engine.set_kv_usage(0.5);
  const http_response response = get("/metrics");
  ASSERT_EQ(response.status, 200);
  EXPECT_EQ(response.headers.at("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(response.body.find("\ntroupe:kv_cache_usage_perc{model_name=\"fake-model\"} 0.5\n"), std::string::npos);
  EXPECT_NE(response.body.find("troupe:num_preemptions_total{model_name=\"fake-model\",kind=\"swap\"} 3\n"),
            std::string::npos);
  EXPECT_NE(response.body.find("troupe:time_to_first_token_seconds_bucket{model_name=\"fake-model\",le=\"+Inf\"} 5"),
            std::string::npos);
}

TEST_F(HttpServer, TokenizeAndDetokenizeUseVllmShapes) {
  const http_response tokens = post("/tokenize", R"({"prompt":"AB"})");
  ASSERT_EQ(tokens.status, 200) << tokens.body;
  const boost::json::value body = boost::json::parse(tokens.body);
  EXPECT_EQ(boost::json::serialize(body.at("tokens")), "[1,68,69]");  // BOS, then 'A' + 3, 'B' + 3
  EXPECT_EQ(body.at("count").as_int64(), 3);
  EXPECT_EQ(body.at("max_model_len").as_int64(), 4096);
  const http_response chat = post("/tokenize", R"({"messages":[{"role":"user","content":"x"}]})");
  EXPECT_EQ(boost::json::parse(chat.body).at("count").as_int64(), 25);  // "<user>x</user><assistant>", no BOS
  const http_response text = post("/detokenize", R"({"tokens":[68,69]})");
  EXPECT_EQ(boost::json::parse(text.body).at("prompt").as_string(), "AB");
  const http_response bad = post("/detokenize", R"({"tokens":[5000]})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(error_of(bad).at("param").as_string(), "tokens[0]");
}

TEST_F(HttpServer, EngineOverloadAndShutdownMapToRetryableStatuses) {
  const http_response overloaded = post("/v1/completions", R"({"prompt":"overloaded"})");
  EXPECT_EQ(overloaded.status, 429);
  EXPECT_EQ(overloaded.headers.at("retry-after"), "1");
  EXPECT_EQ(error_of(overloaded).at("code").as_string(), "overloaded");
  const http_response too_long = post("/v1/completions", R"({"prompt":"too-long"})");
  EXPECT_EQ(too_long.status, 413);
  const http_response failed = post("/v1/completions", R"({"prompt":"fail-midway","max_tokens":5})");
  EXPECT_EQ(failed.status, 500);
  EXPECT_EQ(error_of(failed).at("type").as_string(), "server_error");
}

TEST_F(HttpServer, DrainingRefusesNewGenerationsAndReportsNotReady) {
  socket_client kept(port);  // an open keep-alive connection survives stop_accepting
  ASSERT_TRUE(fake_engine::eventually([&] { return server->active_connections() == 1; }));
  server->stop_accepting();
  const std::string body = R"({"prompt":"x"})";
  kept.send_all("POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: " + std::to_string(body.size()) +
                "\r\n\r\n" + body);
  const http_response refused = kept.read_response();
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.headers.at("retry-after"), "5");
  EXPECT_EQ(refused.headers.at("connection"), "close");
  EXPECT_TRUE(server->wait_idle(std::chrono::seconds(5)));
}

}  // namespace
}  // namespace troupe::testing

// SSE over real sockets: framing, cancel on disconnect, a client that never
// reads its stream.

#include <map>
#include <set>
#include <thread>

#include "server_fixture.hpp"

namespace troupe::testing {
namespace {

using SseStream = server_fixture;

TEST_F(SseStream, ChatStreamIsOpenAISseFraming) {
  const http_response response = post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}],
      "max_tokens":3,"n":2,"stream":true,"stream_options":{"include_usage":true}})");
  ASSERT_EQ(response.status, 200) << response.body;
  EXPECT_EQ(response.headers.at("content-type"), "text/event-stream");
  EXPECT_EQ(response.headers.at("cache-control"), "no-cache");
  EXPECT_TRUE(response.chunked);
  const std::vector<std::string> payloads = sse_payloads(response.body);
  ASSERT_GE(payloads.size(), 4u);
  EXPECT_EQ(payloads.back(), "[DONE]");
  std::map<std::int64_t, std::string> text;
  std::map<std::int64_t, std::string> finish;
  std::set<std::int64_t> role_seen;
  const boost::json::value usage_chunk = boost::json::parse(payloads[payloads.size() - 2]);
  std::string id;
  for (std::size_t i = 0; i + 2 < payloads.size(); ++i) {
    const boost::json::value chunk = boost::json::parse(payloads[i]);
    EXPECT_EQ(chunk.at("object").as_string(), "chat.completion.chunk");
    if (id.empty()) id = chunk.at("id").as_string();
    EXPECT_EQ(chunk.at("id").as_string(), id);  // one id for the whole stream
    EXPECT_TRUE(chunk.at("usage").is_null());
    const auto& choice = chunk.at("choices").at(0);
    const std::int64_t index = choice.at("index").as_int64();
    const auto& delta = choice.at("delta").as_object();
    if (delta.contains("role")) {
      EXPECT_TRUE(text[index].empty() && !role_seen.count(index)) << "role must come first, once";
      role_seen.insert(index);
    }
    if (delta.contains("content")) text[index] += delta.at("content").as_string();
    if (!choice.at("finish_reason").is_null()) finish[index] = choice.at("finish_reason").as_string();
  }
  EXPECT_EQ(role_seen, (std::set<std::int64_t>{0, 1}));
  EXPECT_EQ(text[0], " c0t0 c0t1 c0t2");
  EXPECT_EQ(text[1], " c1t0 c1t1 c1t2");
  EXPECT_EQ(finish, (std::map<std::int64_t, std::string>{{0, "length"}, {1, "length"}}));
  EXPECT_TRUE(usage_chunk.at("choices").as_array().empty());
  EXPECT_EQ(usage_chunk.at("usage").at("completion_tokens").as_int64(), 6);
}

TEST_F(SseStream, CompletionStreamWithEchoAndStopReason) {
  const http_response response =
      post("/v1/completions", R"({"prompt":"Say stop-early","stream":true,"echo":true,"max_tokens":9})");
  ASSERT_EQ(response.status, 200);
  const std::vector<std::string> payloads = sse_payloads(response.body);
  std::string text;
  std::string finish, stop_reason;
  for (std::size_t i = 0; i + 1 < payloads.size(); ++i) {
    const boost::json::value choice = boost::json::parse(payloads[i]).at("choices").at(0);
    text += choice.at("text").as_string();
    if (!choice.at("finish_reason").is_null()) {
      finish = choice.at("finish_reason").as_string();
      stop_reason = choice.at("stop_reason").as_string();
    }
  }
  EXPECT_EQ(text, "Say stop-early t0 t1");
  EXPECT_EQ(finish, "stop");
  EXPECT_EQ(stop_reason, "\n");
  EXPECT_EQ(payloads.back(), "[DONE]");
}

TEST_F(SseStream, MidStreamFailureIsAnSseErrorEvent) {
  const http_response response = post("/v1/completions", R"({"prompt":"fail-midway","stream":true,"max_tokens":5})");
  ASSERT_EQ(response.status, 200);
  const std::vector<std::string> payloads = sse_payloads(response.body);
  ASSERT_GE(payloads.size(), 2u);
  EXPECT_EQ(payloads.back(), "[DONE]");
  const boost::json::value error = boost::json::parse(payloads[payloads.size() - 2]);
  EXPECT_EQ(error.at("error").at("type").as_string(), "server_error");
}

TEST_F(SseStream, PartialUtf8IsHeldBackNotBroken) {
  const http_response response = post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"utf8-split"}],
      "stream":true,"logprobs":true})");
  std::string content;
  for (const std::string& payload : sse_payloads(response.body)) {
    if (payload == "[DONE]") break;
    const boost::json::value delta = boost::json::parse(payload).at("choices").at(0).at("delta");
    if (delta.as_object().contains("content")) content += delta.at("content").as_string();
  }
  EXPECT_EQ(content, "\xE2\x82\xAC");
}

TEST_F(SseStream, DisconnectCancelsAStreamingRequest) {
  {
    socket_client client(port);
    client.send_all(post_request("/v1/completions", R"({"prompt":"endless","stream":true})"));
    ASSERT_TRUE(fake_engine::eventually([&] { return engine.running() == 1; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let some tokens flow
  }                                                              // the client vanishes mid-stream
  ASSERT_TRUE(fake_engine::eventually([&] { return engine.cancelled().size() == 1; }));
  EXPECT_EQ(engine.cancelled()[0], engine.submitted()[0].request_id);
  EXPECT_TRUE(fake_engine::eventually([&] { return engine.running() == 0; }));
  expect_still_serving();
}

TEST_F(SseStream, DisconnectCancelsAWaitingNonStreamingRequest) {
  {
    socket_client client(port);
    client.send_all(post_request("/v1/chat/completions", R"({"messages":[{"role":"user","content":"endless"}]})"));
    ASSERT_TRUE(fake_engine::eventually([&] { return engine.running() == 1; }));
  }
  ASSERT_TRUE(fake_engine::eventually([&] { return engine.cancelled().size() == 1; }));
  EXPECT_TRUE(fake_engine::eventually([&] { return engine.running() == 0 && server->active_requests() == 0; }));
}

// Issue 15, defect 7: a byte pipelined behind the request used to end the
// watch (it only looked for "nothing readable"), so the close went unnoticed.
TEST_F(SseStream, DisconnectCancelsANonStreamingRequestWithPipelinedBytes) {
  {
    socket_client client(port);
    client.send_all(post_request("/v1/completions", R"({"prompt":"endless"})"));
    ASSERT_TRUE(fake_engine::eventually([&] { return engine.running() == 1; }));
    client.send_all("G");                                        // the start of a pipelined next request
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the server see it before the close
  }
  ASSERT_TRUE(fake_engine::eventually([&] { return engine.cancelled().size() == 1; }));
  EXPECT_TRUE(fake_engine::eventually([&] { return engine.running() == 0 && server->active_requests() == 0; }));
  expect_still_serving();
}

TEST_F(SseStream, APipelinedRequestIsServedAfterANonStreamingOne) {
  socket_client client(port);
  client.send_all(post_request("/v1/completions", R"({"prompt":"slow","max_tokens":50})"));  // 0.5 s
  ASSERT_TRUE(fake_engine::eventually([&] { return engine.running() == 1; }));
  client.send_all("GET /version HTTP/1.1\r\nHost: h\r\n\r\n");  // arrives while the first one runs
  const http_response completion = client.read_response();
  EXPECT_EQ(completion.status, 200) << completion.body;
  EXPECT_NE(completion.body.find("\"finish_reason\":\"length\""), std::string::npos) << completion.body;
  EXPECT_EQ(client.read_response().status, 200);
  EXPECT_TRUE(engine.cancelled().empty());
}

TEST_F(SseStream, AClientThatNeverReadsIsCutOffWithoutStallingOthers) {
  socket_client stalled(port);
  stalled.send_all(post_request("/v1/completions", R"({"prompt":"flood","stream":true})"));
  ASSERT_TRUE(fake_engine::eventually([&] { return engine.running() == 1; }));
  // While the stalled stream backs up, other clients are served.
  for (int i = 0; i < 3; ++i) expect_still_serving();
  ASSERT_TRUE(fake_engine::eventually([&] { return !engine.cancelled().empty(); }, std::chrono::seconds(20)));
  EXPECT_EQ(engine.cancelled()[0], engine.submitted()[0].request_id);
  EXPECT_TRUE(stalled.wait_closed(std::chrono::seconds(10)));
  expect_still_serving();
}

}  // namespace
}  // namespace troupe::testing

// /tokenize and /detokenize off the route workers (issue 15, defect 10),
// cancelled in the engine when their client leaves first, the connection
// each engine request carries (its origin), and the codes of the prepare
// queue's refusals over HTTP and WebSocket.

#include <boost/json/serialize.hpp>
#include <future>
#include <set>

#include "server_fixture.hpp"

namespace troupe::testing {
namespace {

using HttpServerPrepareBounds = server_fixture;

// The test server has one route worker: were /tokenize run on it, the held
// calls would block it and /health would wait for them.
TEST_F(HttpServerPrepareBounds, HealthAndMetricsAnswerWhileTokenizeCallsAreHeld) {
  std::vector<std::future<http_response>> calls;
  for (int i = 0; i < 3; ++i)
    calls.push_back(std::async(std::launch::async, [&] { return post("/tokenize", R"({"prompt":"hold"})"); }));
  ASSERT_TRUE(fake_engine::eventually([&] { return engine.held_text_tasks() == 3; }))
      << "the /tokenize calls did not reach the engine's text tasks";
  EXPECT_EQ(get("/health").status, 200);
  EXPECT_EQ(get("/metrics").status, 200);
  for (const auto& call : calls)
    EXPECT_EQ(call.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout) << "answered while held";
  engine.release_text_tasks();
  for (auto& call : calls) {
    const http_response response = call.get();
    ASSERT_EQ(response.status, 200) << response.body;
    EXPECT_EQ(boost::json::serialize(boost::json::parse(response.body).at("tokens")), "[1,107,114,111,103]");
  }
}

// The disconnect watch covers a text task as it covers a generation: the
// engine drops the task (the fake, as the real one, only when the cancel
// names the task's id).
TEST_F(HttpServerPrepareBounds, ATokenizeCallWhoseClientLeavesIsCancelledInTheEngine) {
  {
    socket_client client(port);
    client.send_all(post_request("/tokenize", R"({"prompt":"hold"})"));
    ASSERT_TRUE(fake_engine::eventually([&] { return engine.held_text_tasks() == 1; }));
  }
  ASSERT_TRUE(fake_engine::eventually([&] { return engine.held_text_tasks() == 0; })) << "the task was not cancelled";
  const std::vector<std::string> cancelled = engine.cancelled();
  ASSERT_EQ(cancelled.size(), 1u);
  EXPECT_EQ(cancelled[0].rfind("text-", 0), 0u) << cancelled[0];
  EXPECT_TRUE(engine.submitted().empty());
}

TEST_F(HttpServerPrepareBounds, AnAnsweredTokenizeCallIsNotCancelledWhenItsClientLeaves) {
  {
    socket_client client(port);
    client.send_all(post_request("/tokenize", R"({"prompt":"hold"})"));
    ASSERT_TRUE(fake_engine::eventually([&] { return engine.held_text_tasks() == 1; }));
    engine.release_text_tasks();
    EXPECT_EQ(client.read_response().status, 200);
  }
  ASSERT_TRUE(fake_engine::eventually([&] { return server->active_connections() == 0; }));
  EXPECT_TRUE(engine.cancelled().empty());
}

TEST_F(HttpServerPrepareBounds, ARefusedTokenizeCallAnswers429WithTheBoundsCode) {
  const http_response refused = post("/tokenize", R"({"prompt":"queue-full"})");
  EXPECT_EQ(refused.status, 429);
  EXPECT_EQ(refused.headers.at("retry-after"), "1");
  EXPECT_EQ(error_of(refused).at("type").as_string(), "rate_limit_error");
  EXPECT_EQ(error_of(refused).at("code").as_string(), "prompt_queue_full");
}

TEST_F(HttpServerPrepareBounds, ARefusedGenerationNamesTheBoundOverHttpAndWebSocket) {
  const http_response refused = post("/v1/completions", R"({"prompt":"connection-limit"})");
  EXPECT_EQ(refused.status, 429);
  EXPECT_EQ(error_of(refused).at("code").as_string(), "connection_prompt_limit");
  socket_client socket(port);
  ASSERT_EQ(socket.websocket_handshake().status, 101);
  ASSERT_TRUE(
      socket.ws_send_text(R"({"type":"generate","id":"r","endpoint":"completions","prompt":"connection-limit"})"));
  const boost::json::value frame = boost::json::parse(socket.ws_read().payload);
  EXPECT_EQ(frame.at("type").as_string(), "error");
  EXPECT_EQ(frame.at("id").as_string(), "r");
  EXPECT_EQ(frame.at("error").at("code").as_string(), "connection_prompt_limit");
}

// Requests on one connection (HTTP keep-alive or one WebSocket) share an
// origin; other connections have others, and none is 0 (which is exempt
// from the per-connection bound).
TEST_F(HttpServerPrepareBounds, EachConnectionGivesItsRequestsOneOriginOfItsOwn) {
  socket_client kept(port);
  const std::string body = R"({"prompt":"a","max_tokens":1})";
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(
        kept.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      "Content-Length: " +
                      std::to_string(body.size()) + "\r\n\r\n" + body));
    ASSERT_EQ(kept.read_response().status, 200);
  }
  ASSERT_EQ(post("/v1/completions", R"({"prompt":["b","c"],"max_tokens":1})").status, 200);
  std::vector<generation_request> submitted = engine.submitted();
  ASSERT_EQ(submitted.size(), 4u);
  EXPECT_NE(submitted[0].origin, 0u);
  EXPECT_EQ(submitted[0].origin, submitted[1].origin) << "one keep-alive connection";
  EXPECT_EQ(submitted[2].origin, submitted[3].origin) << "one request's prompts";
  EXPECT_NE(submitted[0].origin, submitted[2].origin) << "two connections";
  socket_client socket(port);
  ASSERT_EQ(socket.websocket_handshake().status, 101);
  ASSERT_TRUE(
      socket.ws_send_text(R"({"type":"generate","id":1,"endpoint":"completions","prompt":"d","max_tokens":1})"));
  ASSERT_TRUE(
      socket.ws_send_text(R"({"type":"generate","id":2,"endpoint":"completions","prompt":"e","max_tokens":1})"));
  for (int done = 0; done < 2;) done += boost::json::parse(socket.ws_read().payload).at("type").as_string() == "done";
  submitted = engine.submitted();
  ASSERT_EQ(submitted.size(), 6u);
  EXPECT_EQ(submitted[4].origin, submitted[5].origin) << "one WebSocket";
  const std::set<std::uint64_t> origins{submitted[0].origin, submitted[2].origin, submitted[4].origin};
  EXPECT_EQ(origins.size(), 3u);
}

}  // namespace
}  // namespace troupe::testing

// Supervision of the I/O threads (issue 15, defect 12): an exception that
// escapes a connection's handler (the test hook throws std::bad_alloc where
// a request was read) closes that connection only; the I/O thread serves
// its other connections on, a stream in progress included, and the
// exception is counted in /metrics. An engine call failing on a route
// worker is answered (500 JSON), the connection kept.

#include "server_fixture.hpp"

namespace troupe::testing {
namespace {

using HttpServerIoFault = server_fixture;

std::string request_text(const std::string& method, const std::string& path, const std::string& body) {
  return method + " " + path +
         " HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

TEST_F(HttpServerIoFault, AThrowingHandlerClosesOnlyItsConnectionAndTheThreadServesOn) {
  api::server_config config = test_server_config();
  config.io_threads = 1;  // every connection below shares the thread that meets the exception
  config.test_io_fault_marker = "io-fault";
  start(config);

  socket_client keep_alive(port);
  const std::string completion = request_text("POST", "/v1/completions", R"({"prompt":"ok","max_tokens":2})");
  ASSERT_TRUE(keep_alive.send_all(completion));
  ASSERT_EQ(keep_alive.read_response().status, 200);
  socket_client streaming(port);
  ASSERT_TRUE(streaming.send_all(
      request_text("POST", "/v1/completions", R"({"prompt":"slow","max_tokens":30,"stream":true})")));  // 0.3 s

  socket_client poisoned(port);
  ASSERT_TRUE(poisoned.send_all(request_text("GET", "/health?io-fault", "")));
  EXPECT_TRUE(poisoned.wait_closed(std::chrono::seconds(5))) << "the connection whose handler threw stayed open";

  const http_response streamed = streaming.read_response();
  ASSERT_EQ(streamed.status, 200);
  const std::vector<std::string> payloads = sse_payloads(streamed.body);
  ASSERT_FALSE(payloads.empty());
  EXPECT_EQ(payloads.back(), "[DONE]") << "the stream beside the exception was cut";
  ASSERT_TRUE(keep_alive.send_all(completion));
  EXPECT_EQ(keep_alive.read_response().status, 200) << "a kept-alive connection on the same thread";
  expect_still_serving();

  EXPECT_EQ(server->handler_exceptions(), 1u);
  const http_response metrics = get("/metrics");
  EXPECT_NE(metrics.body.find("\ntroupe:http_handler_exceptions_total{model_name=\"fake-model\"} 1\n"),
            std::string::npos)
      << metrics.body;
}

TEST_F(HttpServerIoFault, EveryThrowingConnectionIsCountedAndClosed) {
  api::server_config config = test_server_config();
  config.io_threads = 1;
  config.test_io_fault_marker = "io-fault";
  start(config);
  for (int i = 0; i < 5; ++i) {
    socket_client poisoned(port);
    ASSERT_TRUE(poisoned.send_all(request_text("POST", "/v1/completions?io-fault", R"({"prompt":"x"})")));
    EXPECT_TRUE(poisoned.wait_closed(std::chrono::seconds(5)));
  }
  EXPECT_TRUE(fake_engine::eventually([&] { return server->active_connections() == 0; }))
      << "a closed connection still counts";
  EXPECT_EQ(server->handler_exceptions(), 5u);
  expect_still_serving();
}

TEST_F(HttpServerIoFault, AFailingEngineCallOnARouteWorkerAnswers500AndTheConnectionServesOn) {
  start(test_server_config());
  socket_client client(port);
  engine.set_stats_throws(true);  // /health asks the engine on a route worker
  ASSERT_TRUE(client.send_all(request_text("GET", "/health", "")));
  const http_response failed = client.read_response();
  EXPECT_EQ(failed.status, 500);
  EXPECT_NE(failed.body.find("\"code\":\"internal_error\""), std::string::npos) << failed.body;
  EXPECT_NE(failed.body.find("out of memory"), std::string::npos) << failed.body;
  engine.set_stats_throws(false);

  ASSERT_TRUE(client.send_all(request_text("GET", "/health", "")));
  EXPECT_EQ(client.read_response().status, 200) << "the same connection, kept alive";
  EXPECT_EQ(server->handler_exceptions(), 0u) << "answered, not an escaped exception";
  expect_still_serving();
}

}  // namespace
}  // namespace troupe::testing

// Issue #5's abuse list over real sockets: each case gets its exact status
// and error JSON, and the server serves the next request afterwards.

#include <thread>

#include "server_fixture.hpp"

namespace troupe::testing {
namespace {

using HttpServerAbuse = server_fixture;

struct abuse_case {
  const char* name;
  std::string body;
  int status;
  const char* param;  ///< nullptr: the error's param is null
};

std::string stop_list(int count) {
  std::string list;
  for (int i = 0; i < count; ++i) list += (i ? ",\"s" : "\"s") + std::to_string(i) + "\"";
  return R"({"prompt":"x","stop":[)" + list + "]}";
}

std::string logit_bias(int count) {
  std::string map;
  for (int i = 0; i < count; ++i) map += (i ? ",\"" : "\"") + std::to_string(i) + "\":1";
  return R"({"prompt":"x","logit_bias":{)" + map + "}}";
}

TEST_F(HttpServerAbuse, AbusiveBodiesGetExactErrorsAndTheServerKeepsServing) {
  const std::vector<abuse_case> cases = {
      {"malformed JSON", R"({"prompt": "x",)", 400, nullptr},
      {"not an object", R"(["prompt"])", 400, nullptr},
      {"wrong type", R"({"prompt":"x","max_tokens":"ten"})", 400, "max_tokens"},
      {"invalid UTF-8", "{\"prompt\":\"\xC3\x28\"}", 400, nullptr},
      {"n=100000", R"({"prompt":"x","n":100000})", 400, "n"},
      {"max_tokens=-1", R"({"prompt":"x","max_tokens":-1})", 400, "max_tokens"},
      {"max_tokens=10^9", R"({"prompt":"x","max_tokens":1000000000})", 400, "max_tokens"},
      {"10,000 stop strings", stop_list(10000), 400, "stop"},
      {"out-of-range token id", R"({"prompt":[1,2,999999]})", 400, "prompt[2]"},
      {"empty prompt", R"({"prompt":""})", 400, "prompt"},
      {"unknown model", R"({"model":"gpt-9","prompt":"x"})", 404, "model"},
      {"unknown field", R"({"prompt":"x","top_logprobs":2})", 400, "top_logprobs"},
      {"too many logit_bias entries", logit_bias(2000), 400, "logit_bias"},
  };
  for (const abuse_case& abuse : cases) {
    SCOPED_TRACE(abuse.name);
    const http_response response = post("/v1/completions", abuse.body);
    EXPECT_EQ(response.status, abuse.status) << response.body;
    const boost::json::object error = error_of(response);
    if (abuse.param == nullptr) {
      EXPECT_TRUE(error.at("param").is_null());
    } else {
      EXPECT_EQ(error.at("param").as_string(), abuse.param);
    }
    expect_still_serving();
  }
  EXPECT_EQ(engine.submitted().size(), cases.size());  // only the follow-up requests reached the engine
}

TEST_F(HttpServerAbuse, HugeBodyIs413EvenBeforeItIsSent) {
  socket_client client(port);
  client.send_all("POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 50000000\r\n\r\n{\"prompt\":\"");
  const http_response response = client.read_response();
  EXPECT_EQ(response.status, 413);
  EXPECT_EQ(error_of(response).at("code").as_string(), "body_too_large");
  EXPECT_TRUE(client.wait_closed(std::chrono::seconds(5)));
  // A chunked body that grows past the limit is cut off the same way.
  socket_client chunked(port);
  chunked.send_all("POST /v1/completions HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n");
  const std::string piece(256 * 1024, 'a');
  for (int i = 0; i < 5; ++i) chunked.send_all("40000\r\n" + piece + "\r\n");
  EXPECT_EQ(chunked.read_response().status, 413);
  expect_still_serving();
}

TEST_F(HttpServerAbuse, OneMegabyteHeaderIs431) {
  socket_client client(port);
  client.send_all("GET /health HTTP/1.1\r\nHost: h\r\nX-Big: " + std::string(1 << 20, 'a') + "\r\n\r\n");
  const http_response response = client.read_response();
  EXPECT_EQ(response.status, 431);
  EXPECT_EQ(error_of(response).at("code").as_string(), "header_too_large");
  expect_still_serving();
}

TEST_F(HttpServerAbuse, MalformedHttpIs400) {
  socket_client client(port);
  client.send_all("NOT HTTP AT ALL\r\n\r\n");
  EXPECT_EQ(client.read_response().status, 400);
  expect_still_serving();
}

TEST_F(HttpServerAbuse, SlowlorisConnectionsAreClosedAndOthersAreServed) {
  std::vector<std::unique_ptr<socket_client>> slow;
  for (int i = 0; i < 8; ++i) {
    slow.push_back(std::make_unique<socket_client>(port));
    slow.back()->send_all("POST /v1/completions HTTP/1.1\r\nHost: h\r\n");
  }
  // Dribble a header byte at a time: the read timeout bounds the whole request.
  bool all_closed = false;
  for (int step = 0; step < 100 && !all_closed; ++step) {
    all_closed = true;
    for (auto& client : slow) all_closed &= !client->send_all("X") || client->wait_closed(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    expect_still_serving();
  }
  EXPECT_TRUE(all_closed);
}

TEST_F(HttpServerAbuse, IdleConnectionsAreClosedAfterTheIdleTimeout) {
  api::server_config config = test_server_config();
  config.idle_timeout = std::chrono::milliseconds(200);
  start(config);
  socket_client idle(port);
  EXPECT_TRUE(idle.wait_closed(std::chrono::seconds(10)));
}

TEST_F(HttpServerAbuse, ConnectionsBeyondTheLimitGet503) {
  api::server_config config = test_server_config();
  config.max_connections = 2;
  start(config);
  socket_client first(port), second(port);
  ASSERT_TRUE(fake_engine::eventually([&] { return server->active_connections() == 2; }));
  socket_client third(port);
  const http_response refused = third.read_response();
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(error_of(refused).at("code").as_string(), "too_many_connections");
  first.close();
  ASSERT_TRUE(fake_engine::eventually([&] { return server->active_connections() <= 1; }));
  expect_still_serving();
}

}  // namespace
}  // namespace troupe::testing

#pragma once
// A real http_server on a free loopback port in front of the fake engine.

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <memory>

#include "api/http/http_server.hpp"
#include "fake_engine.hpp"
#include "socket_client.hpp"

namespace troupe::testing {

/// Small limits and short timeouts so the abuse cases are quick to provoke.
inline api::server_config test_server_config() {
  api::server_config config;
  config.host = "127.0.0.1";
  config.port = 0;
  config.io_threads = 2;
  config.worker_threads = 1;
  config.max_body_bytes = 1 << 20;
  config.max_header_bytes = 16 << 10;
  config.idle_timeout = std::chrono::seconds(5);
  config.read_timeout = std::chrono::milliseconds(1500);
  config.write_timeout = std::chrono::seconds(2);
  config.max_connections = 64;
  config.max_stream_queue_bytes = 256 << 10;
  config.max_ws_requests = 8;
  return config;
}

/// The bytes of a POST of JSON `body` to `path`, for a socket_client.
inline std::string post_request(const std::string& path, const std::string& body) {
  return "POST " + path +
         " HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

class server_fixture : public ::testing::Test {
 protected:
  void SetUp() override { start(test_server_config()); }
  void TearDown() override {
    if (!server) return;
    // No request may stay in flight once its client is answered or gone.
    EXPECT_TRUE(fake_engine::eventually([&] { return server->active_requests() == 0; }));
    server->stop();
  }

  void start(api::server_config config) {
    if (server) server->stop();
    server = std::make_unique<api::http_server>(engine, std::move(config));
    server->start();
    port = server->port();
  }

  http_response post(const std::string& path, const std::string& body, const std::string& headers = {}) {
    return http_call(port, {.method = "POST", .path = path, .body = body, .extra_headers = headers});
  }
  http_response get(const std::string& path, const std::string& headers = {}) {
    return http_call(port, {.method = "GET", .path = path, .extra_headers = headers});
  }

  /// The error object of an error response (fails the test when the body is not one).
  static boost::json::object error_of(const http_response& response) {
    const boost::json::value body = boost::json::parse(response.body);
    const boost::json::object& error = body.at("error").as_object();
    for (const char* key : {"message", "type", "param", "code"}) EXPECT_TRUE(error.contains(key)) << key;
    EXPECT_TRUE(error.at("message").is_string());
    return error;
  }

  /// The server still answers a normal completion.
  void expect_still_serving() {
    const http_response response = post("/v1/completions", R"({"prompt":"ok","max_tokens":2})");
    EXPECT_EQ(response.status, 200) << response.body;
  }

  fake_engine engine;
  std::unique_ptr<api::http_server> server;
  std::uint16_t port = 0;
};

}  // namespace troupe::testing

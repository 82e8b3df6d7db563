// The multiplexed WebSocket protocol over a real socket (hand-written
// RFC 6455 client in socket_client.cpp).

#include <boost/json/serialize.hpp>
#include <map>

#include "server_fixture.hpp"

namespace troupe::testing {
namespace {

class WebSocketServer : public server_fixture {
 protected:
  void connect(const std::string& headers = {}) {
    client = std::make_unique<socket_client>(port);
    const http_response handshake = client->websocket_handshake(headers);
    ASSERT_EQ(handshake.status, 101);
    EXPECT_EQ(handshake.headers.at("upgrade"), "websocket");
    EXPECT_TRUE(handshake.headers.count("x-request-id"));
  }

  void send(const std::string& json) { ASSERT_TRUE(client->ws_send_text(json)); }

  boost::json::value next() {
    const ws_frame frame = client->ws_read();
    EXPECT_EQ(frame.opcode, 1) << frame.payload;
    return frame.opcode == 1 ? boost::json::parse(frame.payload) : boost::json::value();
  }

  void TearDown() override {
    client.reset();  // a vanished client cancels its requests
    server_fixture::TearDown();
  }

  /// Sends `frame` again and again without reading until the server closes
  /// the socket: true when it did within `limit`.
  bool flood_until_closed(const std::string& frame, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!client->ws_send_text(frame)) return true;
    }
    return false;
  }

  /// A second client on a fresh socket gets its pong.
  void expect_other_socket_served() {
    socket_client other(port);
    ASSERT_EQ(other.websocket_handshake().status, 101);
    ASSERT_TRUE(other.ws_send_text(R"({"type":"ping","data":"other"})"));
    const ws_frame pong = other.ws_read();
    EXPECT_EQ(pong.payload, R"({"type":"pong","data":"other"})");
  }

  std::unique_ptr<socket_client> client;
};

TEST_F(WebSocketServer, ThreeMultiplexedRequestsOneCancelled) {
  connect();
  send(R"({"type":"generate","id":"a","endpoint":"completions","prompt":"first","max_tokens":4})");
  send(R"({"type":"generate","id":"slow","endpoint":"chat","messages":[{"role":"user","content":"endless"}]})");
  send(R"({"type":"generate","id":7,"endpoint":"chat","messages":[{"role":"user","content":"x"}],"max_tokens":3})");
  std::map<std::string, std::string> text;  // by serialized id
  std::map<std::string, boost::json::value> done;
  bool cancel_sent = false;
  while (done.size() < 3) {
    const boost::json::value frame = next();
    ASSERT_TRUE(frame.is_object());
    const std::string type(frame.at("type").as_string());
    const std::string id = boost::json::serialize(frame.at("id"));
    ASSERT_NE(type, "error") << boost::json::serialize(frame);
    if (type == "delta") {
      const auto& choice = frame.at("chunk").at("choices").at(0);
      if (choice.as_object().contains("text")) text[id] += choice.at("text").as_string();
      const auto* delta = choice.as_object().if_contains("delta");
      if (delta && delta->as_object().contains("content")) text[id] += delta->at("content").as_string();
      if (id == "\"slow\"" && text[id].size() > 20 && !cancel_sent) {
        send(R"({"type":"cancel","id":"slow"})");
        cancel_sent = true;
      }
    } else {
      ASSERT_EQ(type, "done");
      done[id] = frame;
    }
  }
  EXPECT_EQ(text["\"a\""], " t0 t1 t2 t3");
  EXPECT_EQ(text["7"], " t0 t1 t2");
  EXPECT_EQ(done["\"a\""].at("finish_reason").as_string(), "length");
  EXPECT_EQ(done["7"].at("finish_reason").as_string(), "length");
  EXPECT_EQ(done["\"slow\""].at("finish_reason").as_string(), "abort");
  EXPECT_EQ(done["\"a\""].at("usage").at("completion_tokens").as_int64(), 4);
  const auto cancels = engine.cancelled();
  ASSERT_EQ(cancels.size(), 1u);
  EXPECT_EQ(cancels[0], engine.submitted()[1].request_id);
}

TEST_F(WebSocketServer, ProtocolErrorsArePerRequestAndTheSocketStaysUsable) {
  connect();
  send(R"({"type":"ping","data":"hello"})");
  EXPECT_EQ(boost::json::serialize(next()), R"({"type":"pong","data":"hello"})");
  send("this is not json");
  boost::json::value error = next();
  EXPECT_EQ(error.at("type").as_string(), "error");
  EXPECT_TRUE(error.at("id").is_null());
  EXPECT_EQ(error.at("error").at("code").as_string(), "invalid_json");
  send(R"({"type":"generate","id":"q","endpoint":"completions","prompt":"x","n":100000})");
  error = next();
  EXPECT_EQ(error.at("id").as_string(), "q");
  EXPECT_EQ(error.at("error").at("param").as_string(), "n");
  send(R"({"type":"cancel","id":"nobody"})");
  EXPECT_EQ(next().at("error").at("code").as_string(), "unknown_id");
  send(R"({"type":"warp","id":"w"})");
  EXPECT_EQ(next().at("error").at("code").as_string(), "unknown_type");
  send(R"({"type":"generate","id":"dup","endpoint":"completions","prompt":"endless"})");
  send(R"({"type":"generate","id":"dup","endpoint":"completions","prompt":"x"})");
  for (;;) {  // the duplicate is refused; the original keeps streaming
    const boost::json::value frame = next();
    if (frame.at("type").as_string() == "error") {
      EXPECT_EQ(frame.at("error").at("code").as_string(), "duplicate_id");
      break;
    }
    EXPECT_EQ(frame.at("type").as_string(), "delta");
  }
  send(R"({"type":"cancel","id":"dup"})");
  for (;;) {
    const boost::json::value frame = next();
    if (frame.at("type").as_string() == "done") break;
  }
  EXPECT_EQ(engine.submitted().size(), 1u);
}

TEST_F(WebSocketServer, TooManyConcurrentRequestsOnOneSocket) {
  connect();
  for (int i = 0; i < 9; ++i) {  // the fixture allows 8
    send(R"({"type":"generate","id":)" + std::to_string(i) + R"(,"endpoint":"completions","prompt":"endless"})");
  }
  for (;;) {
    const boost::json::value frame = next();
    if (frame.at("type").as_string() != "error") continue;
    EXPECT_EQ(frame.at("id").as_int64(), 8);
    EXPECT_EQ(frame.at("error").at("code").as_string(), "too_many_requests");
    break;
  }
}

TEST_F(WebSocketServer, ClosingTheSocketCancelsEveryRequestOnIt) {
  connect();
  send(R"({"type":"generate","id":"x","endpoint":"completions","prompt":"endless"})");
  send(R"({"type":"generate","id":"y","endpoint":"completions","prompt":"endless"})");
  ASSERT_TRUE(fake_engine::eventually([&] { return engine.running() == 2; }));
  client->close();
  ASSERT_TRUE(fake_engine::eventually([&] { return engine.cancelled().size() == 2; }));
  EXPECT_TRUE(fake_engine::eventually([&] { return engine.running() == 0; }));
}

TEST_F(WebSocketServer, ASlowReaderIsShedWithAnErrorPerRequest) {
  connect();
  send(R"({"type":"generate","id":"f","endpoint":"completions","prompt":"flood"})");
  ASSERT_TRUE(fake_engine::eventually([&] { return !engine.cancelled().empty(); }, std::chrono::seconds(20)));
  // Reading again, the client finds the error frame after whatever was already written.
  for (;;) {
    const ws_frame frame = client->ws_read();
    ASSERT_EQ(frame.opcode, 1);
    const boost::json::value message = boost::json::parse(frame.payload);
    if (message.at("type").as_string() != "error") continue;
    EXPECT_EQ(message.at("id").as_string(), "f");
    EXPECT_EQ(message.at("error").at("code").as_string(), "slow_consumer");
    break;
  }
  send(R"({"type":"ping"})");  // the socket itself still works
  EXPECT_EQ(next().at("type").as_string(), "pong");
}

TEST_F(WebSocketServer, AMessageOverTheBodyLimitClosesWith1009) {
  connect();
  // The server fails the connection once it reads the frame header, so the
  // rest of the upload may be refused; the close frame must still arrive.
  client->ws_send_text(R"({"type":"ping","data":")" + std::string(2 << 20, 'a') + "\"}");
  const ws_frame close = client->ws_read();
  ASSERT_EQ(close.opcode, 8);
  ASSERT_GE(close.payload.size(), 2u);
  EXPECT_EQ((static_cast<unsigned char>(close.payload[0]) << 8) | static_cast<unsigned char>(close.payload[1]), 1009);
  client.reset();
  expect_still_serving();
}

TEST_F(WebSocketServer, APingerThatNeverReadsIsClosedAfterTheWriteTimeout) {
  connect();
  send(R"({"type":"generate","id":"g","endpoint":"completions","prompt":"endless"})");
  // Each pong fits the queue (a newer ping replaces a waiting pong), so
  // only the stalled write can end this; the fixture's write timeout is 2 s.
  const std::string ping = R"({"type":"ping","data":")" + std::string(16 << 10, 'p') + "\"}";
  EXPECT_TRUE(flood_until_closed(ping, std::chrono::seconds(15)));
  EXPECT_TRUE(fake_engine::eventually([&] { return engine.cancelled().size() == 1; }));
  expect_still_serving();
  expect_other_socket_served();
}

TEST_F(WebSocketServer, FramesTheClientNeverReadsAreBoundedInBytes) {
  api::server_config config = test_server_config();
  config.write_timeout = std::chrono::seconds(600);  // only the queue bound can close these sockets
  start(config);
  // Error frames, then pongs larger than the 256 KiB bound: neither may pile up.
  for (const std::string& frame :
       {std::string("not json"), R"({"type":"ping","data":")" + std::string(300 << 10, 'p') + "\"}"}) {
    connect();
    EXPECT_TRUE(flood_until_closed(frame, std::chrono::seconds(15))) << frame.substr(0, 20);
    expect_still_serving();
    expect_other_socket_served();
  }
}

TEST_F(WebSocketServer, AnUpgradeRequestWithABodyIsRefusedUnread) {
  socket_client refused(port);
  refused.send_all(
      "GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nContent-Length: 900000\r\n\r\n" +
      std::string(1000, 'b'));
  const http_response response = refused.read_response();
  EXPECT_EQ(response.status, 400);
  EXPECT_EQ(error_of(response).at("code").as_string(), "upgrade_with_body");
  EXPECT_TRUE(refused.wait_closed(std::chrono::seconds(5)));
  expect_other_socket_served();
}

TEST_F(WebSocketServer, UpgradeNeedsTheApiKey) {
  api::server_config config = test_server_config();
  config.api_key = "k";
  start(config);
  socket_client refused(port);
  EXPECT_EQ(refused.websocket_handshake().status, 401);
  connect("Authorization: Bearer k\r\n");
}

}  // namespace
}  // namespace troupe::testing

#pragma once
// A small blocking HTTP/1.1 and WebSocket client over raw POSIX sockets, so
// the tests can send exactly the bytes an abusive client would, and keep
// Beast out of the test build. Every read has a deadline.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::testing {

/// A parsed HTTP response; header names are lower-case.
struct http_response {
  int status = 0;
  std::map<std::string, std::string> headers;
  std::string body;  ///< de-chunked when the response was chunked
  bool chunked = false;
};

/// One WebSocket frame as received.
struct ws_frame {
  int opcode = 0;  ///< 1 text, 2 binary, 8 close, 9 ping, 10 pong
  std::string payload;
};

/// One TCP connection to 127.0.0.1.
class socket_client {
 public:
  explicit socket_client(std::uint16_t port);
  ~socket_client();
  socket_client(const socket_client&) = delete;
  socket_client& operator=(const socket_client&) = delete;

  /// Writes all bytes; false when the peer closed the connection.
  bool send_all(std::string_view bytes);
  /// Reads one complete response (Content-Length, chunked, or until close).
  /// Throws std::runtime_error when nothing complete arrives by `timeout`.
  http_response read_response(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  /// True once the peer closed (EOF or reset) within `timeout`; discards data.
  bool wait_closed(std::chrono::milliseconds timeout);
  void close();

  /// Sends the upgrade request and reads the 101 response.
  http_response websocket_handshake(const std::string& extra_headers = {});
  /// Sends one masked text frame.
  bool ws_send_text(std::string_view text);
  /// Reads the next data or close frame, answering pings on the way.
  ws_frame ws_read(std::chrono::milliseconds timeout = std::chrono::seconds(10));

 private:
  /// Ensures at least `count` buffered bytes; false on EOF.
  bool fill(std::size_t count, std::chrono::steady_clock::time_point deadline);
  std::string take(std::size_t count);
  std::string read_line(std::chrono::steady_clock::time_point deadline);
  bool send_ws_frame(int opcode, std::string_view payload);

  int fd_ = -1;
  std::string buffer_;
};

/// One HTTP request; the views must outlive the call.
struct http_request {
  std::string_view method = "GET";
  std::string_view path = "/";
  std::string_view body = {};           ///< sent as application/json
  std::string_view extra_headers = {};  ///< whole header lines, each ending in \r\n
};

/// Sends `request` on a fresh connection to `port` and reads the response.
http_response http_call(std::uint16_t port, const http_request& request);

/// The `data:` payloads of an SSE body, in order (every event must end with a blank line).
std::vector<std::string> sse_payloads(const std::string& body);

}  // namespace troupe::testing

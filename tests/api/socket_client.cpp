#include "socket_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <random>
#include <stdexcept>

namespace troupe::testing {

namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

int milliseconds_left(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::max<long long>(0, left.count()));
}

}  // namespace

socket_client::socket_client(std::uint16_t port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) throw std::runtime_error("socket() failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd_);
    throw std::runtime_error("connect() to port " + std::to_string(port) + " failed");
  }
}

socket_client::~socket_client() { close(); }

void socket_client::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool socket_client::send_all(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t sent = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(sent));
  }
  return true;
}

bool socket_client::fill(std::size_t count, std::chrono::steady_clock::time_point deadline) {
  while (buffer_.size() < count) {
    pollfd poll_fd{fd_, POLLIN, 0};
    const int ready = ::poll(&poll_fd, 1, milliseconds_left(deadline));
    if (ready == 0) throw std::runtime_error("timed out waiting for the server");
    char chunk[65536];
    const ssize_t got = ::recv(fd_, chunk, sizeof chunk, 0);
    if (got <= 0) return false;
    buffer_.append(chunk, static_cast<std::size_t>(got));
  }
  return true;
}

std::string socket_client::take(std::size_t count) {
  std::string out = buffer_.substr(0, count);
  buffer_.erase(0, count);
  return out;
}

std::string socket_client::read_line(std::chrono::steady_clock::time_point deadline) {
  std::size_t end;
  while ((end = buffer_.find("\r\n")) == std::string::npos) {
    if (!fill(buffer_.size() + 1, deadline)) throw std::runtime_error("connection closed inside a line");
  }
  std::string line = take(end);
  take(2);
  return line;
}

http_response socket_client::read_response(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  http_response response;
  const std::string status_line = read_line(deadline);
  if (status_line.rfind("HTTP/1.1 ", 0) != 0) throw std::runtime_error("bad status line: " + status_line);
  response.status = std::stoi(status_line.substr(9, 3));
  for (std::string line = read_line(deadline); !line.empty(); line = read_line(deadline)) {
    const std::size_t colon = line.find(':');
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    response.headers[lower(line.substr(0, colon))] = value;
  }
  if (response.status == 101 || response.status == 100) return response;
  if (lower(response.headers["transfer-encoding"]) == "chunked") {
    response.chunked = true;
    for (;;) {
      const std::size_t size = std::stoul(read_line(deadline), nullptr, 16);
      if (size == 0) {
        read_line(deadline);
        break;
      }
      if (!fill(size + 2, deadline)) throw std::runtime_error("connection closed inside a chunk");
      response.body += take(size);
      take(2);
    }
  } else if (response.headers.count("content-length")) {
    const std::size_t length = std::stoul(response.headers["content-length"]);
    if (!fill(length, deadline)) throw std::runtime_error("connection closed inside the body");
    response.body = take(length);
  } else {
    while (fill(buffer_.size() + 1, deadline)) {
    }
    response.body = take(buffer_.size());
  }
  return response;
}

bool socket_client::wait_closed(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    pollfd poll_fd{fd_, POLLIN, 0};
    if (::poll(&poll_fd, 1, milliseconds_left(deadline)) == 0) return false;
    char chunk[65536];
    const ssize_t got = ::recv(fd_, chunk, sizeof chunk, 0);
    if (got <= 0) return true;
  }
}

http_response socket_client::websocket_handshake(const std::string& extra_headers) {
  send_all(
      "GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
      extra_headers + "\r\n");
  return read_response();
}

bool socket_client::send_ws_frame(int opcode, std::string_view payload) {
  std::string frame;
  frame += static_cast<char>(0x80 | opcode);
  if (payload.size() < 126) {
    frame += static_cast<char>(0x80 | payload.size());
  } else if (payload.size() <= 0xFFFF) {
    frame += static_cast<char>(0x80 | 126);
    frame += static_cast<char>(payload.size() >> 8);
    frame += static_cast<char>(payload.size() & 0xFF);
  } else {
    frame += static_cast<char>(0x80 | 127);
    for (int shift = 56; shift >= 0; shift -= 8) frame += static_cast<char>((payload.size() >> shift) & 0xFF);
  }
  thread_local std::mt19937 generator{std::random_device{}()};
  char mask[4];
  for (char& byte : mask) byte = static_cast<char>(generator() & 0xFF);
  frame.append(mask, 4);
  for (std::size_t i = 0; i < payload.size(); ++i) frame += static_cast<char>(payload[i] ^ mask[i % 4]);
  return send_all(frame);
}

bool socket_client::ws_send_text(std::string_view text) { return send_ws_frame(1, text); }

ws_frame socket_client::ws_read(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  ws_frame message;  // a data message may arrive in fragments (opcode 0 continues it)
  for (;;) {
    if (!fill(2, deadline)) return {8, {}};
    const auto b0 = static_cast<unsigned char>(buffer_[0]);
    const auto b1 = static_cast<unsigned char>(buffer_[1]);
    if ((b1 & 0x80) != 0) throw std::runtime_error("server frames must not be masked");
    std::size_t header = 2;
    std::uint64_t length = b1 & 0x7F;
    if (length >= 126) {
      const std::size_t extra = length == 126 ? 2 : 8;
      if (!fill(2 + extra, deadline)) return {8, {}};
      length = 0;
      for (std::size_t i = 0; i < extra; ++i) length = (length << 8) | static_cast<unsigned char>(buffer_[2 + i]);
      header += extra;
    }
    if (!fill(header + length, deadline)) return {8, {}};
    take(header);
    ws_frame frame{b0 & 0x0F, take(length)};
    const bool final_fragment = (b0 & 0x80) != 0;
    if (frame.opcode == 9) {
      send_ws_frame(10, frame.payload);
      continue;
    }
    if (frame.opcode == 10) continue;
    if (frame.opcode == 8) return frame;
    if (frame.opcode != 0) message.opcode = frame.opcode;
    message.payload += frame.payload;
    if (final_fragment) return message;
  }
}

http_response http_call(std::uint16_t port, const http_request& call) {
  const auto [method, path, body, extra_headers] = call;
  socket_client client(port);
  std::string request = std::string(method) + " " + std::string(path) + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  request += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  request += std::string(extra_headers) + "\r\n" + std::string(body);
  client.send_all(request);
  return client.read_response();
}

std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> payloads;
  std::size_t start = 0;
  while (start < body.size()) {
    const std::size_t end = body.find("\n\n", start);
    if (end == std::string::npos) throw std::runtime_error("SSE event without its blank line: " + body.substr(start));
    const std::string event = body.substr(start, end - start);
    if (event.rfind("data: ", 0) != 0) throw std::runtime_error("SSE event without 'data: ': " + event);
    payloads.push_back(event.substr(6));
    start = end + 2;
  }
  return payloads;
}

}  // namespace troupe::testing

// One HTTP/1.1 connection (http_session.hpp): reading requests, plain
// replies, SSE streams, the hand-over to a WebSocket session, and closing.

#include "api/http/http_session.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <new>

#include "api/http/response_render.hpp"

namespace troupe::api::detail {

namespace http = beast::http;

namespace {

constexpr std::size_t max_sse_write_bytes = 64 * 1024;
constexpr std::size_t first_read_bytes = 4096;
constexpr std::chrono::seconds linger_time{1};
constexpr std::string_view continue_line = "HTTP/1.1 100 Continue\r\n\r\n";

/// The reply for a request the parser rejected (it never reached the routes).
api_error read_error_reply(beast::error_code ec) {
  if (ec == http::error::header_limit) {
    return api_error(431, "invalid_request_error", "request header fields are too large", {}, "header_too_large");
  }
  if (ec == http::error::body_limit) {
    return api_error(413, "invalid_request_error", "request body is too large", {}, "body_too_large");
  }
  return api_error(400, "invalid_request_error", "malformed HTTP request: " + ec.message(), {}, "bad_http");
}

}  // namespace

http_session::http_session(tcp::socket&& socket, std::shared_ptr<server_state> state, bool on_admin_port)
    : stream_(std::move(socket)),
      state_(std::move(state)),
      on_admin_port_(on_admin_port),
      origin_(state_->next_origin++) {}

void http_session::run() {
  slot_.emplace(*state_, weak_from_this());
  net::dispatch(stream_.get_executor(), handler(&http_session::on_start));
}

void http_session::close() {
  net::post(stream_.get_executor(), guard([this] { abandon(); }));
}

void http_session::on_handler_exception(std::exception_ptr error) noexcept {
  note_handler_exception(*state_, request_id_.empty() ? std::string_view("a connection") : request_id_, error);
  abandon();
}

void http_session::on_start() {
  if (!slot_->over_capacity()) return do_read();
  api_error error(503, "service_unavailable_error", "too many connections", {}, "too_many_connections");
  error.retry_after_s = 1;
  keep_alive_ = false;
  request_id_ = random_hex(16);
  do_write_reply(error_reply(error));
}

// --- reading a request -------------------------------------------------
void http_session::do_read() {
  if (buffer_.size() > 0) return do_read_header();  // pipelined bytes already here
  stream_.expires_after(state_->config.idle_timeout);
  stream_.async_read_some(buffer_.prepare(first_read_bytes), handler(&http_session::on_first_bytes));
}

void http_session::on_first_bytes(beast::error_code ec, std::size_t bytes) {
  if (ec) return abandon();  // idle timeout, or the client closed between requests
  buffer_.commit(bytes);
  do_read_header();
}

void http_session::do_read_header() {
  parser_.emplace();
  parser_->header_limit(state_->config.max_header_bytes);
  parser_->body_limit(state_->config.max_body_bytes);
  stream_.expires_after(state_->config.read_timeout);  // covers header and body: slowloris bound
  http::async_read_header(stream_, buffer_, *parser_, handler(&http_session::on_read_header));
}

void http_session::on_read_header(beast::error_code ec, std::size_t) {
  if (ec) return on_read_failed(ec);
  if (beast::websocket::is_upgrade(parser_->get()) && !parser_->is_done()) return refuse_upgrade_body();
  const auto expect = parser_->get()[http::field::expect];
  if (!beast::iequals(expect, "100-continue") || parser_->is_done()) return do_read_body();
  net::async_write(stream_, net::buffer(continue_line), guard([this](beast::error_code write_ec, std::size_t) {
                     if (write_ec) return abandon();
                     do_read_body();
                   }));
}

void http_session::do_read_body() { http::async_read(stream_, buffer_, *parser_, handler(&http_session::on_read)); }

void http_session::on_read_failed(beast::error_code ec) {
  if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::operation_aborted ||
      ec == net::error::connection_reset || ec == net::error::eof || closed_) {
    return abandon();
  }
  keep_alive_ = false;  // the stream position is unknown after a framing error
  request_id_ = random_hex(16);
  do_write_reply(error_reply(read_error_reply(ec)));
}

void http_session::on_read(beast::error_code ec, std::size_t) {
  if (ec) return on_read_failed(ec);
  http::request<http::string_body> request = parser_->release();
  parser_.reset();
  keep_alive_ = request.keep_alive();
  request_id_ = request_id_for(request["X-Request-Id"]);
  http_request_view view;
  view.method = std::string(request.method_string());
  const std::string_view target = request.target();
  const std::string& marker = state_->config.test_io_fault_marker;
  if (!marker.empty() && target.find(marker) != std::string_view::npos) throw std::bad_alloc();  // test hook
  const std::size_t question = target.find('?');
  view.path = std::string(target.substr(0, question));
  view.query = question == std::string_view::npos ? "" : std::string(target.substr(question + 1));
  view.authorization = std::string(request[http::field::authorization]);
  view.request_id = request_id_;
  beast::error_code ignored;
  view.remote_address = stream_.socket().remote_endpoint(ignored).address().to_string();
  view.host = std::string(request[http::field::host]);
  view.origin = std::string(request[http::field::origin]);
  view.on_admin_port = on_admin_port_;
  if (beast::websocket::is_upgrade(request)) return upgrade(std::move(request), view);
  view.body = std::move(request.body());
  ++state_->pending_responses;
  counted_response_ = true;
  do_route(std::move(view));
}

/// An upgrade request has no use for a body: refuse it unread rather than
/// buffer up to the body limit for a handshake.
void http_session::refuse_upgrade_body() {
  keep_alive_ = false;  // the unread body would be taken for the next request
  request_id_ = request_id_for(parser_->get()["X-Request-Id"]);
  parser_.reset();
  do_write_reply(error_reply(api_error(400, "invalid_request_error", "a WebSocket upgrade request must not have a body",
                                       {}, "upgrade_with_body")));
}

void http_session::upgrade(http::request<http::string_body> request, const http_request_view& view) {
  if (std::optional<http_reply> refusal = wrong_listener_reply(view, state_->routes)) {
    keep_alive_ = false;
    return do_write_reply(std::move(*refusal));
  }
  if (view.path == "/admin/stream") return upgrade_admin_stream(std::move(request), view);
  if (std::optional<http_reply> refusal = check_websocket_upgrade(view, state_->routes)) {
    keep_alive_ = false;
    return do_write_reply(std::move(*refusal));
  }
  closed_ = true;  // the socket now belongs to the WebSocket session
  // Only the header goes on: the session keeps it until the handshake is done.
  start_ws_session(std::move(stream_), http::request<http::empty_body>(std::move(request.base())), request_id_, state_);
}

void http_session::upgrade_admin_stream(http::request<http::string_body> request, const http_request_view& view) {
  std::variant<double, http_reply> accepted = admin_stream_upgrade(view, state_->routes.admin);
  if (auto* refusal = std::get_if<http_reply>(&accepted)) {
    keep_alive_ = false;
    return do_write_reply(std::move(*refusal));
  }
  closed_ = true;  // the socket now belongs to the admin stream
  start_admin_stream_session(std::move(stream_), http::request<http::empty_body>(std::move(request.base())),
                             request_id_, std::get<double>(accepted), state_);
}

// --- plain replies ------------------------------------------------------------
void http_session::do_write_reply(http_reply reply) {
  if (closed_) return;
  auto response = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(reply.status), 11);
  response->set(http::field::server, "troupe");
  response->set(http::field::content_type, reply.content_type);
  response->set("X-Request-Id", request_id_);
  for (const header_field& header : reply.headers) response->set(header.name, header.value);
  response->keep_alive(keep_alive_ && !state_->draining.load());
  response->body() = std::move(reply.body);
  response->prepare_payload();
  stream_.expires_after(state_->config.write_timeout);
  http::async_write(stream_, *response, guard([this, response](beast::error_code ec, std::size_t) {
                      on_write_reply(ec, response->keep_alive());
                    }));
}

void http_session::on_write_reply(beast::error_code ec, bool keep_alive) {
  finish_response();
  if (ec) return abandon();
  if (!keep_alive) return do_linger();
  do_read();
}

/// Closing right after an error reply would reset the connection while the
/// client still sends (a body past the limit) and destroy the reply in
/// flight: stop sending, discard input briefly, then close.
void http_session::do_linger() {
  if (closed_) return;
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream_.expires_after(linger_time);
  buffer_.clear();
  stream_.async_read_some(buffer_.prepare(first_read_bytes), handler(&http_session::on_linger));
}

void http_session::on_linger(beast::error_code ec, std::size_t) {
  if (ec || closed_) return abandon();
  buffer_.clear();
  stream_.async_read_some(buffer_.prepare(first_read_bytes), handler(&http_session::on_linger));
}

// --- SSE ------------------------------------------------------------------
void http_session::do_write_stream_header() {
  stream_header_.emplace(http::status::ok, 11);
  stream_header_->set(http::field::server, "troupe");
  stream_header_->set(http::field::content_type, "text/event-stream");
  stream_header_->set(http::field::cache_control, "no-cache");
  stream_header_->set("X-Request-Id", request_id_);
  stream_header_->keep_alive(keep_alive_ && !state_->draining.load());
  stream_header_->chunked(true);
  stream_serializer_.emplace(*stream_header_);
  writing_ = true;
  stream_.expires_after(state_->config.write_timeout);
  http::async_write_header(stream_, *stream_serializer_, handler(&http_session::on_write_stream_header));
}

void http_session::on_write_stream_header(beast::error_code ec, std::size_t) {
  writing_ = false;
  if (ec) return abandon();
  streaming_ = true;
  do_write_frames();
}

void http_session::do_write_frames() {
  if (writing_ || closed_ || !queue_) return;
  std::string data;
  while (data.size() < max_sse_write_bytes) {
    std::optional<std::string> frame = queue_->pop();
    if (!frame) break;
    data += *frame;
  }
  if (data.empty()) {
    if (job_done_) do_write_last_chunk();
    return;
  }
  write_data_ = http_chunk(data);
  writing_ = true;
  stream_.expires_after(state_->config.write_timeout);
  net::async_write(stream_, net::buffer(write_data_), handler(&http_session::on_write_frames));
}

void http_session::on_write_frames(beast::error_code ec, std::size_t) {
  writing_ = false;
  if (ec) return abandon();  // the client went away or stopped reading: cancels the job
  do_write_frames();
}

void http_session::do_write_last_chunk() {
  write_data_ = "0\r\n\r\n";
  writing_ = true;
  stream_.expires_after(state_->config.write_timeout);
  net::async_write(stream_, net::buffer(write_data_), handler(&http_session::on_write_last_chunk));
}

void http_session::on_write_last_chunk(beast::error_code ec, std::size_t) {
  writing_ = false;
  streaming_ = false;
  const bool keep_alive = stream_header_->keep_alive();
  stream_serializer_.reset();
  stream_header_.reset();
  on_write_reply(ec, keep_alive);
}

// --- the end of a response, or of the connection ------------------------------
void http_session::finish_response() {
  if (counted_response_) --state_->pending_responses;
  counted_response_ = false;
  job_done_ = false;
  queue_.reset();
}

// The socket goes first: a cancel that throws (out of memory) must not
// leave the connection open.
void http_session::abandon() noexcept {
  if (closed_) return;
  closed_ = true;
  streaming_ = false;
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.socket().close(ignored);
  finish_response();
  try {
    cancel_work();
  } catch (...) {
    note_handler_exception(*state_, request_id_, std::current_exception());
  }
}

// Called from the listeners' accept handlers: what throws here closes the
// new connection, and the listener goes on accepting.
void start_http_session(tcp::socket socket, std::shared_ptr<server_state> state, bool on_admin_port) {
  server_state& shared = *state;
  try {
    std::make_shared<http_session>(std::move(socket), std::move(state), on_admin_port)->run();
  } catch (...) {
    note_handler_exception(shared, "a new connection", std::current_exception());
  }
}

}  // namespace troupe::api::detail

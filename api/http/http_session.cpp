// One HTTP/1.1 connection: keep-alive requests, read limits and timeouts,
// plain replies, SSE streams and the hand-over to a WebSocket session.
// Everything runs on the connection's strand; handlers come in do_/on_ pairs.

#include <algorithm>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <cctype>
#include <optional>

#include "api/http/disconnect_watch.hpp"
#include "api/http/response_render.hpp"
#include "api/http/server_internal.hpp"

namespace troupe::api::detail {

namespace http = beast::http;

namespace {

constexpr std::size_t max_sse_write_bytes = 64 * 1024;
constexpr std::size_t first_read_bytes = 4096;
constexpr std::chrono::seconds linger_time{1};

/// A client's X-Request-Id is echoed when it is short and plain; otherwise one is made.
std::string request_id_for(std::string_view given) {
  const bool plain = !given.empty() && given.size() <= 128 && std::all_of(given.begin(), given.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == ':';
  });
  return plain ? std::string(given) : random_hex(16);
}

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

class http_session final : public closable, public job_listener, public std::enable_shared_from_this<http_session> {
 public:
  http_session(tcp::socket&& socket, std::shared_ptr<server_state> state, bool on_admin_port)
      : stream_(std::move(socket)),
        state_(std::move(state)),
        on_admin_port_(on_admin_port),
        origin_(state_->next_origin++) {}

  void run() {
    slot_.emplace(*state_, weak_from_this());
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      if (!self->slot_->over_capacity()) return self->do_read();
      api_error error(503, "service_unavailable_error", "too many connections", {}, "too_many_connections");
      error.retry_after_s = 1;
      self->keep_alive_ = false;
      self->request_id_ = random_hex(16);
      self->do_write_reply(error_reply(error));
    });
  }

  void close() override {
    net::post(stream_.get_executor(), [self = shared_from_this()] { self->abandon(); });
  }

  void job_reply(generation_job&, http_reply reply) override { do_write_reply(std::move(reply)); }

  void job_stream_started(generation_job&) override { do_write_stream_header(); }

  void job_frames_queued(generation_job&) override {
    if (queue_ && queue_->over_limit()) {
      // The client reads slower than the engine writes: give up on it, free the engine.
      return abandon();
    }
    if (streaming_) do_write_frames();
  }

  void job_finished(generation_job&) override {
    job_done_ = true;
    job_.reset();
    if (streaming_) do_write_frames();
  }

 private:
  // --- reading a request -------------------------------------------------
  void do_read() {
    if (buffer_.size() > 0) return do_read_header();  // pipelined bytes already here
    stream_.expires_after(state_->config.idle_timeout);
    stream_.async_read_some(buffer_.prepare(first_read_bytes),
                            beast::bind_front_handler(&http_session::on_first_bytes, shared_from_this()));
  }

  void on_first_bytes(beast::error_code ec, std::size_t bytes) {
    if (ec) return abandon();  // idle timeout, or the client closed between requests
    buffer_.commit(bytes);
    do_read_header();
  }

  void do_read_header() {
    parser_.emplace();
    parser_->header_limit(state_->config.max_header_bytes);
    parser_->body_limit(state_->config.max_body_bytes);
    stream_.expires_after(state_->config.read_timeout);  // covers header and body: slowloris bound
    http::async_read_header(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&http_session::on_read_header, shared_from_this()));
  }

  void on_read_header(beast::error_code ec, std::size_t) {
    if (ec) return on_read_failed(ec);
    if (beast::websocket::is_upgrade(parser_->get()) && !parser_->is_done()) return refuse_upgrade_body();
    const auto expect = parser_->get()[http::field::expect];
    if (!beast::iequals(expect, "100-continue") || parser_->is_done()) return do_read_body();
    net::async_write(stream_, net::buffer(continue_line_),
                     [self = shared_from_this()](beast::error_code write_ec, std::size_t) {
                       if (write_ec) return self->abandon();
                       self->do_read_body();
                     });
  }

  void do_read_body() {
    http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&http_session::on_read, shared_from_this()));
  }

  void on_read_failed(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::operation_aborted ||
        ec == net::error::connection_reset || ec == net::error::eof || closed_) {
      return abandon();
    }
    keep_alive_ = false;  // the stream position is unknown after a framing error
    request_id_ = random_hex(16);
    do_write_reply(error_reply(read_error_reply(ec)));
  }

  void on_read(beast::error_code ec, std::size_t) {
    if (ec) return on_read_failed(ec);
    http::request<http::string_body> request = parser_->release();
    parser_.reset();
    keep_alive_ = request.keep_alive();
    request_id_ = request_id_for(request["X-Request-Id"]);
    http_request_view view;
    view.method = std::string(request.method_string());
    const std::string_view target = request.target();
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
  void refuse_upgrade_body() {
    keep_alive_ = false;  // the unread body would be taken for the next request
    request_id_ = request_id_for(parser_->get()["X-Request-Id"]);
    parser_.reset();
    do_write_reply(error_reply(api_error(400, "invalid_request_error",
                                         "a WebSocket upgrade request must not have a body", {}, "upgrade_with_body")));
  }

  void upgrade(http::request<http::string_body> request, const http_request_view& view) {
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
    start_ws_session(std::move(stream_), http::request<http::empty_body>(std::move(request.base())), request_id_,
                     state_);
  }

  void upgrade_admin_stream(http::request<http::string_body> request, const http_request_view& view) {
    std::variant<double, http_reply> accepted = admin_stream_upgrade(view, state_->routes.admin);
    if (auto* refusal = std::get_if<http_reply>(&accepted)) {
      keep_alive_ = false;
      return do_write_reply(std::move(*refusal));
    }
    closed_ = true;  // the socket now belongs to the admin stream
    start_admin_stream_session(std::move(stream_), http::request<http::empty_body>(std::move(request.base())),
                               request_id_, std::get<double>(accepted), state_);
  }

  // --- routing (off the I/O threads) ---------------------------------------
  void do_route(http_request_view view) {
    net::post(state_->workers, [self = shared_from_this(), view = std::move(view)] {
      routed_request routed = route_request(view, self->state_->routes);
      if (routed.text) return self->do_text_task(std::move(*routed.text));
      net::post(self->stream_.get_executor(),
                [self, routed = std::move(routed)]() mutable { self->on_routed(std::move(routed)); });
    });
  }

  void on_routed(routed_request routed) {
    if (closed_) return;
    if (!routed.generation) return do_write_reply(std::move(routed.reply));
    const bool stream = routed.generation->stream;
    queue_ = std::make_shared<outgoing_queue>(state_->config.max_stream_queue_bytes);
    job_options options;
    options.mode = stream ? output_mode::sse : output_mode::aggregate;
    options.stream_key = state_->next_stream_key++;
    options.queue = queue_;
    options.listener = shared_from_this();
    options.in_flight = state_->in_flight;
    options.origin = origin_;
    auto job = std::make_shared<generation_job>(std::move(*routed.generation), std::move(options));
    job_ = job;
    job_done_ = false;
    job->start(*state_->routes.engine, state_->gate->make_post(stream_.get_executor()));
    do_watch_disconnect();
  }

  /// /tokenize and /detokenize run on the engine's tokenizer workers, not on
  /// the route workers, so /health and /metrics answer while big ones run.
  /// Called on a route worker (touching nothing of the strand's): an engine
  /// that runs text tasks inline (run_text_task's default) does so there,
  /// never on an I/O thread.
  void do_text_task(text_task task) {
    task.origin = origin_;
    strand_post post = state_->gate->make_post(stream_.get_executor());
    auto self = shared_from_this();
    state_->routes.engine->run_text_task(task, [self, post, task](text_task_result result) {
      post([self, task, result = std::move(result)] { self->on_text_task(task, result); });
    });
  }

  void on_text_task(const text_task& task, const text_task_result& result) {
    if (closed_) return;
    do_write_reply(text_task_reply(task, result, state_->routes));
  }

  // --- plain replies ------------------------------------------------------------
  void do_write_reply(http_reply reply) {
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
    http::async_write(stream_, *response, [self = shared_from_this(), response](beast::error_code ec, std::size_t) {
      self->on_write_reply(ec, response->keep_alive());
    });
  }

  void on_write_reply(beast::error_code ec, bool keep_alive) {
    finish_response();
    if (ec) return abandon();
    if (!keep_alive) return do_linger();
    do_read();
  }

  /// Closing right after an error reply would reset the connection while the
  /// client still sends (a body past the limit) and destroy the reply in
  /// flight: stop sending, discard input briefly, then close.
  void do_linger() {
    if (closed_) return;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(linger_time);
    buffer_.clear();
    stream_.async_read_some(buffer_.prepare(first_read_bytes),
                            beast::bind_front_handler(&http_session::on_linger, shared_from_this()));
  }

  void on_linger(beast::error_code ec, std::size_t) {
    if (ec || closed_) return abandon();
    buffer_.clear();
    stream_.async_read_some(buffer_.prepare(first_read_bytes),
                            beast::bind_front_handler(&http_session::on_linger, shared_from_this()));
  }

  // --- SSE ------------------------------------------------------------------
  void do_write_stream_header() {
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
    http::async_write_header(stream_, *stream_serializer_,
                             beast::bind_front_handler(&http_session::on_write_stream_header, shared_from_this()));
  }

  void on_write_stream_header(beast::error_code ec, std::size_t) {
    writing_ = false;
    if (ec) return abandon();
    streaming_ = true;
    do_write_frames();
  }

  void do_write_frames() {
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
    write_data_ = to_hex(data.size()) + "\r\n" + data + "\r\n";  // one HTTP/1.1 chunk
    writing_ = true;
    stream_.expires_after(state_->config.write_timeout);
    net::async_write(stream_, net::buffer(write_data_),
                     beast::bind_front_handler(&http_session::on_write_frames, shared_from_this()));
  }

  void on_write_frames(beast::error_code ec, std::size_t) {
    writing_ = false;
    if (ec) return abandon();  // the client went away or stopped reading: cancels the job
    do_write_frames();
  }

  void do_write_last_chunk() {
    write_data_ = "0\r\n\r\n";
    writing_ = true;
    stream_.expires_after(state_->config.write_timeout);
    net::async_write(stream_, net::buffer(write_data_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      self->writing_ = false;
      self->streaming_ = false;
      const bool keep_alive = self->stream_header_->keep_alive();
      self->stream_serializer_.reset();
      self->stream_header_.reset();
      self->on_write_reply(ec, keep_alive);
    });
  }

  static std::string to_hex(std::size_t value) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string text;
    do {
      text.insert(text.begin(), digits[value & 0xF]);
      value >>= 4;
    } while (value != 0);
    return text;
  }

  // --- disconnects ------------------------------------------------------------
  /// While a job runs nothing is read: EOF or a reset means the client left
  /// and its engine requests must be cancelled. Bytes it pipelined meanwhile
  /// (up to one more request's worth) are kept for the next request.
  void do_watch_disconnect() {
    const std::size_t limit = state_->config.max_header_bytes + state_->config.max_body_bytes;
    auto self = shared_from_this();
    watch_.start(
        stream_.socket(), buffer_, limit, [self] { return !self->closed_ && (self->job_ || self->streaming_); },
        [self] { self->abandon(); });
  }

  void finish_response() {
    if (counted_response_) --state_->pending_responses;
    counted_response_ = false;
    job_done_ = false;
    queue_.reset();
  }

  /// Ends the connection: cancels the running job (its engine requests) and closes.
  void abandon() {
    if (closed_) return;
    closed_ = true;
    if (auto job = std::move(job_)) job->cancel();
    finish_response();
    streaming_ = false;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  static constexpr std::string_view continue_line_ = "HTTP/1.1 100 Continue\r\n\r\n";

  beast::tcp_stream stream_;
  std::shared_ptr<server_state> state_;
  bool on_admin_port_;
  std::uint64_t origin_;  ///< this connection's engine origin: its prompts share one bound
  std::optional<connection_slot> slot_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string request_id_;
  bool keep_alive_ = true;
  bool counted_response_ = false;
  bool closed_ = false;
  std::shared_ptr<generation_job> job_;
  std::shared_ptr<outgoing_queue> queue_;
  bool job_done_ = false;
  std::optional<http::response<http::empty_body>> stream_header_;
  std::optional<http::response_serializer<http::empty_body>> stream_serializer_;
  std::string write_data_;
  bool writing_ = false;
  bool streaming_ = false;
  disconnect_watch watch_;
};

void start_http_session(tcp::socket socket, std::shared_ptr<server_state> state, bool on_admin_port) {
  std::make_shared<http_session>(std::move(socket), std::move(state), on_admin_port)->run();
}

}  // namespace troupe::api::detail

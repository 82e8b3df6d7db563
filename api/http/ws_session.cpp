// One WebSocket connection at /v1/ws: many generations multiplexed by client
// id over one socket, an outgoing queue bounded in bytes for every kind of
// frame, timed writes, keep-alive pings. Runs on the connection's strand;
// handlers come in do_/on_ pairs.

#include <boost/asio/dispatch.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/websocket/stream.hpp>
#include <limits>
#include <map>
#include <optional>

#include "api/http/server_internal.hpp"
#include "api/http/ws_options.hpp"
#include "api/http/ws_protocol.hpp"

namespace troupe::api::detail {

namespace http = beast::http;
namespace websocket = beast::websocket;

/// The queue's stream key of JSON pongs (generation keys count up from 1).
constexpr std::uint64_t pong_stream = std::numeric_limits<std::uint64_t>::max();

class ws_session final : public closable,
                         public job_listener,
                         public guarded_session<ws_session>,
                         public std::enable_shared_from_this<ws_session> {
 public:
  ws_session(beast::tcp_stream&& stream, std::shared_ptr<server_state> state)
      : ws_(std::move(stream)),
        state_(std::move(state)),
        write_timer_(ws_.get_executor()),
        queue_(std::make_shared<outgoing_queue>(state_->config.max_stream_queue_bytes)),
        origin_(state_->next_origin++) {}

  void run(http::request<http::empty_body> handshake, std::string request_id) {
    slot_.emplace(*state_, weak_from_this());
    set_websocket_options(ws_, state_->config, request_id);
    ws_.read_message_max(state_->config.max_body_bytes);
    ws_.auto_fragment(false);  // one frame per message: merged deltas can be large
    handshake_.emplace(std::move(handshake));
    net::dispatch(ws_.get_executor(),
                  guard([this] { ws_.async_accept(*handshake_, handler(&ws_session::on_accept)); }));
  }

  void close() override {
    net::post(ws_.get_executor(), guard([this] { abandon(); }));
  }

  /// A handler of this connection threw (guarded()): it is closed with
  /// every request on it; the other connections go on.
  void on_handler_exception(std::exception_ptr error) noexcept {
    note_handler_exception(*state_, "a WebSocket connection", error);
    abandon();
  }

  void job_reply(generation_job&, http_reply) override {}  // websocket jobs answer in frames
  void job_stream_started(generation_job&) override {}

  void job_frames_queued(generation_job&) override { flush(); }

  void job_finished(generation_job& job) override {
    for (auto it = jobs_.begin(); it != jobs_.end(); ++it) {
      if (it->second.get() == &job) {
        jobs_.erase(it);
        break;
      }
    }
  }

 private:
  void on_accept(beast::error_code ec) {
    handshake_.reset();  // its headers are not needed for the socket's lifetime
    if (ec) return abandon();
    do_read();
  }

  void do_read() { ws_.async_read(read_buffer_, handler(&ws_session::on_read)); }

  void on_read(beast::error_code ec, std::size_t) {
    if (ec) return abandon();  // closed by the client, idle timeout, oversized frame
    const std::string text = beast::buffers_to_string(read_buffer_.data());
    read_buffer_.consume(read_buffer_.size());
    if (!ws_.got_text()) {
      send(ws_error_frame(nullptr, invalid_field({}, "binary frames are not supported; send JSON text", "bad_frame")));
    } else {
      handle_message(text);
    }
    if (!closed_) do_read();
  }

  void handle_message(std::string_view text) {
    ws_client_message message;
    try {
      message = parse_ws_message(text, *state_->routes.limits->get(), state_->routes.model);
    } catch (const ws_message_error& error) {
      return send(ws_error_frame(error.id, error));
    }
    switch (message.type) {
      case ws_client_message::kind::ping:
        return send_pong(ws_pong_frame(message.ping_data));
      case ws_client_message::kind::cancel:
        return cancel(message);
      case ws_client_message::kind::generate:
        return generate(std::move(message));
    }
  }

  void cancel(const ws_client_message& message) {
    const auto found = jobs_.find(message.id_key);
    if (found == jobs_.end()) {
      return send(ws_error_frame(
          message.id, api_error(404, "invalid_request_error", "no running request has this id", "id", "unknown_id")));
    }
    std::shared_ptr<generation_job> job = found->second;
    job->cancel_in_engine();  // its choices finish with "abort", then a done frame follows
  }

  void generate(ws_client_message message) {
    if (std::optional<api_error> refusal = refusal_for(message)) return send(ws_error_frame(message.id, *refusal));
    apply_cache_isolation(message.generation, state_->routes);
    start_job(std::move(message));
  }

  std::optional<api_error> refusal_for(const ws_client_message& message) const {
    if (jobs_.count(message.id_key) != 0) {
      return api_error(400, "invalid_request_error", "a request with this id is already running", "id", "duplicate_id");
    }
    if (jobs_.size() >= static_cast<std::size_t>(state_->config.max_ws_requests)) {
      return api_error(429, "rate_limit_error",
                       "too many concurrent requests on this socket (at most " +
                           std::to_string(state_->config.max_ws_requests) + ")",
                       {}, "too_many_requests");
    }
    if (state_->draining.load()) {
      return api_error(503, "service_unavailable_error", "the server is shutting down", {}, "shutting_down");
    }
    return std::nullopt;
  }

  void start_job(ws_client_message message) {
    job_options options;
    options.mode = output_mode::websocket;
    options.stream_key = state_->next_stream_key++;
    options.client_id = message.id;
    options.queue = queue_;
    options.listener = shared_from_this();
    options.in_flight = state_->in_flight;
    options.origin = origin_;
    auto job = std::make_shared<generation_job>(std::move(message.generation), std::move(options));
    jobs_[message.id_key] = job;
    job->start(*state_->routes.engine, guarded_post(weak_from_this(), state_->gate->make_post(ws_.get_executor())));
  }

  /// The client reads slower than its requests produce: cancel them all,
  /// drop what waits for them, and tell the client why (docs/api.md).
  void shed_load() {
    std::map<std::string, std::shared_ptr<generation_job>> victims = std::move(jobs_);
    jobs_.clear();
    const api_error error(503, "server_error",
                          "the client read too slowly: outgoing queue exceeded " +
                              std::to_string(queue_->limit_bytes()) + " bytes, request cancelled",
                          {}, "slow_consumer");
    for (auto& [key, job] : victims) {
      job->cancel();
      queue_->drop_stream(job->stream_key());
      queue_->push_frame(0, -1, ws_error_frame(job->client_id(), error));
    }
  }

  void send(std::string frame) {
    queue_->push_frame(0, -1, std::move(frame));
    flush();
  }

  /// A newer ping supersedes an unanswered one (RFC 6455 5.5.3 allows
  /// answering only the latest), so at most one pong waits.
  void send_pong(std::string frame) {
    queue_->replace_frame(pong_stream, std::move(frame));
    flush();
  }

  /// Writes what is queued and keeps the queue within its bound: past it,
  /// the generations are shed first (their frames are what grows); if
  /// pongs and errors alone still exceed it, the client does not read at
  /// all and the socket is closed.
  void flush() {
    do_write();
    if (!queue_->over_limit()) return;
    if (!jobs_.empty()) shed_load();
    if (queue_->over_limit()) abandon();
  }

  void do_write() {
    if (writing_ || closed_) return;
    std::optional<std::string> frame = queue_->pop();
    if (!frame) return;
    write_data_ = std::move(*frame);
    writing_ = true;
    do_time_write();
    ws_.text(true);
    ws_.async_write(net::buffer(write_data_), handler(&ws_session::on_write));
  }

  /// A write that does not complete within the write timeout means the
  /// client stopped reading: close rather than hold its frames.
  void do_time_write() {
    const std::uint64_t write = ++write_count_;
    write_timer_.expires_after(state_->config.write_timeout);
    write_timer_.async_wait(guard([this, write](beast::error_code ec) {
      if (!ec && writing_ && write == write_count_) abandon();
    }));
  }

  void on_write(beast::error_code ec, std::size_t) {
    writing_ = false;
    write_timer_.cancel();
    if (ec) return abandon();
    do_write();
  }

  /// Ends the connection and cancels every request on it. The socket goes
  /// first: a cancel that throws (out of memory) must not leave it open.
  void abandon() noexcept {
    if (closed_) return;
    closed_ = true;
    beast::error_code ignored;
    beast::get_lowest_layer(ws_).socket().shutdown(tcp::socket::shutdown_both, ignored);
    beast::get_lowest_layer(ws_).socket().close(ignored);
    std::map<std::string, std::shared_ptr<generation_job>> jobs = std::move(jobs_);
    jobs_.clear();
    try {
      write_timer_.cancel();
      for (auto& [key, job] : jobs) job->cancel();
    } catch (...) {
      note_handler_exception(*state_, "a WebSocket connection", std::current_exception());
    }
  }

  websocket::stream<beast::tcp_stream> ws_;
  std::shared_ptr<server_state> state_;
  std::optional<connection_slot> slot_;
  net::steady_timer write_timer_;
  std::optional<http::request<http::empty_body>> handshake_;  ///< until the handshake completes
  beast::flat_buffer read_buffer_;
  std::shared_ptr<outgoing_queue> queue_;
  std::map<std::string, std::shared_ptr<generation_job>> jobs_;  ///< running requests by client id (JSON)
  std::uint64_t origin_;  ///< this socket's engine origin: the prompts of all its requests share one bound
  std::string write_data_;
  bool writing_ = false;
  std::uint64_t write_count_ = 0;  ///< tells a stale write timeout from the current one
  bool closed_ = false;
};

void start_ws_session(beast::tcp_stream stream, http::request<http::empty_body> handshake, std::string request_id,
                      std::shared_ptr<server_state> state) {
  std::make_shared<ws_session>(std::move(stream), std::move(state))->run(std::move(handshake), std::move(request_id));
}

}  // namespace troupe::api::detail

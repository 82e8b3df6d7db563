// The WebSocket at /admin/stream: a snapshot of the engine (gauges, rates
// and latency quantiles since the previous one, the request table) every
// interval, until the client closes. Snapshots are built on the worker pool
// (they wait on the scheduler), written on the connection's strand, one at a
// time: a slow reader delays its own next snapshot, nothing else.

#include <boost/asio/dispatch.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket/stream.hpp>
#include <boost/json/serialize.hpp>
#include <optional>

#include "api/http/admin_snapshot.hpp"
#include "api/http/server_internal.hpp"
#include "api/http/ws_options.hpp"

namespace troupe::api::detail {

namespace http = beast::http;
namespace websocket = beast::websocket;

namespace {

class admin_stream_session final : public closable, public std::enable_shared_from_this<admin_stream_session> {
 public:
  admin_stream_session(beast::tcp_stream&& stream, double interval_s, std::shared_ptr<server_state> state)
      : ws_(std::move(stream)),
        state_(std::move(state)),
        timer_(ws_.get_executor()),
        interval_(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(interval_s))) {}

  void run(http::request<http::empty_body> handshake, std::string request_id) {
    slot_.emplace(*state_, weak_from_this());
    set_websocket_options(ws_, state_->config, request_id);
    ws_.read_message_max(4096);  // the client has nothing to say beyond close
    handshake_.emplace(std::move(handshake));
    net::dispatch(ws_.get_executor(), [self = shared_from_this()] {
      self->ws_.async_accept(*self->handshake_, beast::bind_front_handler(&admin_stream_session::on_accept, self));
    });
  }

  void close() override {
    net::post(ws_.get_executor(), [self = shared_from_this()] { self->abandon(); });
  }

 private:
  void on_accept(beast::error_code ec) {
    handshake_.reset();
    if (ec) return abandon();
    do_read();
    do_snapshot();
  }

  // Reads only to notice the close (and answer pings); messages are ignored.
  void do_read() {
    ws_.async_read(incoming_, beast::bind_front_handler(&admin_stream_session::on_read, shared_from_this()));
  }

  void on_read(beast::error_code ec, std::size_t) {
    if (ec) return abandon();
    incoming_.clear();
    do_read();
  }

  void do_snapshot() {
    if (closed_) return;
    net::post(state_->workers, [self = shared_from_this()] {
      engine& engine = *self->state_->routes.engine;
      engine_stats stats = engine.stats();
      const std::vector<request_info> requests = engine.list_requests();
      const auto now = std::chrono::steady_clock::now();
      const double interval = self->previous_ ? std::chrono::duration<double>(now - self->previous_at_).count() : 0;
      auto text = std::make_shared<std::string>(boost::json::serialize(
          admin_snapshot_json(stats, self->previous_ ? &*self->previous_ : nullptr, interval, requests)));
      self->previous_ = std::move(stats);
      self->previous_at_ = now;
      net::post(self->ws_.get_executor(), [self, text] { self->do_write(text); });
    });
  }

  void do_write(const std::shared_ptr<std::string>& text) {
    if (closed_) return;
    ws_.text(true);
    ws_.async_write(net::buffer(*text),
                    [self = shared_from_this(), text](beast::error_code ec, std::size_t) { self->on_write(ec); });
  }

  void on_write(beast::error_code ec) {
    if (ec) return abandon();
    timer_.expires_after(interval_);
    timer_.async_wait([self = shared_from_this()](beast::error_code wait_ec) {
      if (!wait_ec) self->do_snapshot();
    });
  }

  void abandon() {
    if (closed_) return;
    closed_ = true;
    timer_.cancel();
    beast::error_code ignored;
    beast::get_lowest_layer(ws_).socket().shutdown(tcp::socket::shutdown_both, ignored);
    beast::get_lowest_layer(ws_).close();
  }

  websocket::stream<beast::tcp_stream> ws_;
  std::shared_ptr<server_state> state_;
  net::steady_timer timer_;
  std::chrono::steady_clock::duration interval_;
  std::optional<http::request<http::empty_body>> handshake_;
  std::optional<connection_slot> slot_;
  beast::flat_buffer incoming_;
  std::optional<engine_stats> previous_;  ///< touched only by the one snapshot in flight
  std::chrono::steady_clock::time_point previous_at_;
  bool closed_ = false;
};

}  // namespace

void start_admin_stream_session(beast::tcp_stream stream, http::request<http::empty_body> handshake,
                                std::string request_id, double interval_s, std::shared_ptr<server_state> state) {
  std::make_shared<admin_stream_session>(std::move(stream), interval_s, std::move(state))
      ->run(std::move(handshake), std::move(request_id));
}

}  // namespace troupe::api::detail

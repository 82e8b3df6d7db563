// The WebSocket at /admin/stream: a snapshot of the engine (gauges, rates
// and latency quantiles since the previous one, the request table) every
// interval, until the client closes. Snapshots are built on the worker pool
// (they wait on the scheduler), written on the connection's strand, one at a
// time: a slow reader delays its own next snapshot, nothing else.

#include <boost/asio/dispatch.hpp>
#include <boost/asio/steady_timer.hpp>
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

class admin_stream_session final : public closable,
                                   public guarded_session<admin_stream_session>,
                                   public std::enable_shared_from_this<admin_stream_session> {
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
    net::dispatch(ws_.get_executor(),
                  guard([this] { ws_.async_accept(*handshake_, handler(&admin_stream_session::on_accept)); }));
  }

  void close() override {
    net::post(ws_.get_executor(), guard([this] { abandon(); }));
  }

  /// A handler of this connection threw (guarded()): it is closed.
  void on_handler_exception(std::exception_ptr error) noexcept {
    note_handler_exception(*state_, "an /admin/stream connection", error);
    abandon();
  }

 private:
  void on_accept(beast::error_code ec) {
    handshake_.reset();
    if (ec) return abandon();
    do_read();
    do_snapshot();
  }

  // Reads only to notice the close (and answer pings); messages are ignored.
  void do_read() { ws_.async_read(incoming_, handler(&admin_stream_session::on_read)); }

  void on_read(beast::error_code ec, std::size_t) {
    if (ec) return abandon();
    incoming_.clear();
    do_read();
  }

  void do_snapshot() {
    if (closed_) return;
    // A worker is not an I/O thread: what it throws closes the connection on its strand.
    net::post(state_->workers, [self = shared_from_this()] {
      try {
        auto text = std::make_shared<std::string>(self->snapshot());
        net::post(self->ws_.get_executor(), self->guard([self, text] { self->do_write(text); }));
      } catch (...) {
        net::post(self->ws_.get_executor(),
                  [self, error = std::current_exception()] { self->on_handler_exception(error); });
      }
    });
  }

  /// The next snapshot's JSON (on a worker: it waits on the scheduler).
  std::string snapshot() {
    engine& engine = *state_->routes.engine;
    engine_stats stats = engine.stats();
    const std::vector<request_info> requests = engine.list_requests();
    const auto now = std::chrono::steady_clock::now();
    const double interval = previous_ ? std::chrono::duration<double>(now - previous_at_).count() : 0;
    std::string text =
        boost::json::serialize(admin_snapshot_json(stats, previous_ ? &*previous_ : nullptr, interval, requests));
    previous_ = std::move(stats);
    previous_at_ = now;
    return text;
  }

  void do_write(const std::shared_ptr<std::string>& text) {
    if (closed_) return;
    ws_.text(true);
    ws_.async_write(net::buffer(*text), guard([this, text](beast::error_code ec, std::size_t) { on_write(ec); }));
  }

  void on_write(beast::error_code ec) {
    if (ec) return abandon();
    timer_.expires_after(interval_);
    timer_.async_wait(guard([this](beast::error_code wait_ec) {
      if (!wait_ec) do_snapshot();
    }));
  }

  void abandon() noexcept {
    if (closed_) return;
    closed_ = true;
    beast::error_code ignored;
    beast::get_lowest_layer(ws_).socket().shutdown(tcp::socket::shutdown_both, ignored);
    beast::get_lowest_layer(ws_).socket().close(ignored);
    try {
      timer_.cancel();
    } catch (...) {
      note_handler_exception(*state_, "an /admin/stream connection", std::current_exception());
    }
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

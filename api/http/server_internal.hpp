#pragma once
// Shared by the server's Beast translation units only (http_server.cpp,
// http_session*.cpp, ws_session.cpp, the admin listener and stream);
// nothing else includes Beast or Asio.

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "api/http/admin.hpp"
#include "api/http/fd_budget.hpp"
#include "api/http/generation_job.hpp"
#include "api/http/http_server.hpp"
#include "api/http/routes.hpp"

namespace troupe::api::detail {

namespace beast = boost::beast;
namespace net = boost::asio;
using tcp = net::ip::tcp;

/// One job's way onto its connection's strand. Engine sinks hold this, never
/// an executor: a sink may outlive the io_context, and an executor destroyed
/// after its io_context touches freed memory.
struct event_target {
  std::mutex mutex;
  std::optional<net::any_io_executor> strand;  ///< empty once the server stopped
};

/// Lets engine threads post onto session strands until the server stops;
/// afterwards their events are dropped.
class post_gate {
 public:
  /// A strand_post for `strand` (a session's), registered for close().
  strand_post make_post(net::any_io_executor strand);
  /// Detaches every target: later posts are dropped, no executor survives.
  void close();

 private:
  std::mutex mutex_;
  bool open_ = true;
  std::vector<std::weak_ptr<event_target>> targets_;
  std::size_t prune_at_ = 64;  ///< prune expired targets when the list reaches this size
};

/// A live connection the server closes at shutdown.
class closable {
 public:
  virtual ~closable() = default;
  /// Cancels the connection's requests and closes its socket (posted onto its strand).
  virtual void close() = 0;
};

/// State shared by the listener and every session.
struct server_state {
  server_state(engine& engine, server_config config);

  server_config config;
  route_context routes;
  std::atomic<bool> draining{false};
  std::shared_ptr<post_gate> gate = std::make_shared<post_gate>();
  in_flight_counter in_flight = std::make_shared<std::atomic<std::int64_t>>(0);
  std::atomic<int> connections{0};
  std::atomic<int> pending_responses{0};             ///< HTTP requests read and not yet answered
  std::atomic<std::uint64_t> handler_exceptions{0};  ///< escaped a handler on an I/O thread (http_server.hpp)
  std::atomic<std::uint64_t> next_stream_key{1};
  std::atomic<std::uint64_t> next_origin{1};  ///< each connection's engine origin (generation_request::origin)
  net::thread_pool workers;                   ///< runs route handlers off the I/O threads
  std::unique_ptr<admin_context> admin;       ///< the /admin endpoints' state (null when disabled)

  /// Registers a live session for close-at-shutdown; returns its ticket.
  std::uint64_t add_session(std::weak_ptr<closable> session);
  void remove_session(std::uint64_t ticket);
  /// Calls close() on every live session.
  void close_sessions();

 private:
  std::mutex sessions_mutex_;
  std::uint64_t next_ticket_ = 1;
  std::unordered_map<std::uint64_t, std::weak_ptr<closable>> sessions_;
};

/// Logs and counts an exception that escaped a handler on an I/O thread;
/// `where` names the connection (its request id), or says it was none.
void note_handler_exception(server_state& state, std::string_view where, const std::exception_ptr& error) noexcept;

/// Wraps a completion handler (or posted work) of `session`, which must
/// have `void on_handler_exception(std::exception_ptr) noexcept`: an
/// exception escaping the handler goes there (which notes it and closes
/// that connection) instead of up the I/O thread, whose other connections
/// go on. The wrapper holds `session` as the handler did.
template <class Session, class Handler>
auto guarded(std::shared_ptr<Session> session, Handler handler) {
  return [session = std::move(session), handler = std::move(handler)](auto&&... args) mutable {
    try {
      handler(std::forward<decltype(args)>(args)...);
    } catch (...) {
      session->on_handler_exception(std::current_exception());
    }
  };
}

/// handler() and guard() for a session class `Session`: one that derives
/// from this, from std::enable_shared_from_this<Session>, and has
/// on_handler_exception() (see guarded()).
template <class Session>
class guarded_session {
 protected:
  /// `member` of the session as a completion handler, guarded().
  template <class... Args>
  auto handler(void (Session::*member)(Args...)) {
    Session* self = static_cast<Session*>(this);
    return guarded(self->shared_from_this(), [self, member](Args... args) { (self->*member)(args...); });
  }

  /// `work` (a completion handler or posted work of the session), guarded().
  template <class Work>
  auto guard(Work work) {
    return guarded(static_cast<Session*>(this)->shared_from_this(), std::move(work));
  }
};

/// `post` (a job's way onto `session`'s strand) with every posted function
/// guarded() likewise; weak, so that a job the connection dropped does not
/// keep it alive.
template <class Session>
strand_post guarded_post(std::weak_ptr<Session> session, strand_post post) {
  return [post = std::move(post), session = std::move(session)](std::function<void()> work) {
    post([session, work = std::move(work)] {
      try {
        work();
      } catch (...) {
        if (auto owner = session.lock()) owner->on_handler_exception(std::current_exception());
      }
    });
  };
}

/// Counts a connection for its lifetime and registers it for shutdown.
class connection_slot {
 public:
  connection_slot(server_state& state, std::weak_ptr<closable> session);
  ~connection_slot();
  connection_slot(const connection_slot&) = delete;
  connection_slot& operator=(const connection_slot&) = delete;
  /// True when this connection is beyond max_connections.
  bool over_capacity() const { return over_capacity_; }

 private:
  server_state& state_;
  std::uint64_t ticket_;
  bool over_capacity_;
};

/// Opens, binds and listens `acceptor` on host:port; throws
/// std::runtime_error naming host:port when it cannot.
void open_listener(tcp::acceptor& acceptor, const std::string& host, std::uint16_t port);

/// The second listener of knob admin_port (admin_listener.cpp): its
/// connections serve the /admin endpoints only. Listens on construction
/// (throws as open_listener); accepts from start() until close().
class admin_listener {
 public:
  admin_listener(net::io_context& io, std::shared_ptr<server_state> state);
  /// Starts accepting (call once, before the I/O threads run or on them).
  void start();
  /// Closes the listening socket (posted onto its strand). Idempotent.
  void close();
  /// The bound port.
  std::uint16_t port() const;

 private:
  void do_accept();
  void on_accept(beast::error_code ec, tcp::socket socket);

  net::io_context& io_;
  std::shared_ptr<server_state> state_;
  tcp::acceptor acceptor_;
  net::steady_timer retry_timer_;  ///< the back-off after a failed accept
  accept_backoff backoff_;
};

/// Takes over a connection upgraded at /admin/stream (admin_stream_session.cpp):
/// pushes a snapshot every `interval_s` seconds until the client closes.
void start_admin_stream_session(beast::tcp_stream stream, beast::http::request<beast::http::empty_body> handshake,
                                std::string request_id, double interval_s, std::shared_ptr<server_state> state);

/// Serves HTTP on an accepted socket (http_session.cpp); `on_admin_port`:
/// accepted by the separate admin listener. Does not throw: a connection
/// that cannot be started is noted (note_handler_exception) and closed.
void start_http_session(tcp::socket socket, std::shared_ptr<server_state> state, bool on_admin_port);

/// Takes over a connection whose request asked for a WebSocket upgrade
/// (ws_session.cpp). `handshake` is that request's header only, released
/// once the handshake completes; `request_id` is echoed in the response.
void start_ws_session(beast::tcp_stream stream, beast::http::request<beast::http::empty_body> handshake,
                      std::string request_id, std::shared_ptr<server_state> state);

}  // namespace troupe::api::detail

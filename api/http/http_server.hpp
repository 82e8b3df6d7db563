#pragma once
// The HTTP/WebSocket server in front of an engine: OpenAI-compatible
// endpoints with SSE, the multiplexed WebSocket protocol, tokenize,
// health, metrics. No Beast or Asio types here (they stay in the .cpp files).
//
// Lifecycle for a signal-driven shutdown:
//   server.stop_accepting();            // new connections refused, /ready 503
//   engine.shutdown(drain);             // running requests finish or abort
//   server.wait_idle(timeout);          // responses flushed to clients
//   server.stop();                      // every connection closed, threads joined

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "api/http/request_limits.hpp"
#include "troupe/engine.hpp"

namespace troupe::api {

/// Everything the server needs besides the engine. Sizes in bytes. The
/// fields that are server knobs take their defaults from the registry
/// (config/knobs.cpp).
struct server_config {
  /// The server knobs at their registry defaults; request limits of a default engine_config.
  server_config();
  /// The server knobs in `knobs` (a store of server_knobs() or all_knobs());
  /// request limits from `engine`.
  server_config(const config_store& knobs, const engine_config& engine);

  std::string host;                           ///< address to listen on
  std::uint16_t port;                         ///< 0: any free port (read it back with http_server::port())
  int io_threads;                             ///< threads running the sockets
  int worker_threads;                         ///< threads running route handlers (they may wait on the engine)
  std::size_t max_body_bytes;                 ///< larger bodies: 413
  std::uint32_t max_header_bytes;             ///< larger headers: 431
  std::chrono::milliseconds idle_timeout;     ///< keep-alive wait for a request; WebSocket idle (pinged)
  std::chrono::milliseconds read_timeout;     ///< a request's first byte to its last (slowloris bound)
  std::chrono::milliseconds write_timeout;    ///< one write to a client that does not read
  int max_connections;                        ///< more: 503 and close (lowered when the open-file limit is short)
  std::string api_key;                        ///< empty: no authentication
  std::string prefix_cache_isolation;         ///< "none", "api_key" or "user": who shares cached prompt prefixes;
                                              ///< empty (knob left at its default): "api_key" when a key is set
  std::size_t max_stream_queue_bytes;         ///< outgoing queue per SSE response or WebSocket
  int max_ws_requests;                        ///< concurrent requests per WebSocket
  request_limits limits;                      ///< usually request_limits::from_engine_config; its sampling
                                              ///< defaults are resolved at start from default_sampling and the model
  model_sampling_defaults default_sampling;   ///< the default_* knobs (unset: the model's, then built-in)
  bool admin_enabled;                         ///< serve /admin (knob admin)
  int admin_port;                             ///< -1: /admin on `port`; else a second listener (0: any free port)
                                              ///< serving only /admin, and `port` none of it
  std::string admin_token;                    ///< empty: /admin answers loopback clients only
  std::vector<std::string> allowed_origins;   ///< cross-origin pages allowed /admin and /v1/ws ("*": any)
  std::string config_file;                    ///< where POST /admin/config/save writes (knob config; empty: nowhere)
  double admin_stream_interval_s;             ///< /admin/stream's default period, seconds
  int admin_audit_entries;                    ///< audit entries kept
  std::shared_ptr<const config_store> knobs;  ///< every knob's value at start, for GET /admin/config
  std::string version = "0.1.0";              ///< reported by /version
  /// Test hook, never for production: a request whose target contains it
  /// makes the I/O handler that read it throw std::bad_alloc (empty: never).
  std::string test_io_fault_marker;
};

/// See the file comment. Thread-safe.
class http_server {
 public:
  /// Raises the open-file limit for `config.max_connections` (lowering the
  /// cap when it cannot, see fd_budget.hpp), binds and listens (throws
  /// std::runtime_error naming host:port when it cannot, or naming knob
  /// admin_token when /admin would be open beyond loopback); serving starts
  /// with start(). `engine` must outlive the server.
  http_server(engine& engine, server_config config);
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  /// Starts the I/O and worker threads.
  void start();
  /// The bound port (useful with port 0).
  std::uint16_t port() const;
  /// The bound admin port; 0 when the admin endpoints share port().
  std::uint16_t admin_port() const;
  /// Closes the listening socket; generation requests on open connections
  /// get 503 shutting_down, /ready turns 503. Idempotent.
  void stop_accepting();
  /// Waits until no engine request and no HTTP response is in flight, up to
  /// `timeout`; true when idle.
  bool wait_idle(std::chrono::milliseconds timeout);
  /// Closes every connection (their engine requests are cancelled) and joins
  /// the threads. Idempotent; the destructor calls it.
  void stop();

  /// Engine requests submitted and not yet finished, failed or cancelled.
  std::int64_t active_requests() const;
  /// Open client connections (HTTP and WebSocket).
  int active_connections() const;
  /// The connection cap in force: max_connections, or less when the open-file limit is short.
  int max_connections() const;
  /// Accepts that failed (out of file descriptors and the like), each followed by a back-off.
  std::uint64_t accept_failures() const;
  /// Exceptions that escaped a handler on an I/O thread (each closed its
  /// connection; the thread served on).
  std::uint64_t handler_exceptions() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace troupe::api

// The listener and the server's lifecycle. Sessions live in http_session.cpp
// and ws_session.cpp.

#include "api/http/http_server.hpp"

#include <spdlog/spdlog.h>
#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <stdexcept>
#include <thread>

#include "api/http/fd_budget.hpp"
#include "api/http/server_internal.hpp"

namespace troupe::api {

using namespace detail;

strand_post post_gate::make_post(net::any_io_executor strand) {
  auto target = std::make_shared<event_target>();
  {
    std::lock_guard lock(mutex_);
    if (open_) target->strand = std::move(strand);
    if (targets_.size() >= prune_at_) {
      std::erase_if(targets_, [](const std::weak_ptr<event_target>& entry) { return entry.expired(); });
      prune_at_ = std::max<std::size_t>(64, 2 * targets_.size());
    }
    targets_.push_back(target);
  }
  return [target](std::function<void()> work) {
    std::lock_guard lock(target->mutex);
    if (target->strand) net::post(*target->strand, std::move(work));
  };
}

void post_gate::close() {
  std::lock_guard lock(mutex_);
  open_ = false;
  for (const std::weak_ptr<event_target>& entry : targets_) {
    if (auto target = entry.lock()) {
      std::lock_guard target_lock(target->mutex);
      target->strand.reset();
    }
  }
  targets_.clear();
}

server_state::server_state(engine& engine, server_config server_config)
    : config(std::move(server_config)), workers(static_cast<std::size_t>(std::max(1, config.worker_threads))) {
  routes.engine = &engine;
  routes.model = engine.info();
  request_limits limits = config.limits;
  limits.sampling = sampling_defaults::resolve(config.default_sampling, routes.model.sampling_defaults);
  routes.limits = std::make_shared<live_request_limits>(std::move(limits));
  routes.api_key = config.api_key;
  routes.allowed_origins = config.allowed_origins;
  routes.isolation = parse_cache_isolation(config.prefix_cache_isolation, !config.api_key.empty());
  routes.api_key_salt = config.api_key.empty() ? 0 : cache_salt_of("api_key", config.api_key);
  routes.version = config.version;
  routes.started_at =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  routes.draining = &draining;
  routes.handler_exceptions = &handler_exceptions;
  admin = make_admin_context(config);
  if (admin) {
    admin->limits = routes.limits;
    admin->model_sampling = routes.model.sampling_defaults;
  }
  routes.admin = admin.get();
  routes.separate_admin_port = admin != nullptr && config.admin_port >= 0;
}

std::uint64_t server_state::add_session(std::weak_ptr<closable> session) {
  std::lock_guard lock(sessions_mutex_);
  const std::uint64_t ticket = next_ticket_++;
  sessions_.emplace(ticket, std::move(session));
  return ticket;
}

void server_state::remove_session(std::uint64_t ticket) {
  std::lock_guard lock(sessions_mutex_);
  sessions_.erase(ticket);
}

void server_state::close_sessions() {
  std::vector<std::shared_ptr<closable>> live;
  {
    std::lock_guard lock(sessions_mutex_);
    for (const auto& [ticket, session] : sessions_) {
      if (auto strong = session.lock()) live.push_back(std::move(strong));
    }
  }
  for (const auto& session : live) session->close();
}

void detail::note_handler_exception(server_state& state, std::string_view where,
                                    const std::exception_ptr& error) noexcept {
  ++state.handler_exceptions;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    spdlog::error("an I/O handler ({}) threw: {}; the I/O thread serves on", where, e.what());
  } catch (...) {
    spdlog::error("an I/O handler ({}) threw a non-standard exception; the I/O thread serves on", where);
  }
}

connection_slot::connection_slot(server_state& state, std::weak_ptr<closable> session)
    : state_(state),
      ticket_(state.add_session(std::move(session))),
      over_capacity_(state.connections.fetch_add(1) >= state.config.max_connections) {}

connection_slot::~connection_slot() {
  state_.connections.fetch_sub(1);
  state_.remove_session(ticket_);
}

namespace {

/// `config` with max_connections lowered to what the open-file limit (raised
/// first where the hard limit allows) can carry.
server_config within_fd_budget(server_config config) {
  config.max_connections = raise_open_file_limit(config.max_connections).connection_cap;
  return config;
}

}  // namespace

struct http_server::impl {
  impl(engine& engine, server_config config)
      : state(std::make_shared<server_state>(engine, within_fd_budget(std::move(config)))),
        acceptor(net::make_strand(io)),
        accept_timer(acceptor.get_executor()) {}

  void listen();
  void do_accept();
  void on_accept(beast::error_code ec, tcp::socket socket);
  void on_accept_failed(beast::error_code ec);
  /// One I/O thread's loop: runs the io_context until it stops.
  void serve();

  // Destroyed in reverse order: the io_context (and every session still in
  // it) goes before the state the sessions point into.
  std::shared_ptr<server_state> state;
  net::io_context io;
  tcp::acceptor acceptor;
  net::steady_timer accept_timer;  ///< the back-off after a failed accept (on the acceptor's strand)
  accept_backoff backoff;
  std::atomic<std::uint64_t> accept_failures{0};
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  std::once_flag stopped;
  std::unique_ptr<admin_listener> admin;  ///< knob admin_port's listener; null when /admin shares the port
};

void http_server::impl::listen() {
  open_listener(acceptor, state->config.host, state->config.port);
  if (state->config.admin_enabled && state->config.admin_port >= 0) admin = std::make_unique<admin_listener>(io, state);
}

void http_server::impl::do_accept() {
  acceptor.async_accept(net::make_strand(io),
                        [this](beast::error_code ec, tcp::socket socket) { on_accept(ec, std::move(socket)); });
}

void http_server::impl::on_accept(beast::error_code ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
  if (ec) return on_accept_failed(ec);
  if (const std::uint64_t failures = backoff.on_success()) {
    spdlog::info("accepting connections again after {} failed accepts", failures);
  }
  start_http_session(std::move(socket), state, /*on_admin_port=*/false);
  do_accept();
}

/// Out of file descriptors (or another accept error): the pending connection
/// stays in the backlog and would fail again at once, so wait before the
/// next try instead of spinning; one log line per episode.
void http_server::impl::on_accept_failed(beast::error_code ec) {
  ++accept_failures;
  if (!backoff.in_episode()) {
    spdlog::warn("accept failed: {} ({} connections open); retrying with back-off until it succeeds", ec.message(),
                 state->connections.load());
  }
  accept_timer.expires_after(backoff.on_failure());
  accept_timer.async_wait([this](beast::error_code wait_ec) {
    if (wait_ec == net::error::operation_aborted || !acceptor.is_open()) return;
    do_accept();
  });
}

http_server::http_server(engine& engine, server_config config)
    : impl_(std::make_unique<impl>(engine, std::move(config))) {
  impl_->listen();
}

http_server::~http_server() { stop(); }

void http_server::start() {
  if (!impl_->threads.empty()) return;
  impl_->work.emplace(impl_->io.get_executor());
  impl_->do_accept();
  if (impl_->admin) impl_->admin->start();
  const int count = std::max(1, impl_->state->config.io_threads);
  for (int i = 0; i < count; ++i) impl_->threads.emplace_back([this] { impl_->serve(); });
}

// Sessions catch what their own handlers throw (and close that
// connection); what escapes another handler (a listener's, a timer's) must not
// end the thread, and with it every connection it serves: note it and run
// again (an io_context may be run again after a handler threw).
void http_server::impl::serve() {
  for (;;) {
    try {
      io.run();
      return;
    } catch (...) {
      note_handler_exception(*state, "outside a connection", std::current_exception());
    }
  }
}

std::uint16_t http_server::admin_port() const { return impl_->admin ? impl_->admin->port() : 0; }

std::uint16_t http_server::port() const {
  beast::error_code ec;
  const tcp::endpoint endpoint = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : endpoint.port();
}

void http_server::stop_accepting() {
  impl_->state->draining = true;
  net::post(impl_->acceptor.get_executor(), [this] {
    beast::error_code ec;
    impl_->acceptor.close(ec);
    impl_->accept_timer.cancel();
  });
  if (impl_->admin) impl_->admin->close();
}

bool http_server::wait_idle(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (active_requests() > 0 || impl_->state->pending_responses.load() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void http_server::stop() {
  std::call_once(impl_->stopped, [this] {
    stop_accepting();
    impl_->state->gate->close();
    impl_->state->close_sessions();
    // Closed sockets complete their pending operations; give them a moment to unwind.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (active_connections() > 0 && std::chrono::steady_clock::now() < deadline && !impl_->threads.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    impl_->work.reset();
    impl_->io.stop();
    for (std::thread& thread : impl_->threads) thread.join();
    impl_->threads.clear();
    // Last, so no I/O thread can post route work after the pool finished; what
    // the workers post back lands in the stopped io_context and is destroyed with it.
    impl_->state->workers.join();
  });
}

std::int64_t http_server::active_requests() const { return impl_->state->in_flight->load(); }

int http_server::active_connections() const { return impl_->state->connections.load(); }

int http_server::max_connections() const { return impl_->state->config.max_connections; }

std::uint64_t http_server::accept_failures() const { return impl_->accept_failures.load(); }

std::uint64_t http_server::handler_exceptions() const { return impl_->state->handler_exceptions.load(); }

}  // namespace troupe::api

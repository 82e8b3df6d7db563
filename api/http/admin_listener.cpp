// The separate admin port (knob admin_port): a second acceptor whose
// connections are HTTP sessions that serve the /admin endpoints only.

#include <spdlog/spdlog.h>
#include <boost/asio/strand.hpp>
#include <stdexcept>

#include "api/http/server_internal.hpp"

namespace troupe::api::detail {

void open_listener(tcp::acceptor& acceptor, const std::string& host, std::uint16_t port) {
  beast::error_code ec;
  const auto address = net::ip::make_address(host, ec);
  if (ec) throw std::runtime_error("cannot listen on '" + host + "': not an IP address");
  const tcp::endpoint endpoint(address, port);
  const std::string where = host + ":" + std::to_string(port);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("cannot listen on " + where + ": " + ec.message());
}

admin_listener::admin_listener(net::io_context& io, std::shared_ptr<server_state> state)
    : io_(io), state_(std::move(state)), acceptor_(net::make_strand(io)), retry_timer_(acceptor_.get_executor()) {
  open_listener(acceptor_, state_->config.host, static_cast<std::uint16_t>(state_->config.admin_port));
}

void admin_listener::start() { do_accept(); }

void admin_listener::close() {
  net::post(acceptor_.get_executor(), [this] {
    beast::error_code ignored;
    acceptor_.close(ignored);
    retry_timer_.cancel();
  });
}

std::uint16_t admin_listener::port() const {
  beast::error_code ec;
  const tcp::endpoint endpoint = acceptor_.local_endpoint(ec);
  return ec ? 0 : endpoint.port();
}

void admin_listener::do_accept() {
  acceptor_.async_accept(net::make_strand(io_),
                         [this](beast::error_code ec, tcp::socket socket) { on_accept(ec, std::move(socket)); });
}

void admin_listener::on_accept(beast::error_code ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
  if (ec) {
    // Out of descriptors and the like: the main listener logs the episode; wait rather than spin.
    retry_timer_.expires_after(backoff_.on_failure());
    retry_timer_.async_wait([this](beast::error_code wait_ec) {
      if (wait_ec != net::error::operation_aborted && acceptor_.is_open()) do_accept();
    });
    return;
  }
  backoff_.on_success();
  start_http_session(std::move(socket), state_, /*on_admin_port=*/true);
  do_accept();
}

}  // namespace troupe::api::detail

#pragma once
// Noticing that a client left while its request runs and nothing is being
// read from its connection. Beast/Asio: included by http_session.hpp only.

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <cstdint>
#include <functional>

namespace troupe::api::detail {

/// Waits for the socket to turn readable and reads whatever arrived without
/// blocking: bytes the client pipelined go into the session's read buffer
/// (up to a bound; the next request is parsed from there), EOF or an error
/// means the client left. Pipelined bytes therefore never hide a close. Each
/// start() supersedes the previous watch; run it on the connection's strand.
class disconnect_watch {
 public:
  /// Watches `socket` until the peer leaves (then calls `on_gone`), until
  /// `needed` turns false, or until `pipelined` holds `limit` bytes (the
  /// rest is left in the socket and the watch ends: reading on would buffer
  /// without bound). `socket` and `pipelined` must outlive the watch; the
  /// callbacks are what keeps their owner alive.
  void start(boost::asio::ip::tcp::socket& socket, boost::beast::flat_buffer& pipelined, std::size_t limit,
             std::function<bool()> needed, std::function<void()> on_gone);

 private:
  std::uint64_t generation_ = 0;  ///< the live watch's number; older completions are ignored
};

}  // namespace troupe::api::detail

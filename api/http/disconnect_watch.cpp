#include "api/http/disconnect_watch.hpp"

#include <algorithm>
#include <boost/asio/error.hpp>

namespace troupe::api::detail {

namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr std::size_t read_chunk_bytes = 4096;

enum class readable { nothing_more, peer_gone, limit_reached };

/// Drains what the socket holds into `buffer` without blocking (a readiness
/// report can be stale, and blocking would hold the connection's strand).
readable read_available(tcp::socket& socket, boost::beast::flat_buffer& buffer, std::size_t limit) {
  boost::system::error_code ec;
  socket.non_blocking(true, ec);
  while (!ec) {
    if (buffer.size() >= limit) return readable::limit_reached;
    const std::size_t room = std::min(read_chunk_bytes, limit - buffer.size());
    buffer.commit(socket.read_some(buffer.prepare(room), ec));
  }
  if (ec == net::error::would_block || ec == net::error::try_again) return readable::nothing_more;
  return readable::peer_gone;  // EOF, reset or another error: the client is not coming back
}

}  // namespace

void disconnect_watch::start(tcp::socket& socket, boost::beast::flat_buffer& pipelined, std::size_t limit,
                             std::function<bool()> needed, std::function<void()> on_gone) {
  const std::uint64_t generation = ++generation_;
  socket.async_wait(tcp::socket::wait_read, [this, &socket, &pipelined, limit, generation, needed = std::move(needed),
                                             on_gone = std::move(on_gone)](boost::system::error_code ec) mutable {
    if (generation != generation_ || ec == net::error::operation_aborted || !needed()) return;
    switch (ec ? readable::peer_gone : read_available(socket, pipelined, limit)) {
      case readable::nothing_more:
        return start(socket, pipelined, limit, std::move(needed), std::move(on_gone));
      case readable::peer_gone:
        return on_gone();
      case readable::limit_reached:
        return;
    }
  });
}

}  // namespace troupe::api::detail

#pragma once
// How many connections the process's open-file limit can carry, and the
// accept loop's back-off when file descriptors run out. No Beast or Asio.

#include <chrono>
#include <cstdint>

namespace troupe::api {

/// File descriptors kept free for everything but client connections (engine
/// files and sockets, logs, the listener, connections being refused with
/// 503), on top of those already open when the server starts.
inline constexpr std::uint64_t fd_headroom = 256;

/// The connection cap the open-file limit can honour: `max_connections`,
/// lowered to `fd_soft_limit - reserved_fds` (at least 1) when fewer
/// descriptors are left. `reserved_fds`: descriptors not for connections.
int connection_cap(int max_connections, std::uint64_t fd_soft_limit, std::uint64_t reserved_fds);

/// The outcome of raise_open_file_limit().
struct fd_budget {
  std::uint64_t soft_limit = 0;    ///< RLIMIT_NOFILE's soft limit afterwards
  std::uint64_t hard_limit = 0;    ///< RLIMIT_NOFILE's hard limit
  std::uint64_t reserved_fds = 0;  ///< open at start plus fd_headroom
  int connection_cap = 0;          ///< what max_connections becomes (see connection_cap())
};

/// Raises RLIMIT_NOFILE's soft limit (never lowers it; at most to the hard
/// limit) so `max_connections` connections fit beside the descriptors open
/// now plus fd_headroom, and returns the connection cap that limit allows.
/// Logs a warning naming both numbers when the cap is lower than asked.
fd_budget raise_open_file_limit(int max_connections);

/// Delays between accept attempts after failures (out of file descriptors
/// and the like): 50 ms doubling to 1 s, back to none on the first success.
class accept_backoff {
 public:
  static constexpr std::chrono::milliseconds first_delay{50};
  static constexpr std::chrono::milliseconds max_delay{1000};

  /// Records a failed accept; returns how long to wait before the next.
  std::chrono::milliseconds on_failure();
  /// Records a successful accept; returns the failures of the episode it ends (0: none).
  std::uint64_t on_success();
  /// True after a failure until the next success: log the first failure only.
  bool in_episode() const { return episode_failures_ > 0; }

 private:
  std::chrono::milliseconds delay_{0};
  std::uint64_t episode_failures_ = 0;
};

}  // namespace troupe::api

#include "api/http/fd_budget.hpp"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <system_error>

namespace troupe::api {

namespace {

/// Descriptors open in this process now (0 when /proc is not there).
std::uint64_t open_fd_count() {
  std::error_code ec;
  std::uint64_t count = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) ++count;
  return count;
}

std::uint64_t as_count(rlim_t limit) {
  return limit == RLIM_INFINITY ? std::numeric_limits<std::uint64_t>::max() : static_cast<std::uint64_t>(limit);
}

}  // namespace

int connection_cap(int max_connections, std::uint64_t fd_soft_limit, std::uint64_t reserved_fds) {
  const std::uint64_t available = fd_soft_limit > reserved_fds ? fd_soft_limit - reserved_fds : 0;
  const std::uint64_t cap =
      std::min<std::uint64_t>(static_cast<std::uint64_t>(std::max(1, max_connections)), available);
  return static_cast<int>(std::max<std::uint64_t>(1, cap));
}

fd_budget raise_open_file_limit(int max_connections) {
  fd_budget budget;
  budget.reserved_fds = open_fd_count() + fd_headroom;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    budget.connection_cap = max_connections;  // nothing known: trust the configuration
    return budget;
  }
  const std::uint64_t wanted = static_cast<std::uint64_t>(std::max(1, max_connections)) + budget.reserved_fds;
  if (as_count(limit.rlim_cur) < wanted) {
    rlimit raised = limit;
    raised.rlim_cur = static_cast<rlim_t>(std::min(wanted, as_count(limit.rlim_max)));
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  budget.soft_limit = as_count(limit.rlim_cur);
  budget.hard_limit = as_count(limit.rlim_max);
  budget.connection_cap = connection_cap(max_connections, budget.soft_limit, budget.reserved_fds);
  if (budget.connection_cap < max_connections) {
    spdlog::warn(
        "open-file limit {} (hard {}) cannot carry max_connections {} beside {} other descriptors: "
        "connections beyond {} get 503",
        budget.soft_limit, budget.hard_limit, max_connections, budget.reserved_fds, budget.connection_cap);
  }
  return budget;
}

std::chrono::milliseconds accept_backoff::on_failure() {
  ++episode_failures_;
  delay_ = delay_.count() == 0 ? first_delay : std::min(max_delay, delay_ * 2);
  return delay_;
}

std::uint64_t accept_backoff::on_success() {
  const std::uint64_t failures = episode_failures_;
  episode_failures_ = 0;
  delay_ = std::chrono::milliseconds{0};
  return failures;
}

}  // namespace troupe::api

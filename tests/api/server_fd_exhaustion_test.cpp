// Issue 15, defect 2: out of file descriptors, the listener backs off instead
// of spinning on accept, and serves again once descriptors are free.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "server_fixture.hpp"

namespace troupe::testing {
namespace {

using HttpServerFdExhaustion = server_fixture;

/// Puts RLIMIT_NOFILE back as it was, however the test ends.
struct fd_limit_restorer {
  fd_limit_restorer() { getrlimit(RLIMIT_NOFILE, &saved); }
  ~fd_limit_restorer() { restore(); }
  void restore() { setrlimit(RLIMIT_NOFILE, &saved); }
  rlimit saved{};
};

bool connect_to(int fd, std::uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
}

TEST_F(HttpServerFdExhaustion, AcceptBacksOffWhileOutOfDescriptorsAndServesAfterwards) {
  EXPECT_EQ(server->max_connections(), 64);  // the test's limit covers the configured cap
  // The clients' sockets come first: once the limit is down, this process
  // (server and clients alike) cannot open another descriptor.
  std::vector<int> clients;
  for (int i = 0; i < 4; ++i) clients.push_back(::socket(AF_INET, SOCK_STREAM, 0));
  for (int fd : clients) ASSERT_GE(fd, 0);
  fd_limit_restorer restorer;
  const int lowest_free = ::dup(clients[0]);
  ASSERT_GE(lowest_free, 0);
  ::close(lowest_free);
  rlimit exhausted = restorer.saved;
  exhausted.rlim_cur = static_cast<rlim_t>(lowest_free);  // no descriptor number left below the limit
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &exhausted), 0);
  // The kernel completes these handshakes into the backlog; accept() fails with EMFILE.
  for (int fd : clients) ASSERT_TRUE(connect_to(fd, port));
  ASSERT_TRUE(fake_engine::eventually([&] { return server->accept_failures() > 0; }));

  // Spinning retries would fail thousands of times a second; with the back-off
  // (50 ms doubling) a second holds at most 5 attempts, fewer on a loaded machine.
  const std::uint64_t before = server->accept_failures();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_LE(server->accept_failures() - before, 8u);
  EXPECT_EQ(server->active_connections(), 0);

  for (int fd : clients) ::close(fd);
  restorer.restore();
  expect_still_serving();  // within the back-off's last delay (at most 1 s)
}

}  // namespace
}  // namespace troupe::testing

// The connection cap the open-file limit allows, raising that limit, and the
// accept loop's back-off schedule.

#include "api/http/fd_budget.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>

namespace troupe::api {
namespace {

TEST(ConnectionCap, IsMaxConnectionsWhenTheLimitCoversIt) {
  EXPECT_EQ(connection_cap(1024, 1 << 20, 300), 1024);
  EXPECT_EQ(connection_cap(1024, 1024 + 300, 300), 1024);
}

TEST(ConnectionCap, ShrinksToTheDescriptorsLeftBesideTheReserve) {
  EXPECT_EQ(connection_cap(1024, 1024, 300), 724);
  EXPECT_EQ(connection_cap(1024, 1023 + 300, 300), 1023);
}

TEST(ConnectionCap, IsAtLeastOneConnection) {
  EXPECT_EQ(connection_cap(1024, 100, 300), 1);
  EXPECT_EQ(connection_cap(1024, 0, 0), 1);
  EXPECT_EQ(connection_cap(0, 1 << 20, 300), 1);
}

/// Puts RLIMIT_NOFILE back as it was, however the test ends.
struct fd_limit_restorer {
  fd_limit_restorer() { getrlimit(RLIMIT_NOFILE, &saved); }
  ~fd_limit_restorer() { setrlimit(RLIMIT_NOFILE, &saved); }
  rlimit saved{};
};

TEST(RaiseOpenFileLimit, RaisesTheSoftLimitTowardsTheHardOneAndNeverLowersIt) {
  fd_limit_restorer restorer;
  rlimit lowered = restorer.saved;
  lowered.rlim_cur = std::min<rlim_t>(lowered.rlim_max, 512);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);

  const fd_budget budget = raise_open_file_limit(2000);
  rlimit now{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
  EXPECT_EQ(budget.soft_limit, now.rlim_cur);
  EXPECT_GT(budget.reserved_fds, fd_headroom);  // stdin, stdout, stderr at least
  const std::uint64_t wanted = 2000 + budget.reserved_fds;
  EXPECT_EQ(budget.soft_limit, std::min<std::uint64_t>(wanted, budget.hard_limit));
  EXPECT_EQ(budget.connection_cap, connection_cap(2000, budget.soft_limit, budget.reserved_fds));

  const fd_budget again = raise_open_file_limit(10);  // needs less: the limit stays
  EXPECT_EQ(again.soft_limit, budget.soft_limit);
  EXPECT_EQ(again.connection_cap, 10);
}

TEST(AcceptBackoff, DoublesFrom50MillisecondsTo1SecondAndResetsOnSuccess) {
  accept_backoff backoff;
  EXPECT_FALSE(backoff.in_episode());
  const std::vector<int> expected = {50, 100, 200, 400, 800, 1000, 1000};
  for (int delay : expected) {
    EXPECT_EQ(backoff.on_failure().count(), delay);
    EXPECT_TRUE(backoff.in_episode());
  }
  EXPECT_EQ(backoff.on_success(), expected.size());
  EXPECT_FALSE(backoff.in_episode());
  EXPECT_EQ(backoff.on_success(), 0u);
  EXPECT_EQ(backoff.on_failure().count(), 50);
}

}  // namespace
}  // namespace troupe::api

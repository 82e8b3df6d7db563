// The intake's prepare queue (actors/core/prepare_queue): its three bounds,
// turns across origins, cancels of queued and running jobs, and deadlines.

#include "actors/core/prepare_queue.hpp"

#include <gtest/gtest.h>

#include <map>

namespace troupe {
namespace {

prepare_limits limits(int max_pending, int per_origin, int max_waiting = 1000) {
  prepare_limits out;
  out.max_pending = max_pending;
  out.max_pending_per_origin = per_origin;
  out.max_waiting = max_waiting;
  return out;
}

prepare_ticket push_ok(prepare_queue& queue, const std::string& id, std::uint64_t origin) {
  const prepare_push pushed = queue.push(id, origin, 0);
  EXPECT_FALSE(pushed.refusal) << id;
  return pushed.ticket;
}

TEST(PrepareQueue, RefusesPastTheGlobalBoundAndAdmitsAgainAfterAFinish) {
  prepare_queue queue(limits(2, 100));
  const prepare_ticket first = push_ok(queue, "a", 1);
  push_ok(queue, "b", 2);
  EXPECT_EQ(queue.push("c", 3, 0).refusal, prepare_refusal::pending_full);
  ASSERT_EQ(queue.pop(), first);
  EXPECT_EQ(queue.push("c", 3, 0).refusal, prepare_refusal::pending_full) << "a running job still counts";
  EXPECT_FALSE(queue.finish(first));
  EXPECT_FALSE(queue.push("c", 3, 0).refusal);
  EXPECT_EQ(queue.pending(), 2u);
}

TEST(PrepareQueue, RefusesPastThePerOriginBoundWhileOtherOriginsStillQueue) {
  prepare_queue queue(limits(100, 2));
  push_ok(queue, "a1", 7);
  push_ok(queue, "a2", 7);
  EXPECT_EQ(queue.push("a3", 7, 0).refusal, prepare_refusal::origin_full);
  EXPECT_EQ(queue.pending_of(7), 2);
  push_ok(queue, "b1", 8);
  push_ok(queue, "b2", 8);
  for (int i = 0; i < 5; ++i) push_ok(queue, "none" + std::to_string(i), 0);  // origin 0 is exempt
  EXPECT_EQ(queue.pending(), 9u);
}

TEST(PrepareQueue, CountsTheSchedulersQueueAgainstTheWaitingBound) {
  prepare_queue queue(limits(100, 100, 10));
  push_ok(queue, "a", 1);
  push_ok(queue, "b", 1);
  EXPECT_EQ(queue.push("c", 2, 8).refusal, prepare_refusal::waiting_full) << "2 pending + 8 waiting";
  EXPECT_FALSE(queue.push("c", 2, 7).refusal);
}

TEST(PrepareQueue, ServesOriginsInTurnsEachInArrivalOrder) {
  prepare_queue queue(limits(100, 100));
  std::map<prepare_ticket, std::string> names;
  for (const char* id : {"flood1", "flood2", "flood3", "flood4"}) names[push_ok(queue, id, 5)] = id;
  names[push_ok(queue, "small", 9)] = "small";
  names[push_ok(queue, "other", 2)] = "other";
  std::vector<std::string> order;
  while (const std::optional<prepare_ticket> ticket = queue.pop()) order.push_back(names.at(*ticket));
  // Origins in ascending turns from the first: 2, 5, 9, then 5 alone.
  EXPECT_EQ(order, (std::vector<std::string>{"other", "flood1", "small", "flood2", "flood3", "flood4"}));
  EXPECT_EQ(queue.queued(), 0u);
  EXPECT_EQ(queue.pending(), 6u) << "popped jobs run until finished";
}

TEST(PrepareQueue, ANewOriginWaitsAtMostOneJobPerBusyOrigin) {
  prepare_queue queue(limits(100, 100));
  for (std::uint64_t origin = 1; origin <= 3; ++origin) {
    for (int i = 0; i < 5; ++i) push_ok(queue, "flood" + std::to_string(i), origin);
  }
  queue.pop();
  queue.pop();  // origins 1 and 2 served; 3 is next
  const prepare_ticket small = push_ok(queue, "small", 9);
  int before = 0;
  for (std::optional<prepare_ticket> next = queue.pop(); next && *next != small; next = queue.pop()) ++before;
  EXPECT_LE(before, 3) << "more than one job of each of the three busy origins went first";
}

TEST(PrepareQueue, ACancelledQueuedJobIsRemovedAndNeverPopped) {
  prepare_queue queue(limits(100, 2));
  const prepare_ticket first = push_ok(queue, "a", 1);
  const prepare_ticket second = push_ok(queue, "b", 1);
  const prepare_cancel cancelled = queue.cancel("b");
  EXPECT_EQ(cancelled.removed, std::vector<prepare_ticket>{second});
  EXPECT_FALSE(cancelled.running);
  EXPECT_EQ(queue.pending_of(1), 1) << "the cancelled job no longer counts";
  EXPECT_EQ(queue.pop(), first);
  EXPECT_EQ(queue.pop(), std::nullopt);
  EXPECT_TRUE(queue.cancel("unknown").removed.empty());
}

TEST(PrepareQueue, ACancelledRunningJobIsReportedAtFinish) {
  prepare_queue queue(limits(100, 100));
  const prepare_ticket ticket = push_ok(queue, "a", 1);
  ASSERT_EQ(queue.pop(), ticket);
  const prepare_cancel cancelled = queue.cancel("a");
  EXPECT_TRUE(cancelled.removed.empty());
  EXPECT_TRUE(cancelled.running);
  EXPECT_EQ(queue.pending(), 1u) << "it runs on until it ends";
  EXPECT_TRUE(queue.finish(ticket)) << "its result must be dropped";
  EXPECT_EQ(queue.pending(), 0u);
}

TEST(PrepareQueue, QueuedJobsExpireAtTheirDeadlineEarliestFirstRunningOnesDoNot) {
  prepare_queue queue(limits(100, 100));
  const prepare_ticket running = queue.push("r", 0, 0, 1.0).ticket;
  const prepare_ticket later = queue.push("a", 1, 0, 5.0).ticket;
  const prepare_ticket sooner = queue.push("b", 2, 0, 3.0).ticket;
  const prepare_ticket never = push_ok(queue, "c", 3);
  ASSERT_EQ(queue.pop(), running);
  EXPECT_EQ(queue.next_deadline(), 3.0) << "a running job has no deadline here";
  EXPECT_TRUE(queue.expire(2.9).empty());
  EXPECT_EQ(queue.expire(5.0), (std::vector<prepare_ticket>{sooner, later}));
  EXPECT_EQ(queue.pending_of(1), 0) << "an expired job no longer counts";
  EXPECT_EQ(queue.next_deadline(), std::nullopt);
  EXPECT_TRUE(queue.cancel("a").removed.empty()) << "an expired job is gone";
  EXPECT_EQ(queue.pending(), 2u) << "the running job and the one without a deadline";
  EXPECT_FALSE(queue.finish(running));
  EXPECT_EQ(queue.pop(), never);
  EXPECT_EQ(queue.pop(), std::nullopt);
}

TEST(PrepareQueue, ACancelledJobLeavesNoDeadlineBehind) {
  prepare_queue queue(limits(100, 100));
  queue.push("a", 1, 0, 2.0);
  queue.push("b", 1, 0, 4.0);
  ASSERT_EQ(queue.cancel("a").removed.size(), 1u);
  EXPECT_EQ(queue.next_deadline(), 4.0);
}

TEST(PrepareQueue, JobsWithoutAnIdCannotBeCancelled) {
  prepare_queue queue(limits(100, 100));
  push_ok(queue, "", 1);
  EXPECT_TRUE(queue.cancel("").removed.empty());
  EXPECT_EQ(queue.queued(), 1u);
}

}  // namespace
}  // namespace troupe

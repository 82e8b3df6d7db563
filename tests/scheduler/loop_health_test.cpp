// Health: a step running too long reports the engine unhealthy while it
// runs; a failed executor or KV manager does so for good; the oldest step
// in flight, which the scheduler actor's hang check times.

#include <gtest/gtest.h>

#include "tests/scheduler/loop_driver.hpp"

namespace troupe::testing {
namespace {

TEST(LoopHealth, AStepRunningPastTheLimitIsReportedStuckUntilItReturns) {
  loop_driver d;
  d.submit("a", 100);
  const std::optional<planned_step> planned = d.plan();
  ASSERT_TRUE(planned);
  EXPECT_TRUE(d.loop.stats(30.0).healthy) << "30 s is the limit, not past it";
  const engine_stats stuck = d.loop.stats(31.0);
  EXPECT_FALSE(stuck.healthy);
  EXPECT_EQ(stuck.health_detail, "a step has been running for 31.000000 s");
  EXPECT_TRUE(d.loop.healthy()) << "stuck is reported, not remembered";
  d.now = 31.5;
  d.complete(planned->step);
  const engine_stats after = d.loop.stats(32.0);
  EXPECT_TRUE(after.healthy);
  EXPECT_EQ(after.health_detail, "");
}

// The scheduler actor's hang check times the step in flight sent earliest
// (when it went to the executor, after its drafts), and the next one once
// that one is answered.
TEST(LoopHealth, TheOldestStepInFlightIsTheOneSentEarliest) {
  loop_driver d;
  EXPECT_FALSE(d.loop.oldest_step_in_flight());
  d.submit("a", 100);
  const std::optional<planned_step> first = d.plan();
  ASSERT_TRUE(first);
  d.loop.on_dispatched(first->step.id, 2.0);
  d.now = 1.0;
  d.submit("b", 100);
  const std::optional<planned_step> second = d.plan();
  ASSERT_TRUE(second);
  ASSERT_EQ(second->next, after_planning::run);
  d.loop.on_dispatched(second->step.id, 3.0);
  EXPECT_EQ(d.loop.oldest_step_in_flight(), std::make_pair(first->step.id, 2.0));
  d.complete(first->step);
  EXPECT_EQ(d.loop.oldest_step_in_flight(), std::make_pair(second->step.id, 3.0));
  d.complete(second->step);
  EXPECT_FALSE(d.loop.oldest_step_in_flight());
}

TEST(LoopHealth, AFailedStepFailsTheEngineForGood) {
  loop_driver d;
  d.submit("a", 100);
  const std::optional<planned_step> planned = d.plan();
  ASSERT_TRUE(planned);
  const std::optional<engine_failure> failure = d.loop.on_step_failed(planned->step.id, "the executor failed", 1);
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->reason, "step 1: the executor failed");
  EXPECT_FALSE(d.loop.healthy());
  const engine_stats stats = d.loop.stats(2);
  EXPECT_FALSE(stats.healthy);
  EXPECT_EQ(stats.health_detail, "step 1: the executor failed");

  EXPECT_FALSE(d.loop.on_kv_failed("timeout", 2)) << "a failed engine fails once";
  EXPECT_EQ(d.loop.stats(2).health_detail, "step 1: the executor failed");
  const loop_submission late = d.submit("late");
  ASSERT_TRUE(late.error);
  EXPECT_EQ(late.error->kind, error_kind::internal);
  EXPECT_EQ(late.error->message, "the engine failed: step 1: the executor failed");
  EXPECT_FALSE(d.loop.begin_step(3)) << "no step is planned on a failed engine";
}

TEST(LoopHealth, AKvManagerThatDoesNotAnswerFailsTheEngine) {
  loop_driver d;
  d.submit("a", 100);
  const std::optional<engine_failure> failure = d.loop.on_kv_failed("request timed out", 1);
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->reason, "kv manager: request timed out");
  EXPECT_EQ(d.loop.stats(1).health_detail, "kv manager: request timed out");
}

TEST(LoopHealth, TheResultOfAStepDroppedAfterAFailureChangesNothing) {
  loop_driver d;
  d.submit("a", 100);
  const std::optional<planned_step> first = d.plan();
  d.submit("b", 100);
  const std::optional<planned_step> second = d.plan();
  ASSERT_TRUE(first && second);
  ASSERT_TRUE(d.loop.on_step_failed(first->step.id, "boom", 1));
  EXPECT_EQ(d.loop.num_steps_in_flight(), 0u) << "the failed step and every later one are dropped";
  EXPECT_FALSE(d.loop.on_step_failed(second->step.id, "boom", 1));
  EXPECT_EQ(d.loop.stats(1).health_detail, "step 1: boom");
}

}  // namespace
}  // namespace troupe::testing

// The failure fan-out: when the engine fails, which requests get which error.

#include <gtest/gtest.h>

#include <algorithm>

#include "tests/scheduler/loop_driver.hpp"

namespace troupe::testing {
namespace {

TEST(LoopFailure, EveryLiveRequestGetsTheReasonAndTheDoneOnesNothing) {
  loop_driver d;
  const request_handle done = d.submit("done", 1).handle;
  d.run_serially();
  ASSERT_EQ(d.finishes_of(done).size(), 1u);
  const request_handle a = d.submit("a", 100).handle;
  const request_handle b = d.submit("b", 100).handle;
  const std::optional<planned_step> planned = d.plan();
  ASSERT_TRUE(planned);

  std::optional<engine_failure> failure = d.loop.on_step_failed(planned->step.id, "device lost", 1);
  ASSERT_TRUE(failure);
  ASSERT_EQ(failure->errors.size(), 2u);
  std::sort(failure->errors.begin(), failure->errors.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  EXPECT_EQ(failure->errors[0].first, a);
  EXPECT_EQ(failure->errors[0].second.request_id, "a");
  EXPECT_EQ(failure->errors[1].first, b);
  EXPECT_EQ(failure->errors[1].second.request_id, "b");
  for (const auto& [handle, error] : failure->errors) {
    EXPECT_EQ(error.kind, error_kind::internal);
    EXPECT_EQ(error.message, "the engine failed: step " + std::to_string(planned->step.id) + ": device lost");
    EXPECT_EQ(error.param, "");
  }
  EXPECT_TRUE(failure->drains.empty());
}

TEST(LoopFailure, FailedRequestsAreAbortedInTheCoreAndForgotten) {
  loop_driver d;
  d.submit("a", 100);
  d.submit("b", 100);
  ASSERT_TRUE(d.loop.on_kv_failed("timeout", 1));
  EXPECT_FALSE(d.loop.handle_of("a"));
  EXPECT_FALSE(d.loop.handle_of("b"));
  EXPECT_FALSE(d.loop.core().has_unfinished_requests()) << "nothing held them: released at once";
  EXPECT_FALSE(d.loop.cancel("a", 1)) << "a cancel after the failure finds nothing";
}

TEST(LoopFailure, TheFailedRequestsBlocksGoBackToThePool) {
  loop_driver d;
  const std::int32_t total = d.kv.free_blocks();
  d.submit("a", 100);
  d.submit("b", 100);
  const std::optional<planned_step> planned = d.plan();
  ASSERT_TRUE(planned);
  ASSERT_EQ(planned->next, after_planning::run);
  ASSERT_LT(d.kv.free_blocks(), total);
  ASSERT_TRUE(d.loop.on_step_failed(planned->step.id, "device lost", 1));
  // Nothing runs any more, but the frees still reach the KV manager.
  const std::optional<planned_step> frees = d.plan();
  ASSERT_TRUE(frees) << "no step after the failure: the blocks stay taken";
  EXPECT_TRUE(frees->step.empty());
  EXPECT_EQ(d.kv.free_blocks(), total);
  EXPECT_FALSE(d.plan()) << "nothing left to free";
  EXPECT_FALSE(d.loop.healthy());
}

// Request a's prefill in flight, then request b submitted: what the tests below fail.
struct LoopFailureWithAStepInFlight : ::testing::Test {
  void SetUp() override {
    d.submit("a", 100);
    first = d.plan();
    ASSERT_TRUE(first);
    ASSERT_EQ(first->next, after_planning::run);
    d.submit("b", 100);
  }
  loop_driver d;
  const std::int32_t total = d.kv.free_blocks();
  std::optional<planned_step> first;
};

TEST_F(LoopFailureWithAStepInFlight, EveryStepInFlightAfterTheFailedOneIsAbandoned) {
  const std::optional<planned_step> second = d.plan();
  ASSERT_TRUE(second);
  ASSERT_EQ(second->next, after_planning::run) << "b's prefill runs beside a's";
  ASSERT_EQ(d.loop.num_steps_in_flight(), 2u);
  ASSERT_TRUE(d.loop.on_step_failed(first->step.id, "device lost", 1));
  EXPECT_EQ(d.loop.num_steps_in_flight(), 0u);
  EXPECT_FALSE(d.loop.core().has_unfinished_requests()) << "a request with rows in a dropped step is never released";
  d.plan();
  EXPECT_EQ(d.kv.free_blocks(), total);
  EXPECT_FALSE(d.loop.on_step_failed(second->step.id, "device lost", 1)) << "the later step's error changes nothing";
}

TEST_F(LoopFailureWithAStepInFlight, AStepPlannedAcrossTheFailureNeverRuns) {
  std::optional<kv_request> request = d.loop.begin_step(d.now);  // b's prefill, being planned
  ASSERT_TRUE(request);
  ASSERT_TRUE(d.loop.on_step_failed(first->step.id, "device lost", 1));
  while (auto again = d.loop.on_kv_reply(d.kv.plan(*request))) request = std::move(again);
  const planned_step taken = d.loop.take_step(d.now);
  EXPECT_TRUE(taken.step.empty()) << "a step planned across the failure was sent";
  EXPECT_FALSE(d.loop.core().has_unfinished_requests());
  d.plan();
  EXPECT_EQ(d.kv.free_blocks(), total);
}

TEST(LoopFailure, AFailedKvManagerIsNotAskedAgain) {
  loop_driver d;
  d.submit("a", 100);
  ASSERT_TRUE(d.plan());
  ASSERT_TRUE(d.loop.on_kv_failed("timeout", 1));
  EXPECT_TRUE(d.loop.core().has_pending_kv_updates()) << "a's blocks wait to be freed";
  EXPECT_FALSE(d.loop.begin_step(2));
}

}  // namespace
}  // namespace troupe::testing

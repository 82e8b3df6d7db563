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

}  // namespace
}  // namespace troupe::testing

// Steps in flight: the limit per overlap mode, the step-time average the
// deadline policy admits by, and the switch from serial to split overlap.

#include <gtest/gtest.h>

#include "tests/scheduler/loop_driver.hpp"

namespace troupe::testing {
namespace {

TEST(LoopOverlap, AnUnknownStepCostKeepsTwoStepsInFlight) {
  loop_driver d(small_loop_config(/*max_steps_in_flight=*/2, /*one_token_step_s=*/0));
  EXPECT_EQ(d.loop.overlap(), overlap_mode::alternate);
  d.submit("a", 100);
  ASSERT_TRUE(d.plan());
  d.submit("b", 100);
  ASSERT_TRUE(d.plan());
  d.submit("c", 100);
  EXPECT_FALSE(d.loop.begin_step(0)) << "two steps are in flight already";
  EXPECT_EQ(d.loop.num_steps_in_flight(), 2u);
}

TEST(LoopOverlap, ACostlyStepRunsAlone) {
  loop_driver d(small_loop_config(2, /*one_token_step_s=*/0.05));
  EXPECT_EQ(d.loop.overlap(), overlap_mode::serial);
  d.submit("a", 100);
  ASSERT_TRUE(d.plan());
  d.submit("b", 100);
  EXPECT_FALSE(d.loop.begin_step(0));
}

TEST(LoopOverlap, AnIdleLoopPlansNothing) {
  loop_driver d;
  EXPECT_FALSE(d.loop.begin_step(0));
  d.submit("a", 100);
  ASSERT_TRUE(d.loop.begin_step(0));
  EXPECT_FALSE(d.loop.begin_step(0)) << "one step is planned at a time";
}

TEST(LoopOverlap, TheStepTimeIsAMovingAverageOfRoundTrips) {
  loop_driver d;
  d.submit("a", 100);
  std::optional<planned_step> planned = d.plan();
  d.now = 0.1;
  d.complete(planned->step);
  EXPECT_DOUBLE_EQ(d.loop.step_time_s(), 0.1) << "the first round trip sets it";
  planned = d.plan();
  d.now = 0.3;
  d.complete(planned->step);
  EXPECT_DOUBLE_EQ(d.loop.step_time_s(), 0.9 * 0.1 + 0.1 * 0.2);
}

// A one-token step of 50 us against a millisecond between serial steps:
// splitting pays, and the loop switches once it has seen enough gaps.
TEST(LoopOverlap, ACheapStepSwitchesToSplitOverlapAfterEnoughSerialGaps) {
  loop_driver d(small_loop_config(2, /*one_token_step_s=*/0.00005));
  d.submit("a", 1000);
  std::optional<overlap_switch> switched;
  int results = 0;
  while (!switched && results < 100) {
    std::optional<planned_step> planned = d.plan();
    ASSERT_TRUE(planned && planned->next == after_planning::run);
    ASSERT_EQ(d.loop.num_steps_in_flight(), 1u) << "serial until the switch";
    d.now += 0.001;
    switched = d.complete(planned->step, /*execute_s=*/0.001).overlap_switched;
    ++results;
    d.now += 0.001;  // the executor idles while the next step is planned
  }
  ASSERT_TRUE(switched);
  EXPECT_EQ(results, 51) << "the first result has no gap before it; fifty gaps are enough to judge";
  EXPECT_EQ(switched->mode, overlap_mode::split);
  EXPECT_DOUBLE_EQ(switched->fixed_step_s, 0.00005);
  EXPECT_NEAR(switched->serial_gap_s, 0.001, 1e-9);
  EXPECT_EQ(d.loop.overlap(), overlap_mode::split);
  EXPECT_TRUE(d.loop.core().split_decodes());
}

// A step that waits 2 ms for its drafts between take_step and its dispatch:
// the executor idles then, but that is the draft round's cost (the turn-down
// weighs it); the gap between serial steps is still 0.1 ms, far below twice
// the 0.4 ms one-token step, so splitting would not pay.
TEST(LoopOverlap, TheWaitForDraftsIsNotAGapBetweenSteps) {
  loop_driver d(small_loop_config(2, /*one_token_step_s=*/0.0004));
  d.submit("a", 1000);
  for (int i = 0; i < 100; ++i) {
    std::optional<planned_step> planned = d.plan();
    ASSERT_TRUE(planned && planned->next == after_planning::run);
    d.now += 0.002;  // the draft round
    d.loop.on_dispatched(planned->step.id, d.now);
    d.now += 0.0004;
    EXPECT_FALSE(d.complete(planned->step, /*execute_s=*/0.0004).overlap_switched) << "step " << i;
    d.now += 0.0001;
  }
  EXPECT_EQ(d.loop.overlap(), overlap_mode::serial);
  EXPECT_NEAR(d.loop.step_time_s(), 0.0004, 1e-9) << "timed from the dispatch";
}

TEST(LoopOverlap, TheDraftersStepTimeSeedsTheDraftCosts) {
  scheduler_loop_config config = small_loop_config(2, 0.0004);
  EXPECT_EQ(scheduler_loop(config).core().speculation_costs().draft_round_s(1, 1), 0) << "no drafter";
  config.draft_one_token_step_s = 0.0002;
  scheduler_loop loop(config);
  EXPECT_DOUBLE_EQ(loop.core().speculation_costs().draft_round_s(1, 1), 0.0002);
  EXPECT_DOUBLE_EQ(loop.core().speculation_costs().draft_round_s(1, 3), 0.0006) << "three draft steps";
}

// A sequence that speculates from its first decode feeds no one-token step
// to measure: the step timed at load is the turn-down's cost of one
// (SpeculationCost.AOneTokenStepNeverMeasuredIsExtrapolatedFromLargerOnes).
TEST(LoopOverlap, TheTargetsStepTimeSeedsItsOneTokenCost) {
  const scheduler_loop seeded(small_loop_config(2, /*one_token_step_s=*/0.0004));
  EXPECT_DOUBLE_EQ(seeded.core().speculation_costs().target_step_s(1).value_or(0), 0.0004);
  const scheduler_loop unseeded(small_loop_config(2, /*one_token_step_s=*/0));
  EXPECT_FALSE(unseeded.core().speculation_costs().target_step_s(1));
}

// With two steps allowed in flight, the loop plans the next while the one
// sequence decodes; that plan is empty. When the step's result comes while
// the plan waits for its KV reply, the plan is stale: planning again at once
// runs the sequence's next token, where the timer for "nothing can run"
// left it waiting 5 ms (every other step of `troupe bench-actors
// --sequences 1`: 4.9 ms per step).
TEST(LoopOverlap, AResultThatComesWhileAnEmptyStepIsPlannedIsNotLeftToTheTimer) {
  loop_driver d(small_loop_config(/*max_steps_in_flight=*/2, /*one_token_step_s=*/0));
  d.submit("a", 100);
  std::optional<planned_step> running = d.plan();  // the prefill
  ASSERT_TRUE(running && running->next == after_planning::run);
  std::optional<kv_request> request = d.loop.begin_step(d.now);
  ASSERT_TRUE(request) << "a second step may be planned while the first runs";
  d.complete(running->step);  // the prefill's result, before the KV reply
  while (auto again = d.loop.on_kv_reply(d.kv.plan(*request))) request = std::move(again);
  const planned_step stale = d.loop.take_step(d.now);
  EXPECT_TRUE(stale.step.empty()) << "planned while the sequence's row was in flight";
  EXPECT_EQ(stale.next, after_planning::plan_again);
  const std::optional<planned_step> decode = d.plan();
  ASSERT_TRUE(decode);
  EXPECT_EQ(decode->next, after_planning::run);
  EXPECT_EQ(decode->step.sequences.size(), 1u);
}

TEST(LoopOverlap, ACostlyStepNeverSwitches) {
  loop_driver d(small_loop_config(2, /*one_token_step_s=*/0.05));
  d.submit("a", 1000);
  for (int i = 0; i < 100; ++i) {
    std::optional<planned_step> planned = d.plan();
    ASSERT_TRUE(planned);
    d.now += 0.05;
    EXPECT_FALSE(d.complete(planned->step, 0.05).overlap_switched);
    d.now += 0.001;
  }
  EXPECT_EQ(d.loop.overlap(), overlap_mode::serial);
  EXPECT_FALSE(d.loop.core().split_decodes());
}

}  // namespace
}  // namespace troupe::testing

// A step that failed on an intact backend (step_result::failure): exactly
// its requests fail, the engine stays healthy, every later step in flight
// is dropped and recomputed, and the failed requests' blocks go back to
// the pool without entering the prefix cache.

#include <gtest/gtest.h>

#include <deque>

#include "tests/scheduler/loop_driver.hpp"

namespace troupe::testing {
namespace {

step_result failed_result(std::uint64_t step) {
  step_result result;
  result.step = step;
  result.failure = "std::bad_alloc";
  return result;
}

// Request a's prefill in flight, then request b's beside it.
struct LoopStepFailure : ::testing::Test {
  void SetUp() override {
    a = d.submit("a", 8).handle;
    first = d.plan();
    ASSERT_TRUE(first);
    ASSERT_EQ(first->next, after_planning::run);
    b = d.submit("b", 8).handle;
  }
  /// Plans b's prefill as the second step in flight.
  void plan_second() {
    second = d.plan();
    ASSERT_TRUE(second);
    ASSERT_EQ(second->next, after_planning::run) << "b's prefill runs beside a's";
    ASSERT_EQ(d.loop.num_steps_in_flight(), 2u);
  }

  loop_driver d;
  const std::int32_t total = d.kv.free_blocks();
  request_handle a = 0;
  request_handle b = 0;
  std::optional<planned_step> first;
  std::optional<planned_step> second;
};

TEST_F(LoopStepFailure, OnlyTheStepsRequestsFailAndTheEngineServesOn) {
  plan_second();
  const step_outcome out = d.loop.on_step_result(failed_result(first->step.id), d.now);
  EXPECT_FALSE(out.failure) << "the engine failed";
  ASSERT_EQ(out.failed_requests.size(), 1u);
  EXPECT_EQ(out.failed_requests[0].first, a);
  const error_event& error = out.failed_requests[0].second;
  EXPECT_EQ(error.request_id, "a");
  EXPECT_EQ(error.kind, error_kind::internal);
  EXPECT_EQ(error.message, "the step running this request failed: std::bad_alloc");
  EXPECT_TRUE(out.events.events.finished.empty()) << "a failed request gets its error, no finish";
  EXPECT_TRUE(d.loop.healthy());
  EXPECT_EQ(d.loop.stats(d.now).step_failures, 1u);
  EXPECT_FALSE(d.loop.handle_of("a"));
  EXPECT_TRUE(d.loop.handle_of("b"));
  EXPECT_EQ(d.loop.num_steps_in_flight(), 0u) << "b's step, planned after the failed one, is dropped";

  // b's dropped step still runs on the executor; its result is stale.
  d.complete(second->step);
  d.run_serially();
  ASSERT_EQ(d.finishes_of(b).size(), 1u);
  EXPECT_EQ(d.finishes_of(b)[0].reason, finish_reason::length);
  EXPECT_EQ(d.finishes_of(b)[0].usage.completion_tokens, 8);
  EXPECT_TRUE(d.finishes_of(a).empty());
  EXPECT_FALSE(d.loop.core().has_unfinished_requests());
  EXPECT_EQ(d.kv.free_blocks(), total) << "blocks leaked";

  const request_handle c = d.submit("c", 3).handle;
  d.run_serially();
  ASSERT_EQ(d.finishes_of(c).size(), 1u) << "a later request is served";
  EXPECT_EQ(d.finishes_of(c)[0].usage.completion_tokens, 3);
}

TEST_F(LoopStepFailure, ItsBlocksAndThoseOfLaterStepsAreFreedWithoutCaching) {
  plan_second();
  d.loop.on_step_result(failed_result(first->step.id), d.now);
  const std::size_t before = d.kv.requests.size();
  d.plan();
  ASSERT_GT(d.kv.requests.size(), before);
  const kv_request& frees = d.kv.requests[before];
  ASSERT_EQ(frees.frees.size(), 2u) << "a's sequence and b's (recomputed)";
  for (const kv_free& free : frees.frees)
    EXPECT_TRUE(free.forget_prefix) << "a block the failed step may have half written stays findable";
}

TEST_F(LoopStepFailure, AStepPlannedAcrossTheFailureNeverRuns) {
  std::optional<kv_request> request = d.loop.begin_step(d.now);  // b's prefill, being planned
  ASSERT_TRUE(request);
  const step_outcome out = d.loop.on_step_result(failed_result(first->step.id), d.now);
  ASSERT_EQ(out.failed_requests.size(), 1u);
  while (auto again = d.loop.on_kv_reply(d.kv.plan(*request))) request = std::move(again);
  const planned_step taken = d.loop.take_step(d.now);
  EXPECT_TRUE(taken.step.empty()) << "a step planned across the failure may read a half-written block";
  EXPECT_TRUE(d.loop.handle_of("b"));
  d.run_serially();
  ASSERT_EQ(d.finishes_of(b).size(), 1u);
  EXPECT_EQ(d.finishes_of(b)[0].usage.completion_tokens, 8);
  EXPECT_EQ(d.kv.free_blocks(), total);
}

// The scheduler actor asks a drafter for b's step once it is taken, and
// a's step fails before the drafts come back: b's step is abandoned, so
// nothing of it runs (it has no block copies), and b is recomputed.
TEST_F(LoopStepFailure, AStepAbandonedWhileItsDraftsWereOutDoesNotRun) {
  plan_second();
  scheduled_step kept = second->step;
  EXPECT_TRUE(d.loop.settle_drafted(kept, d.now)) << "a step still in flight runs";
  EXPECT_EQ(kept.sequences.size(), second->step.sequences.size());
  EXPECT_EQ(kept.rows.size(), second->step.rows.size());
  d.loop.on_step_result(failed_result(first->step.id), d.now);
  scheduled_step abandoned = second->step;
  EXPECT_FALSE(d.loop.settle_drafted(abandoned, d.now)) << "b's abandoned step would feed a recomputed sequence";
  EXPECT_TRUE(abandoned.sequences.empty());
  d.run_serially();
  ASSERT_EQ(d.finishes_of(b).size(), 1u);
  EXPECT_EQ(d.finishes_of(b)[0].usage.completion_tokens, 8);
  EXPECT_EQ(d.kv.free_blocks(), total) << "blocks leaked";
}

// A malformed result fails the engine and drops its own step; b's step,
// taken after it and waiting for its drafts, must not run and must not
// stay in flight either, or its request would wait for its rows for good.
TEST_F(LoopStepFailure, NothingRunsAfterTheEngineFailedWhileTheDraftsWereOut) {
  plan_second();
  step_result malformed;
  malformed.step = first->step.id;
  malformed.samples.resize(first->step.rows.size() + 1);
  ASSERT_TRUE(d.loop.on_step_result(malformed, d.now).failure);
  ASSERT_TRUE(d.loop.core().has_step_in_flight(second->step.id)) << "the case this test is about";
  scheduled_step drafted = second->step;
  EXPECT_FALSE(d.loop.settle_drafted(drafted, d.now));
  EXPECT_FALSE(d.loop.core().has_step_in_flight(second->step.id));
  EXPECT_EQ(d.loop.num_steps_in_flight(), 0u);
  d.run_serially();
  EXPECT_FALSE(d.loop.core().has_unfinished_requests()) << "a request waits for the dropped step's rows";
  EXPECT_EQ(d.kv.free_blocks(), total) << "blocks leaked";
}

TEST_F(LoopStepFailure, AFailureOfADroppedStepChangesNothing) {
  plan_second();
  d.loop.on_step_result(failed_result(first->step.id), d.now);
  const step_outcome stale = d.loop.on_step_result(failed_result(second->step.id), d.now);
  EXPECT_TRUE(stale.failed_requests.empty()) << "b's sequences were already taken out of that step";
  EXPECT_EQ(d.loop.stats(d.now).step_failures, 1u);
  EXPECT_TRUE(d.loop.handle_of("b"));
}

TEST_F(LoopStepFailure, ADrainWaitingOnlyForTheFailedRequestIsAnswered) {
  d.loop.cancel("b", d.now);
  const drain_start drain = d.loop.drain(10, d.now);
  ASSERT_FALSE(drain.answer);
  const step_outcome out = d.loop.on_step_result(failed_result(first->step.id), d.now);
  ASSERT_EQ(out.events.drains.size(), 1u);
  EXPECT_EQ(out.events.drains[0].id, drain.id);
  EXPECT_TRUE(out.events.drains[0].drained);
}

// Three requests outgrow a 12-block pool while decoding, two steps in
// flight (each request submitted once the step before it runs, so that
// their decodes alternate between the steps): the first step planned with
// a swap-out while another is in flight meets that step's failure, while
// it is planned or once it is taken (its drafts out). Its sequences must
// not run, but its copies must: the swap-out is the only copy of its
// victim's K/V.
class LoopStepFailureSwap : public ::testing::TestWithParam<bool> {};

TEST_P(LoopStepFailureSwap, AStepPlannedBeforeTheFailureStillRunsItsSwapOuts) {
  const bool fails_once_taken = GetParam();
  scheduler_loop_config config = small_loop_config();
  config.scheduler = small_config({.budget = 64, .max_seqs = 8, .blocks = 12, .host_blocks = 32});
  config.scheduler.preemption = preemption_mode::swap;
  loop_driver d(config);
  int submitted = 0;
  const auto submit_next = [&] {
    if (submitted == 3) return;
    d.loop.submit("r" + std::to_string(submitted),
                  make_spec({.prompt_len = 8, .max_tokens = 40, .first_token = 1 + 100 * submitted}), d.now);
    ++submitted;
  };
  submit_next();
  std::deque<scheduled_step> in_flight;
  for (int round = 0; round < 1000; ++round) {
    if (std::optional<kv_request> request = d.loop.begin_step(d.now)) {
      bool swaps_out = false;
      for (;;) {
        const kv_reply reply = d.kv.plan(*request);
        for (const block_copy& copy : reply.copies) swaps_out |= copy.to == block_location::host;
        std::optional<kv_request> again = d.loop.on_kv_reply(reply);
        if (!again) break;
        request = std::move(again);
      }
      if (swaps_out && !in_flight.empty()) {
        planned_step taken;
        if (fails_once_taken) taken = d.loop.take_step(d.now);
        const step_outcome out = d.loop.on_step_result(failed_result(in_flight.front().id), d.now);
        EXPECT_FALSE(out.failed_requests.empty());
        if (fails_once_taken) {
          EXPECT_FALSE(taken.step.sequences.empty());
          EXPECT_TRUE(d.loop.settle_drafted(taken.step, d.now));
          EXPECT_EQ(d.loop.num_steps_in_flight(), 1u) << "its copies count as a step in flight";
        } else {
          taken = d.loop.take_step(d.now);
        }
        EXPECT_TRUE(taken.step.sequences.empty()) << "a step planned before the failure fed its sequences";
        EXPECT_TRUE(taken.step.rows.empty());
        EXPECT_FALSE(taken.step.copies.empty()) << "the victim's swap-out was dropped";
        EXPECT_EQ(taken.next, after_planning::run);
        return;
      }
      planned_step taken = d.loop.take_step(d.now);
      if (taken.next == after_planning::run) {
        in_flight.push_back(std::move(taken.step));
        submit_next();
      }
      if (taken.next == after_planning::run || taken.next == after_planning::plan_again) continue;
    }
    d.now += 0.01;
    if (in_flight.empty()) continue;
    d.complete(in_flight.front());
    in_flight.pop_front();
  }
  FAIL() << "no step swapped out while another was in flight";
}

INSTANTIATE_TEST_SUITE_P(FailsWhile, LoopStepFailureSwap, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "ItsDraftsAreOut" : "ItIsPlanned";
                         });

TEST(LoopStepFailureMalformed, AResultThatDoesNotFitItsStepStillFailsTheEngine) {
  loop_driver d;
  d.submit("a", 8);
  const std::optional<planned_step> planned = d.plan();
  ASSERT_TRUE(planned);
  step_result result;
  result.step = planned->step.id;
  result.samples.resize(planned->step.rows.size() + 1);
  const step_outcome out = d.loop.on_step_result(result, d.now);
  EXPECT_TRUE(out.failure);
  EXPECT_FALSE(d.loop.healthy());
}

}  // namespace
}  // namespace troupe::testing

// Draining: no new requests; the answer comes once every request is done,
// or at the deadline, when the requests left are aborted.

#include <gtest/gtest.h>

#include "tests/scheduler/loop_driver.hpp"

namespace troupe::testing {
namespace {

TEST(LoopDrain, AnIdleEngineDrainsAtOnceAndThenAdmitsNothing) {
  loop_driver d;
  const drain_start start = d.loop.drain(5, 0);
  EXPECT_EQ(start.answer, std::optional<bool>(true));
  const loop_submission late = d.submit("late");
  ASSERT_TRUE(late.error);
  EXPECT_EQ(late.error->kind, error_kind::shutting_down);
  EXPECT_EQ(late.error->message, "the engine is shutting down");
}

TEST(LoopDrain, ADrainIsAnsweredWhenTheLastRequestIsReleased) {
  loop_driver d;
  d.submit("a", 3);
  d.submit("b", 5);
  const drain_start start = d.loop.drain(60, 0);
  ASSERT_FALSE(start.answer);
  d.run_serially();
  ASSERT_EQ(d.drain_answers.count(start.id), 1u);
  EXPECT_TRUE(d.drain_answers[start.id]);
  EXPECT_EQ(d.finished.size(), 2u);
  for (const finish_event& finish : d.finished) EXPECT_EQ(finish.reason, finish_reason::length);
}

TEST(LoopDrain, AtTheDeadlineLiveRequestsAreAbortedAndTheDrainAnswered) {
  loop_driver d;
  const request_handle a = d.submit("a", 100).handle;
  const drain_start start = d.loop.drain(1.0, 0);
  ASSERT_FALSE(start.answer);
  EXPECT_TRUE(d.loop.on_tick(0.5).events.empty()) << "before the deadline a tick changes nothing";
  const loop_events events = d.loop.on_tick(1.0);
  d.record(events);
  ASSERT_EQ(d.finishes_of(a).size(), 1u);
  EXPECT_EQ(d.finishes_of(a)[0].reason, finish_reason::abort);
  EXPECT_EQ(d.drain_answers.at(start.id), true) << "nothing held the aborted request: drained";
  EXPECT_FALSE(d.loop.handle_of("a"));
}

TEST(LoopDrain, AtTheDeadlineARequestHeldByAStepInFlightFailsTheDrain) {
  loop_driver d;
  d.submit("a", 100);
  ASSERT_TRUE(d.plan());  // its prefill is in flight
  const drain_start first = d.loop.drain(1.0, 0);
  const drain_start second = d.loop.drain(5.0, 0);
  ASSERT_FALSE(first.answer);
  ASSERT_FALSE(second.answer);
  d.record(d.loop.on_tick(1.0));
  EXPECT_EQ(d.drain_answers.at(first.id), false);
  EXPECT_EQ(d.drain_answers.at(second.id), false) << "every pending drain is answered at the first deadline";
  EXPECT_TRUE(d.loop.core().has_unfinished_requests());
}

TEST(LoopDrain, AFailedEngineAnswersDrainsFalse) {
  loop_driver d;
  d.submit("a", 100);
  const std::optional<planned_step> planned = d.plan();
  ASSERT_TRUE(planned);
  const drain_start pending = d.loop.drain(60, 0);
  ASSERT_FALSE(pending.answer);
  const std::optional<engine_failure> failure = d.loop.on_step_failed(planned->step.id, "boom", 0.1);
  ASSERT_TRUE(failure);
  ASSERT_EQ(failure->drains.size(), 1u);
  EXPECT_EQ(failure->drains[0].id, pending.id);
  EXPECT_FALSE(failure->drains[0].drained);
}

TEST(LoopDrain, ADrainOnAFailedEngineWithRequestsLeftAnswersFalseAtOnce) {
  loop_driver d;
  d.submit("a", 100);
  const std::optional<planned_step> first = d.plan();  // a's prefill
  ASSERT_TRUE(first);
  d.submit("b", 100);
  ASSERT_TRUE(d.loop.begin_step(0.05));  // b's prefill, being planned when a's step fails
  ASSERT_TRUE(d.loop.on_step_failed(first->step.id, "boom", 0.1));
  ASSERT_TRUE(d.loop.core().has_unfinished_requests()) << "the step being planned still holds them";
  EXPECT_EQ(d.loop.drain(5, 0.2).answer, std::optional<bool>(false));
}

}  // namespace
}  // namespace troupe::testing

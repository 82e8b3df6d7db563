// The scheduler loop's requests by id: handles, duplicate ids, cancels that
// arrive before their request (bounded memory), stop-string finishes.

#include <gtest/gtest.h>

#include "tests/scheduler/loop_driver.hpp"

namespace troupe::testing {
namespace {

TEST(LoopRequests, AnIdMapsToItsHandleUntilTheRequestIsDone) {
  loop_driver d;
  const loop_submission a = d.submit("a", /*max_tokens=*/2);
  ASSERT_FALSE(a.error);
  EXPECT_EQ(d.loop.handle_of("a"), a.handle);
  EXPECT_FALSE(d.loop.handle_of("b"));
  d.run_serially();
  ASSERT_EQ(d.finishes_of(a.handle).size(), 1u);
  EXPECT_TRUE(d.finishes_of(a.handle)[0].request_done);
  EXPECT_FALSE(d.loop.handle_of("a")) << "forgotten once its last finish was routed";
}

TEST(LoopRequests, ARunningIdIsRefusedAndFreeAgainOnceDone) {
  loop_driver d;
  ASSERT_FALSE(d.submit("a", 2).error);
  const loop_submission again = d.submit("a");
  ASSERT_TRUE(again.error);
  EXPECT_EQ(again.error->request_id, "a");
  EXPECT_EQ(again.error->kind, error_kind::invalid_request);
  EXPECT_EQ(again.error->message, "a request with id 'a' is already running");
  EXPECT_EQ(again.error->param, "request_id");
  d.run_serially();
  EXPECT_FALSE(d.submit("a").error);
}

TEST(LoopRequests, TheCoresRefusalsComeBackAsErrors) {
  loop_driver d;
  request_spec spec = make_spec({.prompt_len = 5000, .max_tokens = 4});  // longer than max_model_len
  const loop_submission refused = d.loop.submit("long", spec, 0);
  ASSERT_TRUE(refused.error);
  EXPECT_EQ(refused.error->kind, error_kind::too_long);
  EXPECT_NE(refused.error->message.find("leaves no room in the context"), std::string::npos);
  EXPECT_EQ(refused.error->param, "");
  EXPECT_FALSE(d.loop.handle_of("long"));
}

TEST(LoopRequests, ACancelAbortsALiveRequestAndForgetsItsId) {
  loop_driver d;
  const loop_submission a = d.submit("a", 100);
  ASSERT_TRUE(d.plan());
  const std::optional<loop_events> events = d.loop.cancel("a", d.now);
  ASSERT_TRUE(events);
  ASSERT_EQ(events->events.finished.size(), 1u);
  EXPECT_EQ(events->events.finished[0].request, a.handle);
  EXPECT_EQ(events->events.finished[0].reason, finish_reason::abort);
  EXPECT_TRUE(events->events.finished[0].request_done);
  EXPECT_FALSE(d.loop.handle_of("a"));
}

TEST(LoopRequests, ACancelBeforeTheRequestAbortsItOnArrival) {
  loop_driver d;
  EXPECT_FALSE(d.loop.cancel("early", 0)) << "unknown yet: remembered";
  const loop_submission early = d.submit("early");
  ASSERT_FALSE(early.error);
  ASSERT_EQ(early.events.events.finished.size(), 1u);
  EXPECT_EQ(early.events.events.finished[0].reason, finish_reason::abort);
  EXPECT_TRUE(early.events.events.finished[0].request_done);
  EXPECT_FALSE(d.loop.handle_of("early"));
  EXPECT_TRUE(d.submit("early").events.events.empty()) << "the early cancel is used up";
}

TEST(LoopRequests, EarlyCancelsAreRememberedUpToABoundOldestForgottenFirst) {
  loop_driver d;
  for (std::size_t i = 0; i <= scheduler_loop::max_early_cancels; ++i) d.loop.cancel("id-" + std::to_string(i), 0);
  d.loop.cancel("id-1", 0);  // cancelled twice: remembered once, in its first place
  EXPECT_TRUE(d.submit("id-0").events.events.empty()) << "the oldest was forgotten";
  EXPECT_FALSE(d.submit("id-1").events.events.empty());
  const std::string last = "id-" + std::to_string(scheduler_loop::max_early_cancels);
  EXPECT_FALSE(d.submit(last).events.events.empty());
}

TEST(LoopRequests, AStopStringEndsItsChoice) {
  loop_driver d;
  const loop_submission a = d.submit("a", 100);
  std::optional<planned_step> planned = d.plan();
  ASSERT_TRUE(planned);
  d.complete(planned->step);
  const loop_events events = d.loop.finish_at_stop(a.handle, 0, d.now);
  ASSERT_EQ(events.events.finished.size(), 1u);
  EXPECT_EQ(events.events.finished[0].reason, finish_reason::stop);
  EXPECT_FALSE(d.loop.handle_of("a"));
}

}  // namespace
}  // namespace troupe::testing

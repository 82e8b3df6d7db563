// The operator's view of the scheduler: the request table (states, tokens,
// blocks, age, TTFT), aborting by id and changing a request's priority.

#include <gtest/gtest.h>

#include "tests/scheduler/harness.hpp"
#include "tests/scheduler/loop_driver.hpp"

namespace troupe::testing {
namespace {

const request_info* find_row(const std::vector<request_info>& table, const std::string& id) {
  for (const request_info& row : table) {
    if (row.id == id) return &row;
  }
  return nullptr;
}

request_spec named(request_spec spec, std::string id, int priority = 0) {
  spec.request_id = std::move(id);
  spec.priority = priority;
  return spec;
}

TEST(RequestTable, ListsStatesTokensBlocksAgeAndTimeToFirstToken) {
  harness h(small_config({.max_seqs = 1}));
  h.submit(named(make_spec({.prompt_len = 8, .max_tokens = 6}), "first"));
  h.now = 0.5;
  h.submit(named(make_spec({.prompt_len = 8, .max_tokens = 6, .first_token = 100}), "second"));
  h.step();
  h.now = 1.0;
  h.step();
  const std::vector<request_info> table = h.sched().request_table(2.0);
  ASSERT_EQ(table.size(), 2u);
  EXPECT_EQ(table[0].id, "first") << "oldest first";
  EXPECT_EQ(table[0].state, "decoding");
  EXPECT_EQ(table[0].prompt_tokens, 8);
  EXPECT_EQ(table[0].generated_tokens, 2);
  EXPECT_GT(table[0].device_blocks, 0);
  EXPECT_EQ(table[0].host_blocks, 0);
  EXPECT_DOUBLE_EQ(table[0].age_s, 2.0);
  ASSERT_TRUE(table[0].ttft_s.has_value());
  EXPECT_GE(*table[0].ttft_s, 0.5) << "its first token came in a step after time 0.5";
  EXPECT_LE(*table[0].ttft_s, table[0].age_s);
  EXPECT_EQ(table[1].state, "queued") << "max_num_seqs 1 keeps it waiting";
  EXPECT_EQ(table[1].device_blocks, 0);
  EXPECT_FALSE(table[1].ttft_s.has_value());
  EXPECT_DOUBLE_EQ(table[1].age_s, 1.5);
  h.run();
  EXPECT_TRUE(h.sched().request_table(h.now).empty()) << "finished requests leave the table";
}

TEST(RequestTable, APriorityChangeReordersTheQueue) {
  harness h(small_config({.max_seqs = 1}), {.policy = "priority"});
  const request_handle running = h.submit(named(make_spec({.prompt_len = 8, .max_tokens = 4}), "running", 0));
  h.step();
  const request_handle a = h.submit(named(make_spec({.prompt_len = 8, .max_tokens = 2, .first_token = 100}), "a", 5));
  const request_handle b = h.submit(named(make_spec({.prompt_len = 8, .max_tokens = 2, .first_token = 200}), "b", 5));
  EXPECT_TRUE(h.sched().set_priority(b, 1));
  EXPECT_EQ(find_row(h.sched().request_table(h.now), "b")->priority, 1);
  EXPECT_FALSE(h.sched().set_priority(9999, 1)) << "unknown handle";
  h.run();
  const auto first_step_of = [&](request_handle r) {
    for (std::size_t i = 0; i < h.steps.size(); ++i)
      if (!harness::entries(h.steps[i], r).empty()) return static_cast<int>(i);
    return -1;
  };
  EXPECT_LT(first_step_of(running), first_step_of(b));
  EXPECT_LT(first_step_of(b), first_step_of(a)) << "b was raised above a, which arrived first";
}

TEST(LoopAdmin, AbortEndsALiveRequestAndIgnoresUnknownIds) {
  loop_driver d;
  const loop_submission a = d.submit("a", /*max_tokens=*/50);
  d.plan();
  EXPECT_FALSE(d.loop.abort("nobody", d.now)) << "unknown: not remembered as an early cancel either";
  ASSERT_FALSE(d.submit("nobody").error) << "a later request with that id is not cancelled";
  const std::optional<loop_events> events = d.loop.abort("a", d.now);
  ASSERT_TRUE(events.has_value());
  d.record(*events);
  d.run_serially();
  ASSERT_FALSE(d.finishes_of(a.handle).empty());
  EXPECT_EQ(d.finishes_of(a.handle).back().reason, finish_reason::abort);
  EXPECT_TRUE(d.loop.set_priority("nobody", 3) == false) << "finished by now";
}

}  // namespace
}  // namespace troupe::testing

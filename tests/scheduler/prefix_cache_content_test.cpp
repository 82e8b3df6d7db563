// The prefix cache only ever offers K/V that a step wrote: blocks indexed
// for a step that never ran the sequence (it was cancelled while the KV
// reply was on its way) leave the cache with it.

#include <gtest/gtest.h>

#include "tests/scheduler/spec_driver.hpp"

namespace troupe::testing {
namespace {

TEST(PrefixCacheContent, ACancelDuringPlanningLeavesNoUnwrittenBlockCached) {
  for (const bool decoding : {false, true}) {
    spec_driver d(spec_config(0), std::nullopt);
    const request_handle first = d.submit(make_spec({.prompt_len = 7, .max_tokens = 8, .first_token = 1}));
    if (decoding) d.step();  // the prefill: the next step's append fills block 1
    // Plan a step, and cancel before the KV reply is applied: the step skips the request.
    kv_request request = d.sched().begin_step(d.now);
    d.record(d.sched().cancel(first, d.now));
    while (auto again = d.sched().on_kv_reply(d.kv().plan(request))) request = *again;
    EXPECT_TRUE(d.sched().take_step().sequences.empty());
    // A prompt that matches every block the skipped step would have filled.
    request_spec again = make_spec({.prompt_len = 7, .max_tokens = 4, .first_token = 1});
    again.prompt.push_back(decoding ? d.output(first).at(0) : 8);
    again.prompt.push_back(9);
    const request_handle second = d.submit(again);
    d.run();
    spec_driver alone(spec_config(0), std::nullopt);
    const request_handle reference = alone.submit(again);
    alone.run();
    EXPECT_EQ(d.output(second), alone.output(reference)) << (decoding ? "decoding" : "admitted");
  }
}

}  // namespace
}  // namespace troupe::testing

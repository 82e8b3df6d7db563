// Planning step N+1 while step N runs, and calls that arrive in the middle
// of a step's KV exchange.

#include <gtest/gtest.h>

#include "tests/scheduler/harness.hpp"
#include "tests/scheduler/pipeline.hpp"

namespace troupe::testing {
namespace {

TEST(Overlap, AStepPlannedWhileThePreviousRunsSkipsOnlySequencesAwaitingAToken) {
  const scheduler_config config = small_config({.budget = 16, .chunk = 8});
  scheduler sched(config);
  block_manager kv(kv_manager_config(config));
  fake_model model(config.num_device_blocks, config.num_host_blocks, config.block_size, harness::kVocab);
  const request_spec a_spec = make_spec({.prompt_len = 4, .max_tokens = 5, .seed = 3}),
                     b_spec = make_spec({.prompt_len = 40, .max_tokens = 2, .first_token = 100, .seed = 4});
  const request_handle a = sched.submit(a_spec, 0).handle;
  const request_handle b = sched.submit(b_spec, 0).handle;

  const scheduled_step first = sched.schedule(0, kv);
  ASSERT_EQ(first.sequences.size(), 2u);
  const step_result first_result = model.run(first, build_step_batch(first, config.block_size));
  const scheduled_step second = sched.schedule(0.01, kv);  // first's result is still out
  ASSERT_EQ(second.sequences.size(), 1u) << "a waits for its sampled token";
  EXPECT_EQ(second.sequences[0].request, b);
  EXPECT_EQ(second.sequences[0].start, 8) << "b's next chunk does not wait";
  EXPECT_EQ(sched.num_steps_in_flight(), 2u);

  pipeline run(sched, kv, model, /*depth=*/1);
  run.record(sched.on_step_result(first_result, 0.02));
  const step_result second_result = model.run(second, build_step_batch(second, config.block_size));
  run.record(sched.on_step_result(second_result, 0.03));
  double now = 0.04;
  for (int i = 0; i < 100 && (sched.has_unfinished_requests() || sched.has_pending_kv_updates()); ++i) {
    run.step(now);
    now += 0.01;
  }
  run.drain(now);
  EXPECT_EQ((run.outputs[{a, 0}]),
            reference_outputs({.prompt = a_spec.prompt, .request_seed = 3, .max_tokens = 5, .vocab = harness::kVocab}));
  EXPECT_EQ((run.outputs[{b, 0}]),
            reference_outputs({.prompt = b_spec.prompt, .request_seed = 4, .max_tokens = 2, .vocab = harness::kVocab}));
}

TEST(Overlap, DecodesSplitEvenlyBetweenTheRunningStepAndTheNext) {
  const scheduler_config config = small_config({.budget = 64, .chunk = 8});
  scheduler sched(config);
  sched.set_split_decodes(true);
  block_manager kv(kv_manager_config(config));
  fake_model model(config.num_device_blocks, config.num_host_blocks, config.block_size, harness::kVocab);
  for (int i = 0; i < 6; ++i) sched.submit(make_spec({.prompt_len = 4, .max_tokens = 30, .first_token = 1 + i}), 0);
  const scheduled_step first = sched.schedule(0, kv);  // six prefills
  ASSERT_EQ(first.sequences.size(), 6u);
  const step_result first_result = model.run(first, build_step_batch(first, config.block_size));
  for (int i = 0; i < 2; ++i) sched.submit(make_spec({.prompt_len = 4, .max_tokens = 30, .first_token = 10 + i}), 0);
  const scheduled_step second = sched.schedule(0.01, kv);  // two prefills beside the running six
  ASSERT_EQ(second.sequences.size(), 2u);
  const step_result second_result = model.run(second, build_step_batch(second, config.block_size));
  EXPECT_EQ(sched.on_step_result(first_result, 0.02).error, "");
  // Six could decode now, but with `second` running the eight decoders split four and four.
  const scheduled_step third = sched.schedule(0.03, kv);
  EXPECT_EQ(third.sequences.size(), 4u);
  const step_result third_result = model.run(third, build_step_batch(third, config.block_size));
  EXPECT_EQ(sched.on_step_result(second_result, 0.04).error, "");
  const scheduled_step fourth = sched.schedule(0.05, kv);
  EXPECT_EQ(fourth.sequences.size(), 4u) << "the two left over and the two from `second`";
  model.run(fourth, build_step_batch(fourth, config.block_size));
  EXPECT_EQ(sched.on_step_result(third_result, 0.06).error, "");
}

TEST(Overlap, ACancelDuringTheKvExchangeFreesTheNewAllocationNextStep) {
  const scheduler_config config = small_config();
  scheduler sched(config);
  block_manager kv(kv_manager_config(config));
  const request_handle a = sched.submit(make_spec({.prompt_len = 10, .max_tokens = 5}), 0).handle;
  kv_request request = sched.begin_step(0);
  ASSERT_EQ(request.allocations.size(), 1u);
  const scheduler_events events = sched.cancel(a, 0);
  EXPECT_EQ(events.finished.size(), 1u);
  while (auto again = sched.on_kv_reply(kv.plan(request))) request = *again;
  const scheduled_step step = sched.take_step();
  EXPECT_TRUE(step.sequences.empty());
  EXPECT_EQ(kv.num_sequences(), 1u) << "the manager allocated it before hearing of the cancel";
  ASSERT_TRUE(sched.has_pending_kv_updates());
  sched.schedule(0.01, kv);
  EXPECT_EQ(kv.num_sequences(), 0u);
  EXPECT_EQ(kv.usage().device_free_blocks, config.num_device_blocks);
  EXPECT_FALSE(sched.has_unfinished_requests());
}

TEST(Overlap, AnAbandonedStepIsRecomputedAndItsBlocksAreNotCached) {
  const scheduler_config config = small_config();
  scheduler sched(config);
  block_manager kv(kv_manager_config(config));
  fake_model model(config.num_device_blocks, config.num_host_blocks, config.block_size, harness::kVocab);
  const request_spec spec = make_spec({.prompt_len = 12, .max_tokens = 4, .seed = 8});
  const request_handle r = sched.submit(spec, 0).handle;
  const scheduled_step lost = sched.schedule(0, kv);  // never run
  const scheduler_events events = sched.abandon_step(lost.id);
  ASSERT_EQ(events.preempted.size(), 1u);
  EXPECT_EQ(events.preempted[0].kind, preemption_kind::recompute);
  pipeline run(sched, kv, model, 0);
  double now = 0.01;
  for (int i = 0; i < 20 && (sched.has_unfinished_requests() || sched.has_pending_kv_updates()); ++i) {
    run.step(now);
    now += 0.01;
  }
  EXPECT_EQ(kv.usage().prefix_hit_tokens, 0u) << "blocks of the lost step must not be served from the cache";
  EXPECT_EQ((run.outputs[{r, 0}]),
            reference_outputs({.prompt = spec.prompt, .request_seed = 8, .max_tokens = 4, .vocab = harness::kVocab}));
}

}  // namespace
}  // namespace troupe::testing

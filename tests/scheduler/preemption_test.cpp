// Preemption (victim choice, swap, recompute, automatic), cancellation,
// timeouts, the queue bound and stop conditions.

#include <gtest/gtest.h>

#include "tests/scheduler/harness.hpp"

namespace troupe::testing {
namespace {

/// Three requests that outgrow a 12-block pool while decoding.
struct crowded {
  explicit crowded(scheduler_config config, const std::string& policy = "fcfs", std::vector<int> priorities = {0, 0, 0})
      : h(config, {.policy = policy, .real_kv = true}) {
    for (int i = 0; i < 3; ++i) {
      specs.push_back(make_spec(
          {.prompt_len = 8, .max_tokens = 40, .first_token = 1 + 100 * i, .seed = 11 + static_cast<std::uint64_t>(i)}));
      specs.back().priority = priorities[static_cast<std::size_t>(i)];
      handles.push_back(h.submit(specs.back()));
      h.now += 0.001;
    }
  }
  void expect_reference_outputs() {
    for (std::size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(
          h.output(handles[i]),
          reference_outputs(
              {.prompt = specs[i].prompt, .request_seed = *specs[i].seed, .max_tokens = 40, .vocab = harness::kVocab}))
          << "request " << i;
    }
  }
  harness h;
  std::vector<request_spec> specs;
  std::vector<request_handle> handles;
};

scheduler_config crowded_config(preemption_mode mode, std::int32_t host_blocks = 32) {
  scheduler_config config = small_config({.budget = 64, .max_seqs = 8, .blocks = 12, .host_blocks = host_blocks});
  config.preemption = mode;
  return config;
}

TEST(Preemption, FcfsPreemptsTheLatestArrivalWhenBlocksRunOut) {
  crowded c(crowded_config(preemption_mode::recompute));
  c.h.run();
  ASSERT_FALSE(c.h.preempted.empty());
  EXPECT_EQ(c.h.preempted[0].request, c.handles[2]);
  EXPECT_EQ(c.h.preempted[0].kind, preemption_kind::recompute);
  c.expect_reference_outputs();
  EXPECT_EQ(c.h.real()->usage().device_free_blocks, 12);
}

TEST(Preemption, PriorityPreemptsTheHighestValueFirst) {
  crowded c(crowded_config(preemption_mode::recompute), "priority", {0, 2, 1});
  c.h.run();
  ASSERT_FALSE(c.h.preempted.empty());
  EXPECT_EQ(c.h.preempted[0].request, c.handles[1]);
  c.expect_reference_outputs();
}

TEST(Preemption, SwapMovesBlocksToTheHostAndBack) {
  crowded c(crowded_config(preemption_mode::swap));
  bool swapped_in = false;
  while (c.h.sched().has_unfinished_requests()) {
    c.h.step();
    swapped_in |= c.h.sched().num_swapped() == 0 && !c.h.preempted.empty();
  }
  c.h.run();
  ASSERT_FALSE(c.h.preempted.empty());
  EXPECT_EQ(c.h.preempted[0].request, c.handles[2]);
  EXPECT_EQ(c.h.preempted[0].kind, preemption_kind::swap);
  EXPECT_TRUE(swapped_in);
  c.expect_reference_outputs();  // the fake model reads K/V through the host copies
  EXPECT_EQ(c.h.real()->usage().host_free_blocks, 32);
  EXPECT_EQ(c.h.sched().metrics().preemptions.at("swap"), c.h.preempted.size());
}

TEST(Preemption, SwapFallsBackToRecomputeWithoutHostRoom) {
  crowded c(crowded_config(preemption_mode::swap, /*host_blocks=*/0));
  c.h.run();
  ASSERT_FALSE(c.h.preempted.empty());
  EXPECT_EQ(c.h.preempted[0].kind, preemption_kind::recompute);
  c.expect_reference_outputs();
}

TEST(Preemption, AutomaticModeSwapsLongSequencesAndRecomputesShortOnes) {
  scheduler_config config = crowded_config(preemption_mode::automatic);
  config.swap_min_tokens = 0;
  crowded long_ones(config);
  long_ones.h.run();
  ASSERT_FALSE(long_ones.h.preempted.empty());
  EXPECT_EQ(long_ones.h.preempted[0].kind, preemption_kind::swap);
  config.swap_min_tokens = 1000;
  crowded short_ones(config);
  short_ones.h.run();
  ASSERT_FALSE(short_ones.h.preempted.empty());
  EXPECT_EQ(short_ones.h.preempted[0].kind, preemption_kind::recompute);
  short_ones.expect_reference_outputs();
}

TEST(Cancellation, FreesTheBlocksAtTheNextStep) {
  harness h(small_config({.blocks = 32}));
  const request_handle r = h.submit(make_spec({.prompt_len = 10, .max_tokens = 50}));
  for (int i = 0; i < 5; ++i) h.step();
  EXPECT_LT(h.fake().free_blocks(), 32);
  const scheduler_events events = h.sched().cancel(r, h.now);
  ASSERT_EQ(events.finished.size(), 1u);
  EXPECT_EQ(events.finished[0].reason, finish_reason::abort);
  EXPECT_TRUE(events.finished[0].request_done);
  EXPECT_EQ(events.finished[0].usage.completion_tokens, 5);
  EXPECT_TRUE(h.sched().has_pending_kv_updates());
  h.step();
  ASSERT_EQ(h.fake().requests.back().frees.size(), 1u);
  EXPECT_EQ(h.fake().free_blocks(), 32);
  EXPECT_FALSE(h.sched().has_unfinished_requests());
  EXPECT_TRUE(h.sched().cancel(r, h.now).empty()) << "cancelling twice does nothing";
}

TEST(Cancellation, OfAQueuedRequestWithSeveralChoicesFinishesEveryChoice) {
  harness h(small_config({.max_seqs = 1}));
  h.submit(make_spec({.prompt_len = 10, .max_tokens = 50, .first_token = 1}));
  request_spec spec = make_spec({.prompt_len = 10, .max_tokens = 5, .first_token = 100});
  spec.n = 3;
  const request_handle r = h.submit(spec);
  h.step();
  const scheduler_events events = h.sched().cancel(r, h.now);
  ASSERT_EQ(events.finished.size(), 3u);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(events.finished[static_cast<std::size_t>(c)].choice, c);
  EXPECT_FALSE(events.finished[1].request_done);
  EXPECT_TRUE(events.finished[2].request_done);
  h.step();
  EXPECT_TRUE(h.fake().requests.back().frees.empty()) << "it never held blocks";
}

TEST(Timeouts, AbortTheRequestAtTheFirstStepPastItsTime) {
  harness h(small_config());
  request_spec spec = make_spec({.prompt_len = 8, .max_tokens = 100});
  spec.timeout_s = 0.045;
  const request_handle r = h.submit(spec);
  for (int i = 0; i < 5; ++i) h.step();  // steps at t = 0 .. 0.04
  EXPECT_FALSE(h.reason(r).has_value());
  const scheduled_step& s = h.step();  // t = 0.05
  ASSERT_EQ(s.events.finished.size(), 1u);
  EXPECT_EQ(s.events.finished[0].reason, finish_reason::abort);
  EXPECT_TRUE(s.sequences.empty());
  EXPECT_EQ(h.fake().requests.back().frees.size(), 1u);
}

TEST(Admission, AFullQueueRejectsAsOverloaded) {
  scheduler_config config = small_config({.max_seqs = 1});
  config.max_waiting_requests = 2;
  harness h(config);
  h.submit(make_spec({.prompt_len = 8, .max_tokens = 3, .first_token = 1}));
  h.submit(make_spec({.prompt_len = 8, .max_tokens = 3, .first_token = 100}));
  const submit_result third =
      h.sched().submit(make_spec({.prompt_len = 8, .max_tokens = 3, .first_token = 200}), h.now);
  EXPECT_FALSE(third.accepted);
  EXPECT_EQ(third.error, error_kind::overloaded);
  h.step();  // one starts: room for one more
  EXPECT_TRUE(h.sched().submit(make_spec({.prompt_len = 8, .max_tokens = 3, .first_token = 200}), h.now).accepted);
  EXPECT_EQ(h.sched().metrics().requests_rejected, 1u);
}

TEST(Admission, PromptsThatCannotFitAreRejectedAsTooLong) {
  scheduler_config config = small_config({.blocks = 8});
  config.max_model_len = 20;
  harness h(config);
  const submit_result context = h.sched().submit(make_spec({.prompt_len = 20, .max_tokens = 1}), 0);
  EXPECT_FALSE(context.accepted);
  EXPECT_EQ(context.error, error_kind::too_long);
  config.max_model_len = 1000;
  harness pool(config);
  const submit_result blocks =
      pool.sched().submit(make_spec({.prompt_len = 40, .max_tokens = 1}), 0);  // 8 blocks of 4 hold 32
  EXPECT_FALSE(blocks.accepted);
  EXPECT_EQ(blocks.error, error_kind::too_long);
  request_spec empty = make_spec({.prompt_len = 1, .max_tokens = 1});
  empty.prompt.clear();
  EXPECT_EQ(pool.sched().submit(empty, 0).error, error_kind::invalid_request);
}

TEST(StopConditions, EosStopIdsMinTokensAndMaxTokens) {
  const request_spec base = make_spec({.prompt_len = 6, .max_tokens = 30, .seed = 99});
  const auto free_run =
      reference_outputs({.prompt = base.prompt, .request_seed = 99, .max_tokens = 30, .vocab = harness::kVocab});
  scheduler_config config = small_config();
  config.eos_token_ids = {free_run[3]};
  {
    harness h(config);
    request_spec spec = base;
    spec.ignore_eos = false;
    const request_handle r = h.submit(spec);
    h.run();
    EXPECT_EQ(h.output(r), std::vector<std::int32_t>(free_run.begin(), free_run.begin() + 4));
    EXPECT_EQ(h.reason(r), finish_reason::stop);
  }
  {
    harness h(config);
    request_spec spec = base;  // ignore_eos: the eos id does not stop it
    spec.stop_token_ids = {free_run[5]};
    spec.min_tokens = 3;
    const request_handle r = h.submit(spec);
    h.run();
    EXPECT_EQ(h.output(r), reference_outputs({.prompt = base.prompt,
                                              .request_seed = 99,
                                              .max_tokens = 30,
                                              .stop_ids = {free_run[5]},
                                              .min_tokens = 3,
                                              .vocab = harness::kVocab}));
    EXPECT_EQ(h.output(r).size(), 6u);
  }
  {
    harness h(config);
    request_spec spec = base;
    spec.ignore_eos = false;
    spec.min_tokens = 10;  // eos does not count before ten tokens
    const request_handle r = h.submit(spec);
    h.run();
    EXPECT_EQ(h.output(r), reference_outputs({.prompt = base.prompt,
                                              .request_seed = 99,
                                              .max_tokens = 30,
                                              .stop_ids = {free_run[3]},
                                              .min_tokens = 10,
                                              .vocab = harness::kVocab}));
    EXPECT_GE(h.output(r).size(), 10u);
  }
}

TEST(StopConditions, HooksSuppressEosAndStopIdsBelowMinTokens) {
  scheduler_config config = small_config();
  config.eos_token_ids = {2, 3};
  harness h(config);
  request_spec spec = make_spec({.prompt_len = 4, .max_tokens = 5});
  spec.ignore_eos = false;
  spec.min_tokens = 2;
  spec.stop_token_ids = {9};
  h.submit(spec);
  const scheduled_step& first = h.step();
  ASSERT_EQ(first.rows.size(), 1u);
  EXPECT_EQ(std::vector<std::int32_t>(first.rows[0].suppressed_tokens.begin(), first.rows[0].suppressed_tokens.end()),
            (std::vector<std::int32_t>{2, 3, 9}));
  EXPECT_EQ(first.rows[0].token_index, 0u);
  const scheduled_step& second = h.step();
  EXPECT_EQ(second.rows.at(0).token_index, 1u);
  EXPECT_EQ(second.rows.at(0).suppressed_tokens.size(), 3u);
  const scheduled_step& third = h.step();
  EXPECT_TRUE(third.rows.at(0).suppressed_tokens.empty());
}

TEST(StopConditions, ContextLengthAndDownstreamStopStrings) {
  scheduler_config config = small_config();
  config.max_model_len = 12;
  harness h(config);
  const request_handle full = h.submit(make_spec({.prompt_len = 8, .max_tokens = 100, .first_token = 1}));
  const request_handle stopped = h.submit(make_spec({.prompt_len = 8, .max_tokens = 100, .first_token = 50}));
  for (int i = 0; i < 3; ++i) h.step();
  const scheduler_events events = h.sched().finish(stopped, 0, finish_reason::stop, h.now);
  ASSERT_EQ(events.finished.size(), 1u);
  EXPECT_EQ(events.finished[0].reason, finish_reason::stop);
  h.run();
  EXPECT_EQ(h.output(full).size(), 4u) << "8 prompt + 4 outputs fill the context";
  EXPECT_EQ(h.reason(full), finish_reason::length);
  EXPECT_EQ(h.output(stopped).size(), 3u);
}

TEST(StopConditions, ASequenceThatOutgrowsTheWholePoolEndsWithLength) {
  harness h(small_config({.blocks = 4}));  // 16 slots
  const request_handle r = h.submit(make_spec({.prompt_len = 8, .max_tokens = 100}));
  h.run();
  EXPECT_EQ(h.reason(r), finish_reason::length);
  EXPECT_EQ(h.output(r).size(), 9u) << "positions 0..15 hold 8 prompt and 8 fed outputs; the 9th is sampled";
  EXPECT_TRUE(h.preempted.empty());
}

}  // namespace
}  // namespace troupe::testing

namespace troupe::testing {
namespace {

TEST(Preemption, AppendsThatDoNotFitAreRetriedAfterChoosingVictims) {
  scheduler_config config = small_config({.budget = 64, .max_seqs = 8, .blocks = 12});
  harness h(config);
  h.fake().overstate_free = 3;  // the scheduler believes in blocks that are not there
  std::vector<request_spec> specs;
  std::vector<request_handle> handles;
  for (int i = 0; i < 3; ++i) {
    specs.push_back(make_spec(
        {.prompt_len = 8, .max_tokens = 30, .first_token = 1 + 100 * i, .seed = 40 + static_cast<std::uint64_t>(i)}));
    handles.push_back(h.submit(specs.back()));
    h.now += 0.001;
  }
  h.run();
  EXPECT_GT(h.fake().requests.size(), h.steps.size()) << "some steps needed a second KV request";
  bool retried = false;
  for (std::size_t i = 1; i < h.fake().requests.size(); ++i)
    retried |= h.fake().requests[i].step == h.fake().requests[i - 1].step;
  EXPECT_TRUE(retried);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(
        h.output(handles[i]),
        reference_outputs(
            {.prompt = specs[i].prompt, .request_seed = *specs[i].seed, .max_tokens = 30, .vocab = harness::kVocab}));
  }
  EXPECT_EQ(h.fake().free_blocks(), 12);
  EXPECT_EQ(h.fake().num_sequences(), 0u);
}

}  // namespace
}  // namespace troupe::testing

// n > 1: one prefill, n samples from its last logits row, then n choices
// sharing the prompt's blocks (copy-on-write on the partial block), each
// with its own seed.

#include <gtest/gtest.h>

#include "tests/scheduler/harness.hpp"

namespace troupe::testing {
namespace {

TEST(Fork, OnePrefillThenNChoicesWithTheirOwnSeeds) {
  harness h(small_config(), {.real_kv = true});
  request_spec spec = make_spec({.prompt_len = 6, .max_tokens = 4, .seed = 1234});
  spec.n = 3;
  const request_handle r = h.submit(spec);

  const scheduled_step& first = h.step();
  ASSERT_EQ(first.sequences.size(), 1u);
  EXPECT_EQ(first.sequences[0].num_samples, 3);
  ASSERT_EQ(first.rows.size(), 3u);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(first.rows[static_cast<std::size_t>(c)].choice, c);
    EXPECT_EQ(first.rows[static_cast<std::size_t>(c)].seed, choice_seed(1234, c));
    EXPECT_EQ(first.rows[static_cast<std::size_t>(c)].token_index, 0u);
  }
  EXPECT_EQ(choice_seed(1234, 0), 1234u) << "choice 0 samples like an n = 1 request";
  const step_batch batch = build_step_batch(first, 4);
  EXPECT_EQ(batch.logits_indices, (std::vector<std::int32_t>{5, 5, 5}));

  const scheduled_step& second = h.step();
  ASSERT_EQ(second.sequences.size(), 3u);
  for (const auto& s : second.sequences) {
    EXPECT_EQ(s.start, 6);
    EXPECT_EQ(s.tokens.size(), 1u);
    EXPECT_EQ(s.block_table.size(), 2u);
    EXPECT_EQ(s.block_table[0], second.sequences[0].block_table[0]) << "the full prompt block stays shared";
  }
  EXPECT_EQ(second.copies.size(), 2u) << "two writers copy the shared partial block; the last writes in place";

  h.run();
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(
        h.output(r, c),
        reference_outputs(
            {.prompt = spec.prompt, .request_seed = 1234, .choice = c, .max_tokens = 4, .vocab = harness::kVocab}))
        << "choice " << c;
    EXPECT_EQ(h.reason(r, c), finish_reason::length);
  }
  EXPECT_NE(h.output(r, 0), h.output(r, 1));
  int done_flags = 0;
  for (int c = 0; c < 3; ++c) done_flags += h.finished[{r, c}].request_done;
  EXPECT_EQ(done_flags, 1);
  const finish_event& last = h.finished[{r, 2}].request_done ? h.finished[{r, 2}] : h.finished[{r, 1}];
  EXPECT_EQ(last.usage.prompt_tokens, 6);
  EXPECT_EQ(last.usage.completion_tokens, 12);
  EXPECT_EQ(h.real()->usage().device_free_blocks, 64);
}

TEST(Fork, ChoicesSurvivePreemptionAndTheParentStoppingFirst) {
  const request_spec probe = make_spec({.prompt_len = 10, .max_tokens = 30, .seed = 77});
  const auto first_of_choice0 =
      reference_outputs({.prompt = probe.prompt, .request_seed = 77, .max_tokens = 1, .vocab = harness::kVocab});
  scheduler_config config = small_config({.budget = 64, .blocks = 20});
  config.eos_token_ids = first_of_choice0;
  harness h(config, {.real_kv = true});
  request_spec spec = probe;
  spec.n = 4;
  spec.ignore_eos = false;
  const request_handle r = h.submit(spec);
  const request_handle other = h.submit(make_spec({.prompt_len = 12, .max_tokens = 30, .first_token = 500, .seed = 5}));
  h.run();
  EXPECT_EQ(h.output(r, 0), first_of_choice0);
  EXPECT_EQ(h.reason(r, 0), finish_reason::stop);
  for (int c = 1; c < 4; ++c) {
    EXPECT_EQ(h.output(r, c), reference_outputs({.prompt = spec.prompt,
                                                 .request_seed = 77,
                                                 .choice = c,
                                                 .max_tokens = 30,
                                                 .stop_ids = first_of_choice0,
                                                 .vocab = harness::kVocab}))
        << "choice " << c;
  }
  EXPECT_EQ(h.output(other),
            reference_outputs({.prompt = make_spec({.prompt_len = 12, .max_tokens = 30, .first_token = 500}).prompt,
                               .request_seed = 5,
                               .max_tokens = 30,
                               .stop_ids = first_of_choice0,
                               .vocab = harness::kVocab}));
  EXPECT_FALSE(h.preempted.empty()) << "20 blocks cannot hold every choice: some are preempted";
  EXPECT_EQ(h.real()->usage().device_free_blocks, 20);
}

}  // namespace
}  // namespace troupe::testing

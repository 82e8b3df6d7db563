// build_step_batch on a hand-worked step (block_size 4); every array is
// worked out by hand below.

#include <gtest/gtest.h>

#include "actors/core/step_builder.hpp"

namespace troupe {
namespace {

using ids = std::vector<std::int32_t>;

scheduled_step hand_worked_step() {
  scheduled_step step;
  step.id = 9;
  // A: prefill chunk of 5 tokens at positions 0..4 in blocks 7, 3; no logits.
  step.sequences.push_back({1, 10, 0, 0, {10, 11, 12, 13, 14}, {7, 3}, 0});
  // B: decode at position 9 (block 5, offset 1); its table has a spare block.
  step.sequences.push_back({2, 11, 0, 9, {20}, {1, 2, 5, 6}, 1});
  // C: last prompt chunk at positions 3, 4 sampled for three choices.
  step.sequences.push_back({3, 12, 0, 3, {30, 31}, {4, 0}, 3});
  step.copies.push_back({block_location::host, 2, block_location::device, 6});
  return step;
}

TEST(BuildStepBatch, FillsEveryArrayOfAHandWorkedStep) {
  const step_batch batch = build_step_batch(hand_worked_step(), 4);
  EXPECT_EQ(batch.token_ids, (ids{10, 11, 12, 13, 14, 20, 30, 31}));
  EXPECT_EQ(batch.positions, (ids{0, 1, 2, 3, 4, 9, 3, 4}));
  EXPECT_EQ(batch.query_start, (ids{0, 5, 6, 8}));
  EXPECT_EQ(batch.seq_lens, (ids{5, 10, 5}));
  EXPECT_EQ(batch.kv_indptr, (ids{0, 2, 5, 7}));
  EXPECT_EQ(batch.kv_indices, (ids{7, 3, 1, 2, 5, 4, 0}));
  EXPECT_EQ(batch.kv_last_page_len, (ids{1, 2, 1}));
  EXPECT_EQ(batch.slot_mapping, (std::vector<std::int64_t>{28, 29, 30, 31, 12, 21, 19, 0}));
  EXPECT_EQ(batch.logits_indices, (ids{5, 7, 7, 7}));
  ASSERT_EQ(batch.block_copies.size(), 1u);
  EXPECT_EQ(batch.block_copies[0].dst, 6);
  EXPECT_TRUE(batch.sampling.empty());
  kv_cache_spec spec;
  spec.block_size = 4;
  spec.num_blocks = 8;
  EXPECT_EQ(validate_step_batch(batch, spec), "");
}

TEST(BuildStepBatch, AnEmptyStepIsAValidEmptyBatch) {
  const step_batch batch = build_step_batch(scheduled_step{}, 16);
  EXPECT_EQ(batch.query_start, (ids{0}));
  EXPECT_EQ(batch.kv_indptr, (ids{0}));
  kv_cache_spec spec;
  spec.num_blocks = 1;
  EXPECT_EQ(validate_step_batch(batch, spec), "");
}

TEST(FillSamplingRows, CopiesEveryHook) {
  scheduled_step step = hand_worked_step();
  const sampling_params params;
  const ids prompt{1, 2, 3}, outputs{4}, suppressed{5};
  for (int i = 0; i < 4; ++i) {
    logits_row_hook hook;
    hook.seed = 100 + static_cast<std::uint64_t>(i);
    hook.token_index = static_cast<std::uint64_t>(i);
    hook.params = &params;
    hook.prompt_tokens = prompt;
    hook.output_tokens = outputs;
    hook.suppressed_tokens = suppressed;
    step.rows.push_back(hook);
  }
  step_batch batch = build_step_batch(step, 4);
  fill_sampling_rows(batch, step);
  ASSERT_EQ(batch.sampling.size(), 4u);
  EXPECT_EQ(batch.sampling[3].seed, 103u);
  EXPECT_EQ(batch.sampling[3].token_index, 3u);
  EXPECT_EQ(batch.sampling[0].params, &params);
  EXPECT_EQ(batch.sampling[0].prompt_tokens.data(), prompt.data());
  EXPECT_EQ(batch.sampling[0].suppressed_tokens.size(), 1u);
  kv_cache_spec spec;
  spec.block_size = 4;
  spec.num_blocks = 8;
  EXPECT_EQ(validate_step_batch(batch, spec), "");
}

}  // namespace
}  // namespace troupe

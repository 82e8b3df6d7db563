// Draft trees through the scheduler and the greedy fake model: whichever
// branch the model accepts (the first, whose K/V is in place, or a later
// one, whose accepted tokens are recomputed next step), every choice gives
// token for token what it gives without speculation — across batch
// compositions, chunked prefill, swap and recompute preemption, steps in
// flight and cancellations — the pools end empty, and no prefix-cache block
// ever holds a rejected or misplaced draft (spec_driver checks every step).
// Beside: the tree's rows and KV settles, constrained sequences cut to a
// chain, and the draft_tree helpers.

#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "actors/core/draft_tree.hpp"
#include "tests/scheduler/spec_workload.hpp"

namespace troupe::testing {
namespace {

scheduler_config tree_config(int k, int width, std::int32_t blocks = 256, std::int32_t host_blocks = 32) {
  scheduler_config config = spec_config(k, blocks, host_blocks);
  config.speculative_tree_width = width;
  return config;
}

using tree_case = std::tuple<int /*width*/, int /*depth*/, std::uint32_t /*seed*/>;

class SpeculativeTreeIdentity : public ::testing::TestWithParam<tree_case> {};

TEST_P(SpeculativeTreeIdentity, GreedyOutputsMatchWithoutSpeculation) {
  const auto [width, depth, seed] = GetParam();
  const std::vector<arrival> work = random_workload(seed, 24);
  const run_outcome plain = run_workload(spec_config(0, 256), std::nullopt, depth, work);
  const run_outcome trees =
      run_workload(tree_config(3, width), fake_proposer(proposer_kind::tree, kVocab, seed), depth, work);
  expect_same_outputs(plain, trees);
  EXPECT_GT(trees.metrics.spec_drafts, 0u);
  EXPECT_GT(trees.metrics.spec_accepted_tokens, 0u);
}

INSTANTIATE_TEST_SUITE_P(WidthsAndDepths, SpeculativeTreeIdentity,
                         ::testing::Combine(::testing::Values(2, 3), ::testing::Values(0, 1),
                                            ::testing::Values(1u, 2u, 3u)));

using tree_preemption_case = std::tuple<preemption_mode, int /*depth*/>;

class SpeculativeTreePreemption : public ::testing::TestWithParam<tree_preemption_case> {};

TEST_P(SpeculativeTreePreemption, GreedyOutputsMatchUnderSwapAndRecompute) {
  const auto [mode, depth] = GetParam();
  const std::vector<arrival> work = random_workload(11, 40);
  scheduler_config plain = spec_config(0, /*blocks=*/32, /*host_blocks=*/24);
  plain.preemption = mode;
  plain.swap_min_tokens = 16;
  scheduler_config trees = plain;
  trees.num_speculative_tokens = 3;
  trees.speculative_tree_width = 3;
  const run_outcome expected = run_workload(plain, std::nullopt, depth, work);
  const run_outcome actual = run_workload(trees, fake_proposer(proposer_kind::tree, kVocab, 5), depth, work);
  expect_same_outputs(expected, actual);
  EXPECT_GT(actual.preemptions, 0) << "the pool should be small enough to preempt";
}

INSTANTIATE_TEST_SUITE_P(ModesAndDepths, SpeculativeTreePreemption,
                         ::testing::Combine(::testing::Values(preemption_mode::swap, preemption_mode::recompute,
                                                              preemption_mode::automatic),
                                            ::testing::Values(0, 1)));

TEST(SpeculativeTreeScheduling, CancellationsLeaveOtherOutputsAndThePoolsIntact) {
  const std::vector<arrival> work = random_workload(21, 24);
  std::map<std::size_t, int> cancels;
  for (std::size_t i = 0; i < work.size(); i += 3) cancels[i] = work[i].step + static_cast<int>(i % 12);
  const run_outcome expected = run_workload(spec_config(0, 40, 16), std::nullopt, 1, work);
  const run_outcome actual =
      run_workload(tree_config(3, 3, 40, 16), fake_proposer(proposer_kind::tree, kVocab, 9), 1, work, cancels);
  expect_outputs_or_prefixes(expected, actual, cancels);
}

// A decode with draft slots and a tree: the batch feeds the nodes at their
// depth's positions with tree_parent, and the rows are the nodes'.
TEST(SpeculativeTreeScheduling, TreeDraftsBecomeATreeVerifyGroup) {
  spec_driver driver(tree_config(2, 2), std::nullopt, 0, kVocab);
  driver.submit(make_spec({.prompt_len = 5, .max_tokens = 20, .seed = 3}));
  driver.step();  // the prompt
  scheduled_step s = driver.plan();
  ASSERT_EQ(s.sequences.size(), 1u);
  ASSERT_EQ(s.sequences[0].draft_slots, 4);
  ASSERT_EQ(s.sequences[0].tree_width, 2);
  EXPECT_EQ(driver.sched().set_drafts(s, 0, {7, 8, 9, 10}, {}, {0, 1, 0, 3}), "");
  EXPECT_EQ(driver.sched().set_drafts(s, 0, {7}), "the sequence's drafts are set already");
  step_batch batch = build_step_batch(s, driver.sched().config().block_size);
  fill_sampling_rows(batch, s);
  ASSERT_EQ(batch.verify.size(), 1u);
  EXPECT_EQ(batch.verify[0].parents, (std::vector<std::int32_t>{0, 1, 0, 3}));
  const std::int32_t root = batch.query_start[1] - 5;
  const std::int32_t p = batch.positions[static_cast<std::size_t>(root)];
  EXPECT_EQ(std::vector<std::int32_t>(batch.positions.end() - 5, batch.positions.end()),
            (std::vector<std::int32_t>{p, p + 1, p + 2, p + 1, p + 2}));
  EXPECT_EQ(std::vector<std::int32_t>(batch.tree_parent.end() - 5, batch.tree_parent.end()),
            (std::vector<std::int32_t>{-1, root, root + 1, root, root + 3}));
  kv_cache_spec spec;
  spec.block_size = driver.sched().config().block_size;
  spec.num_blocks = driver.sched().config().num_device_blocks;
  EXPECT_EQ(validate_step_batch(batch, spec), "");
  // Node 4's row: its depth's token index, its path (9, 10) as outputs.
  const sampling_row& node4 = batch.sampling[static_cast<std::size_t>(batch.verify[0].first_row) + 4];
  EXPECT_EQ(node4.token_index, batch.sampling[static_cast<std::size_t>(batch.verify[0].first_row)].token_index + 2);
  EXPECT_EQ(std::vector<std::int32_t>(node4.output_tokens.end() - 2, node4.output_tokens.end()),
            (std::vector<std::int32_t>{9, 10}));
  driver.deliver(driver.execute(s));
  driver.run();
}

TEST(SpeculativeTreeScheduling, MalformedTreesAreRefused) {
  spec_driver driver(tree_config(2, 2), std::nullopt, 0, kVocab);
  driver.submit(make_spec({.prompt_len = 5, .max_tokens = 20, .seed = 3}));
  driver.step();
  scheduled_step s = driver.plan();
  EXPECT_EQ(driver.sched().set_drafts(s, 0, {7, 7}, {}, {0, 0}), "sibling drafts carry the same token");
  EXPECT_EQ(driver.sched().set_drafts(s, 0, {7, 8}, {}, {0, 2}), "a draft's parent is not an earlier node");
  EXPECT_EQ(driver.sched().set_drafts(s, 0, {7, 8}, std::vector<float>(2 * kVocab, 0.0f), {0, 0}),
            "a draft tree's drafts must be point masses (no draft_probs)");
  EXPECT_EQ(driver.sched().set_drafts(s, 0, {7, 8}, {}, {0, 0}), "");
  driver.deliver(driver.execute(s));
  driver.run();
}

TEST(DraftTree, MergesBranchesDepthFirstWithSharedPrefixesOnce) {
  const std::vector<std::vector<std::int32_t>> branches = {{1, 2, 3}, {1, 2, 4}, {5, 6}, {1}};
  const draft_tree tree = merge_branches(branches, 16);
  EXPECT_EQ(tree.drafts, (std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(tree.parents, (std::vector<std::int32_t>{0, 1, 2, 2, 0, 5}));
  EXPECT_EQ(first_chain(tree), (std::vector<std::int32_t>{1, 2, 3}));
  EXPECT_EQ(tree_depth(tree.parents), 3);
  const draft_tree cut = merge_branches(branches, 4);
  EXPECT_EQ(cut.drafts, (std::vector<std::int32_t>{1, 2, 3, 4}));
  const draft_tree chain = merge_branches(std::vector<std::vector<std::int32_t>>{{1, 2}, {1}}, 8);
  EXPECT_TRUE(chain.parents.empty()) << "a merge that is a chain has no parents";
  EXPECT_TRUE(is_chain(std::vector<std::int32_t>{0, 1, 2}));
  EXPECT_FALSE(is_chain(tree.parents));
}

TEST(DraftTree, CountsTheAcceptedDraftsAlreadyInPlace) {
  const draft_tree tree{{1, 2, 3, 4, 5, 6}, {0, 1, 2, 2, 0, 5}};
  EXPECT_EQ(drafts_in_place(tree, std::vector<std::int32_t>{1, 2, 3}), 3);
  EXPECT_EQ(drafts_in_place(tree, std::vector<std::int32_t>{1, 2, 4}), 2) << "node 4 sits after node 3";
  EXPECT_EQ(drafts_in_place(tree, std::vector<std::int32_t>{5, 6}), 0);
  EXPECT_EQ(drafts_in_place(draft_tree{{1, 2}, {}}, std::vector<std::int32_t>{1}), 1);
  std::vector<std::size_t> offsets;
  const std::vector<std::int32_t> outputs = {9};
  const std::vector<std::int32_t> contexts = path_contexts(outputs, tree, offsets);
  ASSERT_EQ(offsets.size(), 6u);
  EXPECT_EQ(std::vector<std::int32_t>(contexts.begin() + static_cast<std::ptrdiff_t>(offsets[3]),
                                      contexts.begin() + static_cast<std::ptrdiff_t>(offsets[3]) + 4),
            (std::vector<std::int32_t>{9, 1, 2, 4}));
  EXPECT_EQ(std::vector<std::int32_t>(contexts.begin() + static_cast<std::ptrdiff_t>(offsets[5]), contexts.end()),
            (std::vector<std::int32_t>{9, 5, 6}));
}

}  // namespace
}  // namespace troupe::testing

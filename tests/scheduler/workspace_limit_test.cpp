// The step workspace's limit fixed at start (knob max_step_workspace_bytes):
// what a budget costs, and live budget changes refused past the limit.

#include <gtest/gtest.h>

#include "tests/scheduler/loop_driver.hpp"

namespace troupe::testing {
namespace {

constexpr workspace_bound bound{.per_token = 1000, .per_row = 50'000, .limit = 2'000'000};

TEST(WorkspaceBound, ABudgetCostsItsTokensAndOneLogitsRowPerSequence) {
  EXPECT_EQ(bound.bytes(64, 8), 64u * 1000 + 8u * 50'000);
  EXPECT_EQ(bound.bytes(4, 8), 4u * 1000 + 4u * 50'000) << "a step has no more sequences than tokens";
}

TEST(WorkspaceBound, ABudgetPastTheLimitNamesBothKnobsAndTheLimitKnob) {
  EXPECT_EQ(bound.problem(1000, 20), "") << "1.0 MB + 1.0 MB fits in 2 MB";
  const std::string problem = bound.problem(1001, 20);
  EXPECT_NE(problem.find("max_num_batched_tokens 1001"), std::string::npos) << problem;
  EXPECT_NE(problem.find("max_num_seqs 20"), std::string::npos) << problem;
  EXPECT_NE(problem.find("max_step_workspace_bytes"), std::string::npos) << problem;
  constexpr workspace_bound unlimited{.per_token = 1000, .per_row = 1, .limit = 0};
  EXPECT_EQ(unlimited.problem(1 << 20, 1 << 16), "") << "no limit: nothing is refused";
}

scheduler_loop_config limited_config() {
  scheduler_loop_config config = small_loop_config();
  config.workspace = bound;
  return config;
}

TEST(LoopWorkspaceLimit, ARaisedTokenBudgetPastTheLimitIsRefusedAndNothingChanges) {
  loop_driver d(limited_config());
  const scheduler_config before = d.loop.core().config();
  settings_change change;
  change.max_num_batched_tokens = 1 << 20;
  change.policy = "priority";
  const std::string problem = d.loop.configure(change, 0);
  EXPECT_NE(problem.find("max_num_batched_tokens 1048576"), std::string::npos) << problem;
  EXPECT_EQ(d.loop.core().config().max_num_batched_tokens, before.max_num_batched_tokens);
  EXPECT_EQ(d.loop.core().policy().name(), std::string("fcfs")) << "a refused change applies nothing";
}

TEST(LoopWorkspaceLimit, RaisedSequencesPastTheLimitAreRefused) {
  loop_driver d(limited_config());
  settings_change tokens;
  tokens.max_num_batched_tokens = 1000;
  ASSERT_EQ(d.loop.configure(tokens, 0), "");
  settings_change seqs;
  seqs.max_num_seqs = 21;
  const std::string problem = d.loop.configure(seqs, 0);
  EXPECT_NE(problem.find("max_num_seqs 21"), std::string::npos) << problem;
  EXPECT_EQ(d.loop.core().config().max_num_seqs, small_config().max_num_seqs);
}

TEST(LoopWorkspaceLimit, BudgetsUnderTheLimitApply) {
  loop_driver d(limited_config());
  settings_change change;
  change.max_num_batched_tokens = 512;
  change.max_num_seqs = 16;
  EXPECT_EQ(d.loop.configure(change, 0), "");
  EXPECT_EQ(d.loop.core().config().max_num_batched_tokens, 512);
  EXPECT_EQ(d.loop.core().config().max_num_seqs, 16);
}

}  // namespace
}  // namespace troupe::testing

// Speculative decoding is lossless for the greedy fake model: whatever the
// proposer proposes, every choice produces token for token what it produces
// without speculation — across batch compositions, chunked prefill, n > 1,
// stop ids and max_tokens inside accepted runs, swap and recompute
// preemption, steps in flight, and cancellations mid-round — and the pools
// end empty with no rejected draft ever in the prefix cache (spec_driver
// checks that on every step).

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <tuple>

#include "tests/scheduler/spec_workload.hpp"

namespace troupe::testing {
namespace {

using identity_case = std::tuple<proposer_kind, int /*depth*/, std::uint32_t /*seed*/>;

class SpeculativeIdentity : public ::testing::TestWithParam<identity_case> {};

TEST_P(SpeculativeIdentity, GreedyOutputsMatchWithoutSpeculation) {
  const auto [kind, depth, seed] = GetParam();
  const std::vector<arrival> work = random_workload(seed, 24);
  const run_outcome plain = run_workload(spec_config(0, 256), std::nullopt, depth, work);
  const run_outcome speculative = run_workload(spec_config(4, 256), fake_proposer(kind, kVocab, seed), depth, work);
  expect_same_outputs(plain, speculative);
  EXPECT_GT(speculative.metrics.spec_drafts, 0u);
  if (kind == proposer_kind::right) {
    EXPECT_LT(speculative.steps, plain.steps) << "right drafts save steps";
  }
}

INSTANTIATE_TEST_SUITE_P(ProposersAndDepths, SpeculativeIdentity,
                         ::testing::Combine(::testing::Values(proposer_kind::right, proposer_kind::wrong,
                                                              proposer_kind::right_prefix, proposer_kind::short_right),
                                            ::testing::Values(0, 1), ::testing::Values(1u, 2u)));

using preemption_case = std::tuple<preemption_mode, int /*depth*/, proposer_kind>;

class SpeculativePreemption : public ::testing::TestWithParam<preemption_case> {};

TEST_P(SpeculativePreemption, GreedyOutputsMatchUnderSwapAndRecompute) {
  const auto [mode, depth, kind] = GetParam();
  const std::vector<arrival> work = random_workload(11, 40);
  scheduler_config plain = spec_config(0, /*blocks=*/32, /*host_blocks=*/24);
  plain.preemption = mode;
  plain.swap_min_tokens = 16;
  scheduler_config speculative = plain;
  speculative.num_speculative_tokens = 6;
  const run_outcome expected = run_workload(plain, std::nullopt, depth, work);
  const run_outcome actual = run_workload(speculative, fake_proposer(kind, kVocab, 5), depth, work);
  expect_same_outputs(expected, actual);
  EXPECT_GT(actual.preemptions, 0) << "the pool should be small enough to preempt";
  if (depth > 0) {
    EXPECT_GT(actual.preempted_with_unsettled_slots, 0) << "preemptions should hit steps in flight";
  }
}

INSTANTIATE_TEST_SUITE_P(
    ModesAndDepths, SpeculativePreemption,
    ::testing::Combine(::testing::Values(preemption_mode::swap, preemption_mode::recompute, preemption_mode::automatic),
                       ::testing::Values(0, 1), ::testing::Values(proposer_kind::right, proposer_kind::right_prefix)));

TEST(SpeculativeScheduling, CancellationsMidRoundLeaveOtherOutputsAndThePoolsIntact) {
  const std::vector<arrival> work = random_workload(21, 24);
  std::map<std::size_t, int> cancels;
  std::mt19937 rng(3);
  for (std::size_t i = 0; i < work.size(); i += 3) cancels[i] = work[i].step + static_cast<int>(rng() % 12);
  const run_outcome expected = run_workload(spec_config(0, 40, 16), std::nullopt, 1, work);
  const run_outcome actual =
      run_workload(spec_config(5, 40, 16), fake_proposer(proposer_kind::right_prefix, kVocab, 9), 1, work, cancels);
  expect_outputs_or_prefixes(expected, actual, cancels);
}

}  // namespace
}  // namespace troupe::testing

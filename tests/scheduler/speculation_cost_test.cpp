// The turn-down's cost model with synthetic costs: the curves it learns from
// measured step times, and which decodes it lets speculate.

#include "actors/core/speculation_cost.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace troupe::testing {
namespace {

constexpr double ms = 1e-3;

/// A target whose step costs `fixed` plus `per_token` per token fed, measured at sizes 1..`up_to`.
speculation_cost_model linear_target(double fixed, double per_token, std::int32_t up_to) {
  speculation_cost_model model;
  for (std::int32_t tokens = 1; tokens <= up_to; ++tokens)
    model.observe_target_step(tokens, fixed + per_token * tokens);
  return model;
}

std::vector<speculation_candidate> alike(std::size_t count, double acceptance, std::int32_t slots) {
  return std::vector<speculation_candidate>(count, {acceptance, slots});
}

TEST(CostCurve, KnowsNothingBeforeItsFirstMeasurement) {
  cost_curve curve;
  EXPECT_FALSE(curve.known());
  EXPECT_FALSE(curve.estimate(4).has_value());
  curve.observe(4, 2 * ms);
  EXPECT_TRUE(curve.known());
  EXPECT_DOUBLE_EQ(*curve.estimate(1), 2 * ms) << "one point: flat";
  EXPECT_DOUBLE_EQ(*curve.estimate(100), 2 * ms);
}

TEST(CostCurve, InterpolatesBetweenAndExtrapolatesBeyondWhatItMeasured) {
  cost_curve curve;
  curve.observe(2, 1 * ms);
  curve.observe(6, 3 * ms);
  EXPECT_NEAR(*curve.estimate(4), 2 * ms, 1e-12);
  EXPECT_NEAR(*curve.estimate(10), 5 * ms, 1e-12);
  EXPECT_NEAR(*curve.estimate(1), 0.5 * ms, 1e-12);
  curve.observe(3, 0.2 * ms);  // noise: a larger step measured cheaper than a smaller one
  EXPECT_GE(*curve.estimate(3), *curve.estimate(2) - 1e-12) << "never decreasing with size";
}

TEST(CostCurve, SmoothsRepeatedMeasurementsAndBucketsLargeSizes) {
  cost_curve curve;
  curve.observe(1, 1 * ms);
  for (int i = 0; i < 200; ++i) curve.observe(1, 3 * ms);
  EXPECT_NEAR(*curve.estimate(1), 3 * ms, 1e-6) << "recent measurements dominate";
  curve.observe(100, 10 * ms);
  curve.observe(101, 12 * ms);  // same bucket as 100 (1/8 of a doubling)
  EXPECT_GT(*curve.estimate(100), 10 * ms);
  EXPECT_LT(*curve.estimate(100), 12 * ms);
}

TEST(CostCurve, IgnoresMeaninglessMeasurements) {
  cost_curve curve;
  curve.observe(0, 1 * ms);
  curve.observe(3, -1);
  EXPECT_FALSE(curve.known());
}

TEST(SpeculationCost, EveryoneSpeculatesUntilTheTargetsCostIsMeasured) {
  const speculation_cost_model model;
  EXPECT_EQ(model.worth_speculating(alike(5, 0.1, 4), 5, 5), 5u);
}

TEST(SpeculationCost, AMemoryBoundStepSpeculatesAndAComputeBoundOneDoesNot) {
  // Reading the weights dominates: 4 more tokens cost 4% more.
  const speculation_cost_model memory_bound = linear_target(1 * ms, 0.01 * ms, 200);
  EXPECT_EQ(memory_bound.worth_speculating(alike(1, 0.5, 4), 1, 1), 1u);
  // Every token costs the same: verifying 4 drafts at 50% costs 5x for 3x the tokens.
  const speculation_cost_model compute_bound = linear_target(0.01 * ms, 1 * ms, 200);
  EXPECT_EQ(compute_bound.worth_speculating(alike(32, 0.5, 4), 32, 32), 0u);
}

// What the demo model measured: a prefill of 560 tokens in 8.9 ms, verify
// steps of 5 tokens in 1.25 ms, one-token steps in 0.5 ms. A sequence that
// speculates from its first decode feeds no one-token step: its cost is then
// extrapolated from the verify step with the prefill's slope, nearly the
// verify step's, and drafts accepted at 30% look worth it. With the
// one-token step timed at load (scheduler_loop seeds it) they are not.
TEST(SpeculationCost, AOneTokenStepNeverMeasuredIsExtrapolatedFromLargerOnes) {
  speculation_cost_model unseeded, seeded;
  seeded.observe_target_step(1, 0.5 * ms);
  for (speculation_cost_model* model : {&unseeded, &seeded}) {
    model->observe_target_step(560, 8.9 * ms);
    model->observe_target_step(5, 1.25 * ms);
  }
  EXPECT_GT(unseeded.target_step_s(1).value_or(0), 1.1 * ms);
  EXPECT_EQ(unseeded.worth_speculating(alike(1, 0.3, 4), 1, 1), 1u) << "2.2 tokens in 1.25 ms against 1 in 1.2";
  EXPECT_DOUBLE_EQ(seeded.target_step_s(1).value_or(0), 0.5 * ms);
  EXPECT_EQ(seeded.worth_speculating(alike(1, 0.3, 4), 1, 1), 0u) << "2.2 tokens in 1.25 ms against 2.5";
}

TEST(SpeculationCost, TheBatchSizeTurnsItDown) {
  // 1 ms fixed + 0.05 ms per token: at batch 1 drafts are nearly free, at batch 32 they cost 3.2x the plain tokens.
  const speculation_cost_model model = linear_target(1 * ms, 0.05 * ms, 200);
  EXPECT_EQ(model.worth_speculating(alike(1, 0.4, 4), 1, 1), 1u);
  EXPECT_EQ(model.worth_speculating(alike(32, 0.4, 4), 32, 32), 0u);
}

TEST(SpeculationCost, AnExpensiveDraftRoundTurnsItDown) {
  speculation_cost_model model = linear_target(1 * ms, 0.01 * ms, 200);
  EXPECT_DOUBLE_EQ(model.draft_round_s(1, 4), 0) << "no draft round measured yet";
  model.observe_draft_round(1, 4, 4 * ms);  // each draft step costs as much as a target step
  EXPECT_NEAR(model.draft_round_s(1, 4), 4 * ms, 1e-12);
  EXPECT_EQ(model.worth_speculating(alike(1, 0.5, 4), 1, 1), 0u) << "3 tokens in 5 ms is worse than 1 in 1 ms";
  model.observe_draft_round(1, 4, 0.4 * ms);
  for (int i = 0; i < 100; ++i) model.observe_draft_round(1, 4, 0.4 * ms);
  EXPECT_EQ(model.worth_speculating(alike(1, 0.5, 4), 1, 1), 1u) << "a cheap draft model pays";
}

TEST(SpeculationCost, OnlyTheSequencesWhoseDraftsAreAcceptedSpeculate) {
  // Each draft token costs 10% of a plain step: worth it at acceptance above about 0.1 per slot.
  const speculation_cost_model model = linear_target(1 * ms, 0.1 * ms, 200);
  const std::vector<speculation_candidate> candidates = {{0.9, 4}, {0.8, 4}, {0.0, 4}, {0.0, 4}};
  EXPECT_EQ(model.worth_speculating(candidates, 4, 4), 2u);
}

TEST(SpeculationCost, ATreeIsValuedByItsDepthAndCostsTheSlotsItFills) {
  const speculation_candidate chain = tree_candidate(0.5, 6, 1, 1.0);
  EXPECT_EQ(chain.slots, 6);
  EXPECT_EQ(chain.depth, 6);
  const speculation_candidate tree = tree_candidate(0.5, 12, 3, 1.0);  // 3 branches of 4
  EXPECT_EQ(tree.slots, 12);
  EXPECT_EQ(tree.depth, 4);
  const speculation_candidate trimmed = tree_candidate(0.5, 5, 4, 1.0);  // the scheduler cut the grant to 5
  EXPECT_EQ(trimmed.slots, 5);
  EXPECT_EQ(trimmed.depth, 2);
  // The draft model's tree of 3 branches of 4 feeds its chain and 2 siblings: 6 of 12.
  const speculation_candidate fed = tree_candidate(0.5, 12, 3, 0.5);
  EXPECT_EQ(fed.slots, 6);
  EXPECT_EQ(fed.depth, 4);
  EXPECT_EQ(tree_candidate(0.5, 12, 3, 0.0).slots, 1) << "at least one draft";
}

TEST(SpeculationCost, ATreesBranchesCostVerificationButAddNoDepth) {
  // 1 ms a step + 0.5 ms a token, acceptance 0.5 of the depth. A chain of
  // 4: 3 tokens in 3.5 ms beats 1 in 1.5. Three branches of 4 verify 12
  // drafts for the same depth: 3 tokens in 7.5 ms loses (counted as 12
  // chained slots it would have looked like 7 tokens in 7.5 ms and won).
  const speculation_cost_model model = linear_target(1 * ms, 0.5 * ms, 200);
  EXPECT_EQ(model.worth_speculating(std::vector{tree_candidate(0.5, 4, 1, 1.0)}, 1, 1), 1u);
  EXPECT_EQ(model.worth_speculating(std::vector{tree_candidate(0.5, 12, 3, 1.0)}, 1, 1), 0u);
}

TEST(SpeculationCost, ATreesDraftRoundRunsItsDepthInSteps) {
  // 1 ms a step + 0.1 ms a token; a draft step costs 0.7 ms. Two branches
  // of 4 at acceptance 0.9: 4.6 tokens in 1.9 ms + 4 draft steps (4.7 ms)
  // beat 1 in 1.1; charged 8 draft steps (7.5 ms) they would not.
  speculation_cost_model model = linear_target(1 * ms, 0.1 * ms, 200);
  model.observe_draft_round(1, 4, 2.8 * ms);
  EXPECT_EQ(model.worth_speculating(std::vector{tree_candidate(0.9, 8, 2, 1.0)}, 1, 1), 1u);
}

TEST(SpeculationCost, StepOverheadMakesSpeculationCheaperRelatively) {
  speculation_cost_model model = linear_target(0.1 * ms, 0.1 * ms, 200);
  // 1 token: 0.2 ms; with 4 drafts at 20%: 1.8 tokens in 0.6 ms — worse.
  EXPECT_EQ(model.worth_speculating(alike(1, 0.2, 4), 1, 1), 0u);
  model.set_step_overhead(2 * ms);  // the scheduler's turnaround dwarfs the step
  EXPECT_EQ(model.worth_speculating(alike(1, 0.2, 4), 1, 1), 1u);
}

// Whatever it chooses is, by the same costs, at least as fast as decoding plainly.
TEST(SpeculationCost, TheChoiceIsNeverSlowerThanPlainDecodingByItsCosts) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int trial = 0; trial < 500; ++trial) {
    const double fixed = (0.05 + unit(rng)) * ms, per_token = unit(rng) * 0.2 * ms;
    speculation_cost_model model = linear_target(fixed, per_token, 400);
    const double draft_step = unit(rng) * 0.5 * ms;
    model.observe_draft_round(1, 1, draft_step);
    const auto batch = static_cast<std::int32_t>(1 + rng() % 48);
    std::vector<speculation_candidate> candidates;
    for (std::int32_t i = 0; i < batch; ++i)
      candidates.push_back({unit(rng), static_cast<std::int32_t>(1 + rng() % 4)});
    std::sort(candidates.begin(), candidates.end(), [](auto& a, auto& b) { return a.acceptance > b.acceptance; });
    const std::size_t chosen = model.worth_speculating(candidates, batch, batch);
    double tokens = batch, fed = batch;
    std::int32_t steps = 0;
    for (std::size_t i = 0; i < chosen; ++i) {
      tokens += candidates[i].acceptance * candidates[i].slots;
      fed += candidates[i].slots;
      steps = std::max(steps, candidates[i].slots);
    }
    const double plain_rate = batch / (fixed + per_token * batch);
    const double chosen_rate = tokens / (fixed + per_token * fed + steps * draft_step);
    EXPECT_GE(chosen_rate, plain_rate * (1 - 1e-9)) << "trial " << trial;
  }
}

}  // namespace
}  // namespace troupe::testing

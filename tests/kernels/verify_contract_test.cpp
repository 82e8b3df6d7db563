// The verify_group contract: what validate_step_batch and the backend
// reject, and the helpers a proposer computes its q rows and drafts with.

#include <gtest/gtest.h>

#include <numeric>

#include "kernels/speculative.hpp"
#include "tests/kernels/cpu_test_support.hpp"
#include "tests/kernels/verify_step_support.hpp"

namespace troupe {
namespace {

using test::group_rows;
using test::step_part;

struct two_groups {
  sampling_params params;
  std::vector<std::int32_t> drafts = {4, 2};
  group_rows first{params, 7, 0, {1}, drafts};
  group_rows second{params, 8, 3, {}, {6}};
  std::vector<float> row = std::vector<float>(10, 0.0f);
  step_batch batch =
      test::make_verify_batch({step_part{{row, row, row}, first.rows, drafts, {}},
                               step_part{{row}, {sampling_row{&params, 9, 0, {}, {}, {}}}, {}, {}, false},
                               step_part{{row, row}, second.rows, {6}, {}}});

  std::string problem() const { return validate_step_batch(batch, test::verify_cache_spec(3)); }
};

TEST(VerifyContract, AWellFormedStepPasses) {
  const two_groups g;
  EXPECT_EQ(g.problem(), "");
  EXPECT_EQ(rows_outside_groups(g.batch), std::vector<std::int32_t>{3});
}

TEST(VerifyContract, GroupsMustLieInsideTheRowsInOrderAndApart) {
  two_groups g;
  g.batch.verify[1].first_row = 5;
  EXPECT_EQ(g.problem(), "a verify group's rows lie outside the logits rows");
  g.batch.verify[1].first_row = 2;
  EXPECT_EQ(g.problem(), "verify groups overlap or are not in row order");
  std::swap(g.batch.verify[0], g.batch.verify[1]);
  g.batch.verify[0].first_row = 4;
  EXPECT_EQ(g.problem(), "verify groups overlap or are not in row order");
}

TEST(VerifyContract, GroupsMustBeFedTheirDraftsInOneSequence) {
  two_groups g;
  g.batch.token_ids[2] = 3;
  EXPECT_EQ(g.problem(), "a verify group's drafts are not the tokens fed after its rows");
  two_groups spanning;
  spanning.batch.verify[1].first_row = 3;  // the ordinary row's sequence and the next
  spanning.batch.verify[1].drafts = {0};
  EXPECT_EQ(spanning.problem(), "a verify group's rows are not consecutive tokens of one sequence");
}

TEST(VerifyContract, GroupRowsMustFollowTheDrafts) {
  two_groups g;
  g.batch.sampling[1].token_index = 5;
  EXPECT_EQ(g.problem(), "a verify group's token_index does not count up by one");
  two_groups outputs;
  outputs.batch.sampling[2].output_tokens = outputs.first.outputs[1];
  EXPECT_EQ(outputs.problem(),
            "a verify group row's output_tokens are not the first row's followed by the drafts before it");
  two_groups seeds;
  seeds.batch.sampling[5].seed = 1;
  EXPECT_EQ(seeds.problem(), "the rows of a verify group differ in params or seed");
  two_groups none;
  none.batch.sampling.clear();
  EXPECT_EQ(none.problem(), "verify groups need sampling rows");
}

TEST(VerifyContract, DraftProbabilitiesMustBeOneVocabularyRowPerDraft) {
  two_groups g;
  const std::vector<float> q(15, 0.1f);
  g.batch.verify[0].draft_probs = std::span(q).first(15);
  EXPECT_EQ(g.problem(), "a verify group's draft_probs is not one row per draft");
  g.batch.verify[0].draft_probs = std::span(q).first(14);
  EXPECT_EQ(g.problem(), "");  // the vocabulary is the backend's to check
  auto b = test::make_backend_at(cpu::detected_isa());
  const auto plan = b->plan_step(g.batch, test::verify_cache_spec(3), {1, 1, 2, 1.0f, {.head_dim = 2}});
  device_buffer logits = b->allocate(6 * 10 * sizeof(float));
  const tensor_view view = logits.view(dtype::f32, 6, 10);
  std::fill_n(view.as<float>(), 60, 0.0f);
  EXPECT_THROW(b->sample(*plan, view), std::invalid_argument);
  const std::vector<float> right(20, 0.1f);
  g.batch.verify[0].draft_probs = right;
  EXPECT_NO_THROW(b->sample(*plan, view));
}

TEST(VerifyContract, ProcessedDistributionIsWhatTheSamplerDrawsFrom) {
  test::random_source rng;
  SCOPED_TRACE(rng.trace());
  auto b = test::make_backend_at(cpu::detected_isa());
  sampling_params p;
  p.temperature = 0.7f;
  p.top_k = 6;
  p.top_p = 0.95f;
  p.frequency_penalty = 0.5f;
  const std::vector<std::int32_t> outputs = {2, 2, 5};
  const std::vector<float> logits = rng.floats(30, -2.0f, 2.0f);
  const sampling_row base{&p, 0, 0, {}, outputs, {}};
  const std::vector<float> q = processed_distribution(logits, base);
  ASSERT_EQ(q.size(), logits.size());
  EXPECT_NEAR(std::accumulate(q.begin(), q.end(), 0.0), 1.0, 1e-6);
  EXPECT_LE(std::count_if(q.begin(), q.end(), [](float x) { return x > 0.0f; }), 6);
  int agree = 0;
  const int draws = 500;
  for (int seed = 0; seed < draws; ++seed) {
    const sampling_row row{&p, static_cast<std::uint64_t>(seed), 4, {}, outputs, {}};
    test::verify_step step(*b, {step_part{{logits}, {row}, {}, {}, false}});
    const std::int32_t drawn = step.sample(*b).rows[0].token;
    agree += drawn == draw_from_distribution(q, philox_uniform(row.seed, row.token_index)) ? 1 : 0;
  }
  EXPECT_GE(agree, draws - 2) << "only a rounding boundary may separate the two draws";

  sampling_params greedy;
  greedy.temperature = 0.0f;
  const std::vector<float> point = processed_distribution(logits, {&greedy, 0, 0, {}, {}, {}});
  const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
  EXPECT_EQ(point[static_cast<std::size_t>(best)], 1.0f);
  EXPECT_EQ(std::accumulate(point.begin(), point.end(), 0.0f), 1.0f);
}

TEST(VerifyContract, TheAcceptAndDraftStreamsAreNotTheDrawStream) {
  int equal = 0;
  for (std::uint64_t i = 0; i < 1000; ++i) {
    equal += accept_uniform(42, i) == philox_uniform(42, i) ? 1 : 0;
    equal += draft_uniform(42, i) == philox_uniform(42, i) ? 1 : 0;
    equal += draft_uniform(42, i) == accept_uniform(42, i) ? 1 : 0;
  }
  EXPECT_EQ(equal, 0);
}

}  // namespace
}  // namespace troupe

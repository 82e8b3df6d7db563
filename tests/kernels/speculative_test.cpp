// Verification of draft tokens (rules 7-10 of kernels/sampling.hpp) through
// the CPU backend's sample(): greedy acceptance, the penalties seeing the
// drafts, seeded determinism in any batch, and the step validation.

#include "kernels/speculative.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tests/kernels/cpu_test_support.hpp"
#include "tests/kernels/verify_step_support.hpp"

namespace troupe {
namespace {

using test::group_rows;
using test::random_source;
using test::step_part;
using test::verify_step;

sampling_params greedy_params() {
  sampling_params p;
  p.temperature = 0.0f;
  return p;
}

// Row r's argmax is argmaxes[r] (vocab 8, the rest below).
std::vector<std::vector<float>> rows_with_argmax(const std::vector<int>& argmaxes) {
  std::vector<std::vector<float>> rows;
  for (std::size_t r = 0; r < argmaxes.size(); ++r) {
    std::vector<float> row(8);
    for (std::size_t i = 0; i < row.size(); ++i) row[i] = 0.1f * static_cast<float>((i * 3 + r) % 8);
    row[static_cast<std::size_t>(argmaxes[r])] = 3.0f;
    rows.push_back(row);
  }
  return rows;
}

struct verified {
  sample_result result;
  std::vector<std::int32_t> tokens;  // of the one group's rows
};

verified verify_alone(backend& b, const std::vector<std::vector<float>>& logits, const sampling_params& p,
                      const std::vector<std::int32_t>& drafts, std::uint64_t seed = 1,
                      std::span<const float> draft_probs = {}) {
  const group_rows g(p, seed, 0, {}, drafts);
  verify_step step(b, {step_part{logits, g.rows, drafts, draft_probs}});
  verified v{step.sample(b), {}};
  for (const auto& row : v.result.rows) v.tokens.push_back(row.token);
  return v;
}

double log_softmax_at(const std::vector<float>& row, int id) {
  const double max = *std::max_element(row.begin(), row.end());
  double total = 0.0;
  for (float x : row) total += std::exp(x - max);
  return row[static_cast<std::size_t>(id)] - max - std::log(total);
}

TEST(Verify, GreedyAcceptsMatchingDraftsAndAddsTheBonus) {
  auto b = test::make_backend_at(cpu::detected_isa());
  const auto p = greedy_params();
  const verified v = verify_alone(*b, rows_with_argmax({3, 1, 4, 2}), p, {3, 1, 4});
  EXPECT_EQ(v.result.accepted, std::vector<std::int32_t>{3});
  EXPECT_EQ(v.tokens, (std::vector<std::int32_t>{3, 1, 4, 2}));
}

TEST(Verify, GreedyStopsAtTheFirstMismatchWithTheArgmax) {
  auto b = test::make_backend_at(cpu::detected_isa());
  const auto p = greedy_params();
  const auto logits = rows_with_argmax({3, 1, 4, 2});
  const verified first = verify_alone(*b, logits, p, {5, 1, 4});
  EXPECT_EQ(first.result.accepted, std::vector<std::int32_t>{0});
  EXPECT_EQ(first.tokens, (std::vector<std::int32_t>{3, -1, -1, -1}));
  const verified middle = verify_alone(*b, logits, p, {3, 2, 4});
  EXPECT_EQ(middle.result.accepted, std::vector<std::int32_t>{1});
  EXPECT_EQ(middle.tokens, (std::vector<std::int32_t>{3, 1, -1, -1}));
  const verified last = verify_alone(*b, logits, p, {3, 1, 7});
  EXPECT_EQ(last.result.accepted, std::vector<std::int32_t>{2});
  EXPECT_EQ(last.tokens, (std::vector<std::int32_t>{3, 1, 4, -1}));
}

TEST(Verify, GreedyTiesGoToTheLowestId) {
  auto b = test::make_backend_at(cpu::detected_isa());
  const auto p = greedy_params();
  auto logits = rows_with_argmax({4, 6});
  logits[0][2] = 3.0f;  // ties with 4
  const verified higher = verify_alone(*b, logits, p, {4});
  EXPECT_EQ(higher.result.accepted, std::vector<std::int32_t>{0});
  EXPECT_EQ(higher.tokens, (std::vector<std::int32_t>{2, -1}));
  const verified lowest = verify_alone(*b, logits, p, {2});
  EXPECT_EQ(lowest.tokens, (std::vector<std::int32_t>{2, 6}));
}

TEST(Verify, EmittedTokensCarryTheirOwnRowsLogprobs) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  auto b = test::make_backend_at(cpu::detected_isa());
  sampling_params p = greedy_params();
  p.logprobs = true;
  p.top_logprobs = 3;
  std::vector<std::vector<float>> logits;
  for (int r = 0; r < 3; ++r) logits.push_back(rng.floats(40, -3.0f, 3.0f));
  const auto argmax = [&](int r) {
    return static_cast<std::int32_t>(std::max_element(logits[r].begin(), logits[r].end()) - logits[r].begin());
  };
  const verified v = verify_alone(*b, logits, p, {argmax(0), (argmax(1) + 1) % 40});
  ASSERT_EQ(v.result.accepted, std::vector<std::int32_t>{1});
  for (int r = 0; r < 2; ++r) {
    const sample_output& out = v.result.rows[static_cast<std::size_t>(r)];
    EXPECT_EQ(out.token, argmax(r));
    EXPECT_NEAR(out.logprob, log_softmax_at(logits[r], out.token), 1e-5);
    ASSERT_EQ(out.top.size(), 3u);
    EXPECT_EQ(out.top.front().token, argmax(r));
  }
  EXPECT_TRUE(v.result.rows[2].top.empty());
}

void expect_same(const sample_output& a, const sample_output& b) {
  EXPECT_EQ(a.token, b.token);
  EXPECT_EQ(a.logprob, b.logprob);
  ASSERT_EQ(a.top.size(), b.top.size());
  for (std::size_t i = 0; i < a.top.size(); ++i) {
    EXPECT_EQ(a.top[i].token, b.top[i].token);
    EXPECT_EQ(a.top[i].logprob, b.top[i].logprob);
  }
}

TEST(Verify, AGroupWithoutDraftsIsTheOrdinaryRowBitForBit) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  for (cpu::isa_level level : test::supported_levels()) {
    auto b = test::make_backend_at(level);
    sampling_params p;
    p.temperature = 0.8f;
    p.top_k = 30;
    p.top_p = 0.9f;
    p.repetition_penalty = 1.2f;
    p.logprobs = true;
    p.top_logprobs = 4;
    const std::vector<std::int32_t> outputs = {3, 3, 17};
    for (std::uint64_t seed = 0; seed < 40; ++seed) {
      const std::vector<float> logits = rng.floats(300, -2.0f, 2.0f);
      const group_rows g(p, seed, 5, outputs, {});
      verify_step as_group(*b, {step_part{{logits}, g.rows, {}, {}}});
      verify_step as_row(*b, {step_part{{logits}, g.rows, {}, {}, false}});
      const sample_result grouped = as_group.sample(*b), ordinary = as_row.sample(*b);
      EXPECT_EQ(grouped.accepted, std::vector<std::int32_t>{0});
      EXPECT_TRUE(ordinary.accepted.empty());
      expect_same(grouped.rows[0], ordinary.rows[0]);
    }
  }
}

// A greedy chain under penalties and bias: each row sampled on its own with
// the chain so far as outputs, the way decoding without drafts would.
std::vector<std::int32_t> ordinary_chain(backend& b, const std::vector<std::vector<float>>& logits,
                                         const sampling_params& p, const std::vector<std::int32_t>& base) {
  std::vector<std::int32_t> outputs = base, chain;
  for (const auto& row : logits) {
    const sampling_row sampling{&p, 1, outputs.size(), {}, outputs, {}};
    verify_step step(b, {step_part{{row}, {sampling}, {}, {}, false}});
    chain.push_back(step.sample(b).rows[0].token);
    outputs.push_back(chain.back());
  }
  return chain;
}

TEST(Verify, PenaltiesAndBiasCountTheAcceptedDraftsAsOutputs) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  auto b = test::make_backend_at(cpu::detected_isa());
  sampling_params p = greedy_params();
  p.repetition_penalty = 1.3f;
  p.frequency_penalty = 0.8f;
  p.presence_penalty = 0.5f;
  p.logit_bias = {{11, 1.5f}, {12, 1.4f}};
  std::vector<std::vector<float>> logits;
  for (int r = 0; r < 5; ++r) {
    logits.push_back(rng.floats(50, -1.0f, 1.0f));
    logits.back()[7] = 2.0f;  // the favourite of every row until penalised
  }
  const std::vector<std::int32_t> base = {7, 30};
  const std::vector<std::int32_t> chain = ordinary_chain(*b, logits, p, base);
  ASSERT_NE(chain[1], chain[0]) << "the penalties should change the argmax along the chain";
  const std::vector<std::int32_t> drafts(chain.begin(), chain.end() - 1);
  for (std::size_t wrong = 0; wrong <= drafts.size(); ++wrong) {
    std::vector<std::int32_t> proposed = drafts;
    if (wrong < proposed.size()) proposed[wrong] = (proposed[wrong] + 1) % 50;
    const group_rows g(p, 1, base.size(), base, proposed);
    verify_step step(*b, {step_part{logits, g.rows, proposed, {}}});
    const sample_result result = step.sample(*b);
    ASSERT_EQ(result.accepted, std::vector<std::int32_t>{static_cast<std::int32_t>(wrong)});
    for (std::size_t r = 0; r <= wrong; ++r) EXPECT_EQ(result.rows[r].token, chain[r]) << "row " << r;
  }
}

TEST(Verify, TopPBiasAndSuppressionDecideSampledAcceptance) {
  auto b = test::make_backend_at(cpu::detected_isa());
  std::vector<float> row(20, 0.0f);
  row[1] = 4.0f, row[2] = 3.5f, row[9] = -3.0f;
  sampling_params nucleus;
  nucleus.top_p = 0.5f;  // keeps id 1 alone
  sampling_params biased;
  biased.logit_bias = {{9, 40.0f}};  // makes id 9 all but certain
  const std::vector<std::int32_t> suppress_one = {1};
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    const verified outside = verify_alone(*b, {row, row}, nucleus, {2}, seed);
    EXPECT_EQ(outside.result.accepted, std::vector<std::int32_t>{0});
    EXPECT_EQ(outside.tokens[0], 1);
    const verified inside = verify_alone(*b, {row, row}, nucleus, {1}, seed);
    EXPECT_EQ(inside.tokens, (std::vector<std::int32_t>{1, 1}));
    const verified certain = verify_alone(*b, {row, row}, biased, {9}, seed);
    EXPECT_EQ(certain.tokens, (std::vector<std::int32_t>{9, 9}));
    sampling_params plain;
    const group_rows g(plain, seed, 0, {}, {1}, suppress_one);
    verify_step step(*b, {step_part{{row, row}, g.rows, {1}, {}}});
    const sample_result suppressed = step.sample(*b);
    EXPECT_EQ(suppressed.accepted, std::vector<std::int32_t>{0});
    EXPECT_NE(suppressed.rows[0].token, 1);
  }
}

// A sampled group with random q rows and drafts drawn from them.
struct sampled_group {
  std::vector<std::vector<float>> logits;
  std::vector<std::int32_t> drafts;
  std::vector<float> q;
};

sampled_group random_group(random_source& rng, const sampling_params& p, std::uint64_t seed, int drafts, int vocab) {
  sampled_group g;
  for (int r = 0; r <= drafts; ++r) g.logits.push_back(rng.floats(static_cast<std::size_t>(vocab), -2.0f, 2.0f));
  for (int r = 0; r < drafts; ++r) {
    // The draft model: the target row plus noise, through the same transforms.
    std::vector<float> draft_logits = g.logits[static_cast<std::size_t>(r)];
    for (float& x : draft_logits) x += rng.uniform(-1.0f, 1.0f);
    const sampling_row row{&p, seed, static_cast<std::uint64_t>(r), {}, {}, {}};
    const std::vector<float> q = processed_distribution(draft_logits, row);
    g.drafts.push_back(draw_from_distribution(q, draft_uniform(seed, static_cast<std::uint64_t>(r))));
    g.q.insert(g.q.end(), q.begin(), q.end());
  }
  return g;
}

TEST(Verify, SeededGroupGivesTheSameResultAloneAndInABatch) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  auto b = test::make_backend_at(cpu::detected_isa(), {.threads = 3});
  sampling_params p;
  p.temperature = 0.9f;
  p.top_k = 40;
  p.logprobs = true;
  p.top_logprobs = 2;
  const int vocab = 200;
  for (std::uint64_t seed = 100; seed < 130; ++seed) {
    const sampled_group g = random_group(rng, p, seed, 4, vocab);
    const group_rows rows(p, seed, 0, {}, g.drafts);
    verify_step alone(*b, {step_part{g.logits, rows.rows, g.drafts, g.q}});
    const sample_result single = alone.sample(*b);

    const sampled_group other = random_group(rng, p, seed + 1000, 3, vocab);
    const group_rows other_rows(p, seed + 1000, 7, {}, other.drafts);
    const std::vector<float> neighbour = rng.floats(vocab, -2.0f, 2.0f);
    const sampling_row neighbour_row{&p, seed + 2000, 3, {}, {}, {}};
    verify_step batched(
        *b, {step_part{{neighbour}, {neighbour_row}, {}, {}, false},
             step_part{other.logits, other_rows.rows, other.drafts, other.q},
             step_part{g.logits, rows.rows, g.drafts, g.q}, step_part{{neighbour}, {neighbour_row}, {}, {}, false}});
    const sample_result inside = batched.sample(*b);
    ASSERT_EQ(inside.accepted.size(), 2u);
    EXPECT_EQ(inside.accepted[1], single.accepted[0]);
    for (std::size_t r = 0; r < single.rows.size(); ++r) expect_same(inside.rows[1 + 4 + r], single.rows[r]);
    expect_same(inside.rows[0], inside.rows.back());
  }
}

TEST(Verify, TheBonusTokenIsTheOrdinaryDrawOfTheLastRow) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  auto b = test::make_backend_at(cpu::detected_isa());
  sampling_params p;
  p.temperature = 1.1f;
  p.min_p = 0.05f;
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    std::vector<std::vector<float>> logits = {rng.floats(64), rng.floats(64), rng.floats(64)};
    logits[0][5] = logits[1][5] = 60.0f;  // both drafts of 5 are accepted
    const group_rows g(p, seed, 9, {1}, {5, 5});
    verify_step step(*b, {step_part{logits, g.rows, {5, 5}, {}}});
    const sample_result verified = step.sample(*b);
    ASSERT_EQ(verified.accepted, std::vector<std::int32_t>{2});
    verify_step last(*b, {step_part{{logits[2]}, {g.rows[2]}, {}, {}, false}});
    expect_same(verified.rows[2], last.sample(*b).rows[0]);
  }
}

}  // namespace
}  // namespace troupe

// backend::sample against an independent double-precision reference of the
// rules in kernels/sampling.hpp (full sort, no partial selection).

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <span>

#include "kernels/philox.hpp"
#include "tests/kernels/cpu_test_support.hpp"
#include "tests/kernels/sampling_step_support.hpp"

namespace troupe {
namespace {

using test::random_source;
using test::sampling_step;

struct reference_draw {
  std::vector<double> adjusted;  // logits after steps 1-2
  std::vector<double> logprobs;  // step 3
  std::vector<int> kept;         // ascending ids (empty when greedy)
  std::vector<double> probs;     // renormalised, aligned with kept
  int greedy = -1;
  bool ambiguous = false;  // a filter boundary lies within float rounding
};

/// The tokens besides the logits that shape a draw.
struct token_history {
  std::span<const int> prompt;      ///< for the repetition penalty
  std::span<const int> output;      ///< for all penalties
  std::span<const int> suppressed;  ///< forced to -inf
};

reference_draw reference(const std::vector<float>& logits, const sampling_params& p,
                         const token_history& history = {}) {
  const auto& [prompt, output, suppressed] = history;
  reference_draw r;
  const int vocab = static_cast<int>(logits.size());
  r.adjusted.assign(logits.begin(), logits.end());
  for (auto [id, bias] : p.logit_bias)
    r.adjusted[static_cast<std::size_t>(id)] = static_cast<float>(logits[static_cast<std::size_t>(id)] + bias);
  for (int id : suppressed) r.adjusted[static_cast<std::size_t>(id)] = -INFINITY;
  std::set<int> seen(prompt.begin(), prompt.end());
  seen.insert(output.begin(), output.end());
  for (int id : seen) {
    double& x = r.adjusted[static_cast<std::size_t>(id)];
    x = x > 0 ? x / p.repetition_penalty : x * p.repetition_penalty;
  }
  std::map<int, int> counts;
  for (int id : output) ++counts[id];
  for (auto [id, n] : counts) r.adjusted[static_cast<std::size_t>(id)] -= p.frequency_penalty * n + p.presence_penalty;
  const double max = *std::max_element(r.adjusted.begin(), r.adjusted.end());
  double total = 0.0;
  for (double x : r.adjusted) total += std::exp(x - max);
  for (double x : r.adjusted) r.logprobs.push_back(x - max - std::log(total));
  if (p.temperature == 0.0f || p.top_k == 1) {
    r.greedy = static_cast<int>(std::max_element(r.adjusted.begin(), r.adjusted.end()) - r.adjusted.begin());
    return r;
  }
  std::vector<int> order(static_cast<std::size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  std::vector<double> z(r.adjusted.size());  // logits are f32, and so is their division by the temperature
  for (std::size_t i = 0; i < z.size(); ++i) z[i] = static_cast<float>(r.adjusted[i]) / p.temperature;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return z[static_cast<std::size_t>(a)] > z[static_cast<std::size_t>(b)]; });
  if (p.top_k > 0 && p.top_k < vocab) order.resize(static_cast<std::size_t>(p.top_k));
  const double z_max = z[static_cast<std::size_t>(order[0])];
  double kept_total = 0.0;
  for (int id : order) kept_total += std::exp(z[static_cast<std::size_t>(id)] - z_max);
  if (p.top_p < 1.0f) {
    const double target = p.top_p * kept_total;
    double cumulative = 0.0;
    std::size_t n = 0;
    while (n < order.size() && cumulative < target)
      cumulative += std::exp(z[static_cast<std::size_t>(order[n++])] - z_max);
    const double before = cumulative - std::exp(z[static_cast<std::size_t>(order[n - 1])] - z_max);
    // A boundary within float rounding of the target may rightly fall either way.
    r.ambiguous = cumulative - target < 1e-5 * kept_total || target - before < 1e-5 * kept_total;
    order.resize(n);
  }
  for (int id : order) {
    const double ratio = std::exp(z[static_cast<std::size_t>(id)] - z_max);
    if (p.min_p > 0.0f && std::abs(ratio - p.min_p) < 1e-5) r.ambiguous = true;
  }
  std::erase_if(order, [&](int id) { return std::exp(z[static_cast<std::size_t>(id)] - z_max) < p.min_p; });
  std::sort(order.begin(), order.end());
  double sum = 0.0;
  for (int id : order) sum += std::exp(z[static_cast<std::size_t>(id)] - z_max);
  r.kept = order;
  for (int id : order) r.probs.push_back(std::exp(z[static_cast<std::size_t>(id)] - z_max) / sum);
  return r;
}

// The reference's token for `u`, or -1 when u lies within `margin` of a
// boundary between two ids or a filter boundary is that close (float and
// double may then rightly disagree).
int reference_token(const reference_draw& r, float u, double margin = 1e-5) {
  if (r.greedy >= 0) return r.greedy;
  if (r.ambiguous) return -1;
  double cumulative = 0.0;
  for (std::size_t i = 0; i < r.kept.size(); ++i) {
    cumulative += r.probs[i];
    if (std::abs(cumulative - u) < margin) return -1;
    if (cumulative > u) return r.kept[i];
  }
  return r.kept.back();
}

class SamplingAtLevel : public ::testing::TestWithParam<cpu::isa_level> {};

TEST_P(SamplingAtLevel, DrawsTheReferenceTokenUnderEveryFilter) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  auto b = test::make_backend_at(GetParam());
  std::vector<sampling_params> settings(7);
  settings[0].temperature = 1.0f;
  settings[1].temperature = 0.7f;
  settings[2].temperature = 1.3f, settings[2].top_k = 5;
  settings[3].temperature = 0.9f, settings[3].top_p = 0.6f;
  settings[4].temperature = 1.0f, settings[4].min_p = 0.2f;
  settings[5].temperature = 0.8f, settings[5].top_k = 40, settings[5].top_p = 0.9f, settings[5].min_p = 0.02f;
  settings[6].temperature = 1.1f, settings[6].top_p = 0.97f;  // a nucleus wider than the first candidates
  for (int vocab : {7, 300, 5000}) {
    std::vector<std::vector<float>> rows;
    std::vector<sampling_row> sampling;
    for (const sampling_params& p : settings) {
      for (std::uint64_t seed = 0; seed < 12; ++seed) {
        rows.push_back(rng.floats(static_cast<std::size_t>(vocab), -3.0f, 3.0f));
        if (vocab == 5000) std::fill(rows.back().begin(), rows.back().end() - 10, 0.1f);  // flat tail: wide nucleus
        sampling.push_back({.params = &p, .seed = seed * 7919 + 13, .token_index = seed});
      }
    }
    sampling_step step(*b, rows, sampling);
    const auto results = b->sample(*step.plan, step.view).rows;
    ASSERT_EQ(results.size(), rows.size());
    std::size_t checked = 0;
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const reference_draw want = reference(rows[r], *sampling[r].params);
      const int token = reference_token(want, philox_uniform(sampling[r].seed, sampling[r].token_index));
      if (token >= 0) {
        EXPECT_EQ(results[r].token, token) << "row " << r << " vocab " << vocab;
        ++checked;
      }
    }
    EXPECT_GT(checked, rows.size() * 3 / 4) << "too many draws sit on a rounding boundary to check";
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, SamplingAtLevel, ::testing::ValuesIn(test::supported_levels()),
                         [](const auto& info) { return std::string(cpu::isa_name(info.param)); });

TEST(Sampling, GreedyBreaksTiesTowardsTheLowestId) {
  auto b = test::make_backend_at(cpu::detected_isa());
  std::vector<float> row(20, 0.0f);
  row[9] = 2.0f;
  row[5] = 2.0f;
  row[14] = 2.0f;
  sampling_params greedy;
  greedy.temperature = 0.0f;
  sampling_params top1;
  top1.temperature = 0.7f;
  top1.top_k = 1;
  sampling_step step(*b, {row, row},
                     {sampling_row{.params = &greedy, .seed = 1, .token_index = 0},
                      sampling_row{.params = &top1, .seed = 2, .token_index = 0}});
  const auto results = b->sample(*step.plan, step.view).rows;
  EXPECT_EQ(results[0].token, 5);
  EXPECT_EQ(results[1].token, 5);
}

TEST(Sampling, PenaltiesBiasAndSuppressionShapeTheLogprobs) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  auto b = test::make_backend_at(cpu::detected_isa());
  const int vocab = 64;
  const std::vector<float> row = rng.floats(vocab, -4.0f, 4.0f);
  sampling_params p;
  p.temperature = 0.0f;
  p.repetition_penalty = 1.3f;
  p.presence_penalty = 0.4f;
  p.frequency_penalty = 0.25f;
  p.logit_bias = {{3, 2.5f}, {17, -1.0f}};
  p.logprobs = true;
  p.top_logprobs = 5;
  const std::vector<int> prompt = {1, 2, 3, 3, 40}, output = {2, 2, 9, 40, 40, 40}, suppressed = {11, 12};
  sampling_step step(*b, {row},
                     {sampling_row{.params = &p,
                                   .seed = 5,
                                   .token_index = 0,
                                   .prompt_tokens = prompt,
                                   .output_tokens = output,
                                   .suppressed_tokens = suppressed}});
  const auto result = b->sample(*step.plan, step.view).rows.front();
  const reference_draw want = reference(row, p, {.prompt = prompt, .output = output, .suppressed = suppressed});
  EXPECT_EQ(result.token, want.greedy);
  EXPECT_NEAR(result.logprob, want.logprobs[static_cast<std::size_t>(want.greedy)], 1e-5);
  std::vector<int> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int c) {
    return want.logprobs[static_cast<std::size_t>(a)] > want.logprobs[static_cast<std::size_t>(c)];
  });
  ASSERT_EQ(result.top.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(result.top[i].token, order[i]);
    EXPECT_NEAR(result.top[i].logprob, want.logprobs[static_cast<std::size_t>(order[i])], 1e-5);
  }
}

TEST(Sampling, LogprobsAreTheLogSoftmaxBeforeTemperature) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  auto b = test::make_backend_at(cpu::detected_isa());
  const std::vector<float> row = rng.floats(128256, -10.0f, 10.0f);
  sampling_params p;
  p.temperature = 0.6f;
  p.top_p = 0.8f;
  p.logprobs = true;
  p.top_logprobs = 20;
  sampling_step step(*b, {row}, {sampling_row{.params = &p, .seed = 77, .token_index = 3}});
  const auto result = b->sample(*step.plan, step.view).rows.front();
  const reference_draw want = reference(row, p);
  EXPECT_NEAR(result.logprob, want.logprobs[static_cast<std::size_t>(result.token)], 1e-5);
  ASSERT_EQ(result.top.size(), 20u);
  for (std::size_t i = 0; i + 1 < result.top.size(); ++i) EXPECT_GE(result.top[i].logprob, result.top[i + 1].logprob);
  for (const auto& entry : result.top)
    EXPECT_NEAR(entry.logprob, want.logprobs[static_cast<std::size_t>(entry.token)], 1e-5);
  const int best = static_cast<int>(std::max_element(row.begin(), row.end()) - row.begin());
  EXPECT_EQ(result.top.front().token, best);
  const int token = reference_token(want, philox_uniform(77, 3));
  if (token >= 0) {
    EXPECT_EQ(result.token, token);
  }
}

TEST(Sampling, SeededRowGivesTheSameTokenAloneAndInABatch) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  auto b = test::make_backend_at(cpu::detected_isa(), {.threads = 3});
  sampling_params p;
  p.temperature = 0.9f;
  p.top_k = 50;
  p.top_p = 0.95f;
  p.logprobs = true;
  const std::vector<float> target = rng.floats(1000, -2.0f, 2.0f);
  for (std::uint64_t index = 0; index < 20; ++index) {
    sampling_step alone(*b, {target}, {sampling_row{.params = &p, .seed = 1234, .token_index = index}});
    const auto single = b->sample(*alone.plan, alone.view).rows.front();
    std::vector<std::vector<float>> rows;
    std::vector<sampling_row> sampling;
    for (int other = 0; other < 8; ++other) {
      rows.push_back(rng.floats(1000, -2.0f, 2.0f));
      sampling.push_back({.params = &p, .seed = static_cast<std::uint64_t>(other), .token_index = index});
      if (other == 4) {
        rows.push_back(target);
        sampling.push_back({.params = &p, .seed = 1234, .token_index = index});
      }
    }
    sampling_step batched(*b, rows, sampling);
    const auto inside = b->sample(*batched.plan, batched.view).rows[5];
    EXPECT_EQ(inside.token, single.token);
    EXPECT_EQ(inside.logprob, single.logprob);
  }
}

// Frequencies over a fixed set of seeds against the filtered probabilities:
// deterministic, so the bound cannot flake.
TEST(Sampling, EmpiricalDistributionMatchesTheFilteredProbabilities) {
  auto b = test::make_backend_at(cpu::detected_isa());
  std::vector<float> row(40);
  for (std::size_t i = 0; i < row.size(); ++i)
    row[i] = static_cast<float>(std::sin(1.7 * static_cast<double>(i)) * 2.0);
  sampling_params p;
  p.temperature = 0.8f;
  p.top_k = 12;
  p.top_p = 0.9f;
  p.min_p = 0.05f;
  const int draws = 20000;
  std::vector<sampling_row> sampling;
  for (int i = 0; i < draws; ++i)
    sampling.push_back({.params = &p,
                        .seed = static_cast<std::uint64_t>(i) * 2654435761u,
                        .token_index = static_cast<std::uint64_t>(i % 97)});
  sampling_step step(*b, std::vector<std::vector<float>>(draws, row), sampling);
  const auto results = b->sample(*step.plan, step.view).rows;
  const reference_draw want = reference(row, p);
  ASSERT_GE(want.kept.size(), 3u);
  std::map<int, int> counts;
  for (const auto& r : results) ++counts[r.token];
  double chi_square = 0.0;
  int seen = 0;
  for (std::size_t i = 0; i < want.kept.size(); ++i) {
    const double expected = want.probs[i] * draws;
    const int observed = counts.count(want.kept[i]) ? counts[want.kept[i]] : 0;
    seen += observed;
    chi_square += (observed - expected) * (observed - expected) / expected;
  }
  EXPECT_EQ(seen, draws) << "a token outside the filtered set was drawn";
  // 99.99th percentile of chi-square with up to 12 degrees of freedom is below 40.
  EXPECT_LT(chi_square, 40.0);
}

TEST(Sampling, SuppressedIdsAreNeverDrawnAndBadIdsAreRejected) {
  auto b = test::make_backend_at(cpu::detected_isa());
  std::vector<float> row(10, 0.0f);
  row[4] = 5.0f;
  sampling_params p;
  std::vector<sampling_row> sampling;
  const std::vector<int> suppressed = {4, 7};
  for (std::uint64_t seed = 0; seed < 200; ++seed)
    sampling.push_back({.params = &p, .seed = seed, .token_index = 0, .suppressed_tokens = suppressed});
  sampling_step step(*b, std::vector<std::vector<float>>(200, row), sampling);
  for (const auto& r : b->sample(*step.plan, step.view).rows) EXPECT_TRUE(r.token != 4 && r.token != 7);

  sampling_params everything_off;
  std::vector<int> all(10);
  std::iota(all.begin(), all.end(), 0);
  sampling_step none_left(
      *b, {row}, {sampling_row{.params = &everything_off, .seed = 1, .token_index = 0, .suppressed_tokens = all}});
  EXPECT_NO_THROW(b->sample(*none_left.plan, none_left.view).rows);

  sampling_params bad;
  bad.logit_bias = {{10, 1.0f}};
  sampling_step out_of_range(*b, {row}, {sampling_row{.params = &bad, .seed = 1, .token_index = 0}});
  EXPECT_THROW(b->sample(*out_of_range.plan, out_of_range.view).rows, std::invalid_argument);
}

}  // namespace
}  // namespace troupe

// Speculative sampling is lossless: with a tiny vocabulary, target logits
// that depend on the whole prefix and a draft distribution unlike the
// target, the joint distribution of the first three emitted tokens over
// many seeded trials matches the exact target distribution (chi-square),
// and a deliberately wrong rule (resampling from p instead of the residual)
// fails the same test.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>

#include "kernels/speculative.hpp"
#include "tests/kernels/chi_square.hpp"
#include "tests/kernels/speculative_statistics_support.hpp"

namespace troupe {
namespace {

using namespace test::speculative_statistics;

using verifier = std::function<verify_outcome(const verify_input&)>;

// One seeded generation of emitted_tokens tokens by rounds of draft and
// verify; point_mass: the proposer is deterministic (its most likely id) and
// sends no q rows, like ngram.
prefix generate(const prefix_tables& tables, const verifier& verify, std::uint64_t seed, bool point_mass) {
  const sampling_params params = target_params();
  prefix out;
  while (static_cast<int>(out.size()) < emitted_tokens) {
    const int k = emitted_tokens - static_cast<int>(out.size());
    prefix context = out, drafts;
    std::vector<float> q, logits;
    for (int i = 0; i < k; ++i) {
      const std::vector<float>& row = tables.draft_probs.at(context);
      const std::int32_t d = point_mass
                                 ? static_cast<std::int32_t>(std::max_element(row.begin(), row.end()) - row.begin())
                                 : draw_from_distribution(row, draft_uniform(seed, context.size()));
      if (!point_mass) q.insert(q.end(), row.begin(), row.end());
      drafts.push_back(d);
      context.push_back(d);
    }
    std::vector<prefix> outputs;
    std::vector<sampling_row> rows;
    for (int r = 0; r <= k; ++r)
      outputs.emplace_back(context.begin(), context.begin() + static_cast<long>(out.size()) + r);
    for (int r = 0; r <= k; ++r) {
      const auto& row = tables.target_logits.at(outputs[static_cast<std::size_t>(r)]);
      logits.insert(logits.end(), row.begin(), row.end());
      rows.push_back(
          {&params, seed, outputs[static_cast<std::size_t>(r)].size(), {}, outputs[static_cast<std::size_t>(r)], {}});
    }
    const verify_outcome outcome = verify({logits.data(), vocab, vocab, rows, drafts, q});
    for (const sample_output& emitted : outcome.emitted) out.push_back(emitted.token);
  }
  out.resize(emitted_tokens);
  return out;
}

double p_value_of(const verifier& verify, bool point_mass) {
  const prefix_tables tables;
  std::vector<long> counts(vocab * vocab * vocab, 0);
  for (int t = 0; t < trials; ++t) {
    const std::uint64_t seed = 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(t + 1);
    ++counts[static_cast<std::size_t>(cell_of(generate(tables, verify, seed, point_mass)))];
  }
  return test::chi_square_test(counts, exact_joint(tables));
}

// The wrong rule: accept as verify_drafts does, but resample a rejected
// position from p itself rather than from the residual max(0, p - q).
verify_outcome resample_from_target(const verify_input& in) {
  verify_outcome outcome;
  for (std::size_t r = 0; r <= in.drafts.size(); ++r) {
    const sampling_row& row = in.rows[r];
    const std::vector<float> p =
        processed_distribution(std::span(in.logits + r * static_cast<std::size_t>(in.row_stride), vocab), row);
    const float u = philox_uniform(row.seed, row.token_index);
    sample_output out;
    bool accepted = false;
    if (r < in.drafts.size()) {
      const std::int32_t d = in.drafts[r];
      const float q_d = in.draft_probs.empty() ? 1.0f : in.draft_probs[r * vocab + static_cast<std::size_t>(d)];
      accepted = accept_uniform(row.seed, row.token_index) * q_d < p[static_cast<std::size_t>(d)];
      out.token = accepted ? d : draw_from_distribution(p, u);
    } else {
      out.token = draw_from_distribution(p, u);
    }
    outcome.emitted.push_back(out);
    if (!accepted) break;
    ++outcome.accepted;
  }
  return outcome;
}

verify_outcome reference(const verify_input& in) { return verify_drafts(in); }

TEST(SpeculativeStatistics, EmittedTokensHaveTheTargetDistributionWithADraftDistribution) {
  EXPECT_GT(p_value_of(reference, false), 0.01);
}

TEST(SpeculativeStatistics, EmittedTokensHaveTheTargetDistributionWithAPointMassProposer) {
  EXPECT_GT(p_value_of(reference, true), 0.01);
}

TEST(SpeculativeStatistics, ResamplingFromTheTargetInsteadOfTheResidualFails) {
  EXPECT_LT(p_value_of(resample_from_target, false), 0.01);
}

}  // namespace
}  // namespace troupe

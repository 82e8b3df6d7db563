// Tree verification is lossless for sampled requests too: rounds of draft
// trees (point masses: the draft's three likeliest first tokens as
// siblings, the first two continued by their likeliest tokens) verified
// by recursive rejection give the first three emitted tokens the exact
// target joint distribution (chi-square, as for chains), while a rule that
// tests every sibling against the unchanged p and falls back to p itself
// fails the same test. Greedy trees accept the path of the argmaxes.

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>

#include "kernels/speculative.hpp"
#include "tests/kernels/chi_square.hpp"
#include "tests/kernels/speculative_statistics_support.hpp"

namespace troupe {
namespace {

using namespace test::speculative_statistics;

using verifier = std::function<verify_outcome(const verify_input&)>;

// The `count` likeliest ids of a draft row, likeliest first.
std::vector<std::int32_t> likeliest(const std::vector<float>& row, std::size_t count) {
  std::vector<std::int32_t> ids(row.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](std::int32_t a, std::int32_t b) {
    return row[static_cast<std::size_t>(a)] > row[static_cast<std::size_t>(b)];
  });
  ids.resize(count);
  return ids;
}

// A draft tree for the context `out`, at most `depth` deep.
struct tree_round {
  std::vector<std::int32_t> drafts, parents;
  std::vector<prefix> contexts;  // [j + 1] out + the path to node i
};

tree_round make_tree(const prefix_tables& tables, const prefix& out, int depth) {
  tree_round tree;
  tree.contexts.push_back(out);
  const std::vector<std::int32_t> firsts = likeliest(tables.draft_probs.at(out), 3);
  for (std::size_t branch = 0; branch < firsts.size(); ++branch) {
    std::int32_t parent = 0;
    prefix context = out;
    std::int32_t token = firsts[branch];
    // Branch 0 runs to the depth, branch 1 two deep, branch 2 one.
    const int length = std::min(depth, branch == 0 ? depth : static_cast<int>(3 - branch));
    for (int d = 0; d < length; ++d) {
      context.push_back(token);
      tree.drafts.push_back(token);
      tree.parents.push_back(parent);
      tree.contexts.push_back(context);
      parent = static_cast<std::int32_t>(tree.drafts.size());
      token = likeliest(tables.draft_probs.at(context), 1)[0];
    }
  }
  return tree;
}

prefix generate_with_trees(const prefix_tables& tables, const verifier& verify, std::uint64_t seed) {
  const sampling_params params = target_params();
  prefix out;
  while (static_cast<int>(out.size()) < emitted_tokens) {
    const tree_round tree = make_tree(tables, out, emitted_tokens - static_cast<int>(out.size()));
    std::vector<float> logits;
    std::vector<sampling_row> rows;
    for (const prefix& context : tree.contexts) {
      const auto& row = tables.target_logits.at(context);
      logits.insert(logits.end(), row.begin(), row.end());
      rows.push_back({&params, seed, context.size(), {}, context, {}});
    }
    const verify_outcome outcome = verify({logits.data(), vocab, vocab, rows, tree.drafts, {}, tree.parents});
    for (const sample_output& emitted : outcome.emitted) out.push_back(emitted.token);
  }
  out.resize(emitted_tokens);
  return out;
}

double tree_p_value(const verifier& verify) {
  const prefix_tables tables;
  std::vector<long> counts(vocab * vocab * vocab, 0);
  for (int t = 0; t < trials; ++t) {
    const std::uint64_t seed = 0xD1B54A32D192ED03ull * static_cast<std::uint64_t>(t + 1);
    ++counts[static_cast<std::size_t>(cell_of(generate_with_trees(tables, verify, seed)))];
  }
  return test::chi_square_test(counts, exact_joint(tables));
}

// The wrong rule: each sibling accepted with p(d) of the node's unchanged
// p (rejected siblings' mass not taken out), none accepted: a draw from p.
verify_outcome unchanged_p_for_siblings(const verify_input& in) {
  verify_outcome outcome;
  std::size_t node = 0;
  for (;;) {
    const sampling_row& row = in.rows[node];
    const std::vector<float> p =
        processed_distribution(std::span(in.logits + node * static_cast<std::size_t>(in.row_stride), vocab), row);
    std::int32_t chosen = -1;
    std::uint64_t rank = 0;
    for (std::size_t child = node + 1; child <= in.drafts.size() && chosen < 0; ++child) {
      if (static_cast<std::size_t>(in.parents[child - 1]) != node) continue;
      const std::int32_t d = in.drafts[child - 1];
      if (sibling_accept_uniform(row.seed, row.token_index, rank++) < p[static_cast<std::size_t>(d)])
        chosen = static_cast<std::int32_t>(child);
    }
    sample_output out;
    out.token = chosen > 0 ? in.drafts[static_cast<std::size_t>(chosen) - 1]
                           : draw_from_distribution(p, philox_uniform(row.seed, row.token_index));
    outcome.emitted.push_back(out);
    if (chosen < 0) return outcome;
    ++outcome.accepted;
    node = static_cast<std::size_t>(chosen);
  }
}

verify_outcome reference(const verify_input& in) { return verify_drafts(in); }

TEST(SpeculativeTreeStatistics, EmittedTokensHaveTheTargetDistribution) { EXPECT_GT(tree_p_value(reference), 0.01); }

TEST(SpeculativeTreeStatistics, TestingSiblingsAgainstTheUnchangedTargetFails) {
  EXPECT_LT(tree_p_value(unchanged_p_for_siblings), 0.01);
}

// Rows whose argmax is `winner` (logits 0 elsewhere, 5 at the winner).
std::vector<float> row_for(std::int32_t winner) {
  std::vector<float> row(vocab, 0.0f);
  row[static_cast<std::size_t>(winner)] = 5.0f;
  return row;
}

TEST(SpeculativeTree, GreedyAcceptsThePathOfTheArgmaxes) {
  sampling_params greedy;
  greedy.temperature = 0.0f;
  // Root children 1 (node 1, child 2 = node 2) and 3 (node 3, child 4 = node 4).
  const std::vector<std::int32_t> drafts = {1, 2, 3, 4}, parents = {0, 1, 0, 3};
  const std::vector<prefix> contexts = {{}, {1}, {1, 2}, {3}, {3, 4}};
  // The target: 3 after the root, 4 after 3, then 5.
  const std::vector<std::int32_t> argmax = {3, 0, 0, 4, 5};
  std::vector<float> logits;
  std::vector<sampling_row> rows;
  for (std::size_t i = 0; i < contexts.size(); ++i) {
    const std::vector<float> row = row_for(argmax[i]);
    logits.insert(logits.end(), row.begin(), row.end());
    rows.push_back({&greedy, 7, contexts[i].size(), {}, contexts[i], {}});
  }
  const verify_outcome outcome = verify_drafts({logits.data(), vocab, vocab, rows, drafts, {}, parents});
  EXPECT_EQ(outcome.accepted, 2);
  ASSERT_EQ(outcome.emitted.size(), 3u);
  EXPECT_EQ(outcome.emitted[0].token, 3);
  EXPECT_EQ(outcome.emitted[1].token, 4);
  EXPECT_EQ(outcome.emitted[2].token, 5);
}

TEST(SpeculativeTree, GreedyWithNoMatchingChildEmitsTheArgmax) {
  sampling_params greedy;
  greedy.temperature = 0.0f;
  const std::vector<std::int32_t> drafts = {1, 3}, parents = {0, 0};
  const std::vector<prefix> contexts = {{}, {1}, {3}};
  std::vector<float> logits;
  std::vector<sampling_row> rows;
  for (const prefix& context : contexts) {
    const std::vector<float> row = row_for(2);
    logits.insert(logits.end(), row.begin(), row.end());
    rows.push_back({&greedy, 7, context.size(), {}, context, {}});
  }
  const verify_outcome outcome = verify_drafts({logits.data(), vocab, vocab, rows, drafts, {}, parents});
  EXPECT_EQ(outcome.accepted, 0);
  ASSERT_EQ(outcome.emitted.size(), 1u);
  EXPECT_EQ(outcome.emitted[0].token, 2);
}

TEST(SpeculativeTree, RejectsMalformedTrees) {
  sampling_params greedy;
  greedy.temperature = 0.0f;
  const std::vector<float> logits(3 * vocab, 0.0f);
  const prefix none, one = {1}, two = {2};
  const std::vector<sampling_row> rows = {
      {&greedy, 7, 0, {}, none, {}}, {&greedy, 7, 1, {}, one, {}}, {&greedy, 7, 1, {}, two, {}}};
  const std::vector<sampling_row> twin_rows = {
      {&greedy, 7, 0, {}, none, {}}, {&greedy, 7, 1, {}, one, {}}, {&greedy, 7, 1, {}, one, {}}};
  const std::vector<std::int32_t> same_siblings = {1, 1}, parents = {0, 0};
  EXPECT_THROW(verify_drafts({logits.data(), vocab, vocab, twin_rows, same_siblings, {}, parents}),
               std::invalid_argument);
  const std::vector<std::int32_t> drafts = {1, 2}, forward = {0, 2};
  EXPECT_THROW(verify_drafts({logits.data(), vocab, vocab, rows, drafts, {}, forward}), std::invalid_argument);
  EXPECT_NO_THROW(verify_drafts({logits.data(), vocab, vocab, rows, drafts, {}, parents}));
  const std::vector<float> q(2 * vocab, 1.0f / vocab);
  EXPECT_THROW(verify_drafts({logits.data(), vocab, vocab, rows, drafts, q, parents}), std::invalid_argument);
}

}  // namespace
}  // namespace troupe

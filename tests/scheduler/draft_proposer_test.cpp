// The draft proposer against a fake draft model with a real paged cache of
// token ids: its drafts must be the model's chain on the true context, so a
// catch-up that trusted the wrong cache contents shows up as wrong drafts.

#include "actors/core/draft_proposer.hpp"

#include "kernels/step_batch.hpp"
#include "tests/scheduler/fake_draft_model.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace troupe {
namespace {

using namespace testing;

TEST(DraftProposer, TheFirstRoundFeedsTheContextAndDraftsTheModelsChain) {
  draft_proposer proposer(kBlockSize, kVocab);
  fake_draft_model model;
  const std::vector<std::int32_t> tokens = {5, 9, 13, 2, 8, 1, 4};
  const draft_reply reply = run_round(proposer, model, {{greedy_job(1, tokens, 3, blocks_from(0, 3))}});
  ASSERT_EQ(reply.sequences.size(), 1u);
  EXPECT_EQ(reply.sequences[0].drafts, expected_chain(tokens, 3));
  EXPECT_TRUE(reply.sequences[0].probs.empty()) << "greedy drafts are point masses";
  EXPECT_EQ(model.steps, 3);
  EXPECT_EQ(reply.steps, 3) << "the reply counts the round's draft steps";
  EXPECT_EQ(model.tokens_fed, 7 + 2);  // the whole context, then d1 and d2
}

TEST(DraftProposer, ALaterRoundTrustsWhatItWroteAndCatchesUpTheRest) {
  draft_proposer proposer(kBlockSize, kVocab);
  fake_draft_model model;
  std::vector<std::int32_t> tokens = {5, 9, 13, 2, 8, 1, 4};
  const auto blocks = blocks_from(10, 5);
  const auto first = run_round(proposer, model, {{greedy_job(1, tokens, 4, blocks)}}).sequences[0].drafts;
  // The target accepted two drafts and emitted a token of its own.
  tokens.insert(tokens.end(), first.begin(), first.begin() + 2);
  tokens.push_back(first[2] == 42 ? 43 : 42);
  EXPECT_EQ(proposer.trusted_prefix(tokens, blocks), 9) << "context and the two accepted drafts";
  model.tokens_fed = 0;
  const auto second = run_round(proposer, model, {{greedy_job(1, tokens, 2, blocks)}}).sequences[0].drafts;
  EXPECT_EQ(second, expected_chain(tokens, 2));
  EXPECT_EQ(model.tokens_fed, 1 + 1);  // only the new token, then d1
}

TEST(DraftProposer, NewBlocksMeanAFullCatchUp) {
  draft_proposer proposer(kBlockSize, kVocab);
  fake_draft_model model;
  std::vector<std::int32_t> tokens = {3, 1, 4, 1, 5, 9};
  const auto first = run_round(proposer, model, {{greedy_job(7, tokens, 2, blocks_from(0, 2))}}).sequences[0].drafts;
  tokens.push_back(first[0]);
  tokens.push_back(11);
  // Recomputed into other blocks; the old ones now hold someone else's tokens.
  run_round(proposer, model, {{greedy_job(8, {20, 21, 22, 23, 24, 25, 26, 27}, 1, blocks_from(0, 3))}});
  EXPECT_EQ(proposer.trusted_prefix(tokens, blocks_from(30, 3)), 0);
  model.tokens_fed = 0;
  const auto again = run_round(proposer, model, {{greedy_job(7, tokens, 2, blocks_from(30, 3))}}).sequences[0].drafts;
  EXPECT_EQ(again, expected_chain(tokens, 2));
  EXPECT_EQ(model.tokens_fed, 8 + 1);
}

TEST(DraftProposer, ABlockAnotherSequenceWroteIsNoLongerTrusted) {
  draft_proposer proposer(kBlockSize, kVocab);
  fake_draft_model model;
  const std::vector<std::int32_t> tokens = {3, 1, 4, 1, 5, 9, 2, 6, 5};
  const auto blocks = blocks_from(0, 3);
  run_round(proposer, model, {{greedy_job(7, tokens, 1, blocks)}});
  ASSERT_EQ(proposer.trusted_prefix(tokens, blocks), 9);
  // Sequence 7 was preempted; its second block went to sequence 8 and came back.
  run_round(proposer, model, {{greedy_job(8, {20, 21, 22, 23, 24, 25}, 1, {9, 1})}});
  EXPECT_EQ(proposer.trusted_prefix(tokens, blocks), kBlockSize) << "only the block nobody else wrote";
  model.tokens_fed = 0;
  const auto again = run_round(proposer, model, {{greedy_job(7, tokens, 2, blocks)}}).sequences[0].drafts;
  EXPECT_EQ(again, expected_chain(tokens, 2));
  EXPECT_EQ(model.tokens_fed, 5 + 1);
}

// Prompts sharing a cached prefix share its blocks (the KV manager's prefix
// cache): a sequence trusts what another wrote there after the same tokens.
TEST(DraftProposer, ASequenceTrustsTheSharedPrefixBlocksAnotherWrote) {
  draft_proposer proposer(kBlockSize, kVocab);
  fake_draft_model model;
  const std::vector<std::int32_t> prefix = {3, 1, 4, 1, 5, 9, 2, 6};  // two full blocks: 0 and 1
  std::vector<std::int32_t> a = prefix, b = prefix;
  a.insert(a.end(), {7, 7});
  b.insert(b.end(), {8, 8, 8});
  const auto a_drafts = run_round(proposer, model, {{greedy_job(1, a, 2, {0, 1, 2})}}).sequences[0].drafts;
  EXPECT_EQ(proposer.trusted_prefix(b, std::vector<std::int32_t>{0, 1, 3}), 8) << "the shared blocks, not b's own";
  model.tokens_fed = 0;
  const auto drafts = run_round(proposer, model, {{greedy_job(2, b, 2, {0, 1, 3})}}).sequences[0].drafts;
  EXPECT_EQ(drafts, expected_chain(b, 2));
  EXPECT_EQ(model.tokens_fed, 3 + 1) << "b's own tokens, then d1";
  // Sequence 1's next round still trusts its whole context.
  a.push_back(a_drafts[0]);
  a.push_back(a_drafts[1] == 42 ? 43 : 42);
  EXPECT_EQ(proposer.trusted_prefix(a, std::vector<std::int32_t>{0, 1, 2}), 11) << "a's context and its accepted draft";
}

TEST(DraftProposer, SequencesDraftedTogetherFromTheStartKeepTrustingTheirSharedBlocks) {
  draft_proposer proposer(kBlockSize, kVocab);
  fake_draft_model model;
  std::vector<std::int32_t> a = {2, 7, 1, 8, 2, 8, 1, 8, 5}, b = {2, 7, 1, 8, 2, 8, 1, 8, 4, 5};
  draft_request request;
  request.jobs.push_back(greedy_job(1, a, 3, {0, 1, 2}));
  request.jobs.push_back(greedy_job(2, b, 3, {0, 1, 3}));
  const draft_reply first = run_round(proposer, model, request);
  // Both accepted their first draft and emitted a token of their own.
  for (auto [tokens, out] : {std::pair{&a, &first.sequences[0]}, std::pair{&b, &first.sequences[1]}}) {
    tokens->push_back(out->drafts[0]);
    tokens->push_back(out->drafts[1] == 42 ? 43 : 42);
  }
  request.jobs = {greedy_job(1, a, 1, {0, 1, 2}), greedy_job(2, b, 1, {0, 1, 3})};
  model.tokens_fed = 0;
  const draft_reply second = run_round(proposer, model, request);
  EXPECT_EQ(second.sequences[0].drafts, expected_chain(a, 1));
  EXPECT_EQ(second.sequences[1].drafts, expected_chain(b, 1));
  EXPECT_EQ(model.tokens_fed, 1 + 1) << "each sequence only feeds its new token";
}

// K/V at a position depends on every token before it: a block written after
// other tokens is not trusted, though the block's own tokens are the same.
TEST(DraftProposer, ABlockWrittenAfterOtherTokensIsNotTrusted) {
  draft_proposer proposer(kBlockSize, kVocab);
  fake_draft_model model;
  run_round(proposer, model, {{greedy_job(1, {1, 2, 3, 4, 0}, 1, {0, 1})}});
  run_round(proposer, model, {{greedy_job(2, {9, 9, 9, 9, 5, 6, 7, 8, 0}, 1, {5, 1, 2})}});
  EXPECT_EQ(
      proposer.trusted_prefix(std::vector<std::int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 0}, std::vector<std::int32_t>{0, 1, 2}),
      kBlockSize)
      << "block 0 (after the same tokens), not block 1 (written after 9 9 9 9)";
}

TEST(DraftProposer, JobsOfDifferentLengthsShareSteps) {
  draft_proposer proposer(kBlockSize, kVocab);
  fake_draft_model model;
  const std::vector<std::int32_t> a = {1, 2, 3}, b = {7, 7, 7, 7, 7};
  draft_request request;
  request.jobs.push_back(greedy_job(1, a, 1, blocks_from(0, 1)));
  request.jobs.push_back(greedy_job(2, b, 4, blocks_from(1, 3)));
  request.jobs[0].sequence_index = 3;
  request.jobs[1].sequence_index = 0;
  const draft_reply reply = run_round(proposer, model, request);
  ASSERT_EQ(reply.sequences.size(), 2u);
  EXPECT_EQ(reply.sequences[0].sequence_index, 3u);
  EXPECT_EQ(reply.sequences[0].drafts, expected_chain(a, 1));
  EXPECT_EQ(reply.sequences[1].drafts, expected_chain(b, 4));
  EXPECT_EQ(model.steps, 4);
}

TEST(DraftProposer, SampledDraftsComeWithTheDistributionTheyWereDrawnFrom) {
  draft_proposer proposer(kBlockSize, kVocab);
  fake_draft_model model;
  draft_job job = greedy_job(1, {4, 4, 6, 8}, 3, blocks_from(0, 2));
  job.params.temperature = 1.5f;
  job.params.top_p = 0.9f;
  job.seed = 99;
  job.token_index = 2;
  const draft_reply reply = run_round(proposer, model, {{job}});
  const drafted& out = reply.sequences[0];
  ASSERT_EQ(out.drafts.size(), 3u);
  ASSERT_EQ(out.probs.size(), 3u * kVocab);
  for (std::size_t i = 0; i < 3; ++i) {
    const auto q = std::span<const float>(out.probs).subspan(i * kVocab, kVocab);
    EXPECT_NEAR(std::accumulate(q.begin(), q.end(), 0.0), 1.0, 1e-5);
    EXPECT_GT(q[static_cast<std::size_t>(out.drafts[i])], 0.0f) << "draft " << i << " has probability under its q";
  }
  // Seeded: the same round drafts the same tokens.
  draft_proposer again(kBlockSize, kVocab);
  fake_draft_model fresh;
  EXPECT_EQ(run_round(again, fresh, {{job}}).sequences[0].drafts, out.drafts);
}

TEST(DraftProposer, ForgetsTheLeastRecentlyDraftedSequences) {
  draft_proposer proposer(kBlockSize, kVocab, /*max_remembered=*/1);
  fake_draft_model model;
  const std::vector<std::int32_t> tokens = {1, 2, 3, 4, 5};
  run_round(proposer, model, {{greedy_job(1, tokens, 1, blocks_from(0, 2))}});
  EXPECT_EQ(proposer.trusted_prefix(tokens, blocks_from(0, 2)), 5);
  run_round(proposer, model, {{greedy_job(2, tokens, 1, blocks_from(2, 2))}});
  EXPECT_EQ(proposer.trusted_prefix(tokens, blocks_from(0, 2)), 0);
}

TEST(DraftProposer, MalformedJobsAreRefused) {
  draft_proposer proposer(kBlockSize, kVocab);
  EXPECT_THROW(proposer.begin({{greedy_job(1, {1, 2, 3}, 0, blocks_from(0, 1))}}), std::invalid_argument);
  EXPECT_THROW(proposer.begin({{greedy_job(1, {1, 2, 3, 4}, 2, blocks_from(0, 1))}}), std::invalid_argument)
      << "slots past the block table";
}

// The fake model's runners-up to `chosen` by logit: sin(0.3 v), largest at v = 5, then 26, 47, ...
std::vector<std::int32_t> runners_up_of(std::int32_t chosen, std::size_t count) {
  std::vector<std::int32_t> by_logit(kVocab);
  std::iota(by_logit.begin(), by_logit.end(), 0);
  std::stable_sort(by_logit.begin(), by_logit.end(),
                   [](std::int32_t a, std::int32_t b) { return std::sin(0.3f * a) > std::sin(0.3f * b); });
  std::erase(by_logit, chosen);
  by_logit.resize(count);
  return by_logit;
}

TEST(DraftProposer, AGreedyTreePutsTheRunnersUpBesideEveryChainDraft) {
  draft_proposer proposer(kBlockSize, kVocab);
  fake_draft_model model;
  const std::vector<std::int32_t> tokens = {5, 9, 13, 2, 8, 1, 4};
  draft_job job = greedy_job(1, tokens, 6, blocks_from(0, 4));
  job.tree_width = 3;  // a chain of 2, two runners-up beside each
  const draft_reply reply = run_round(proposer, model, {{job}});
  const drafted& out = reply.sequences[0];
  const std::vector<std::int32_t> chain = expected_chain(tokens, 2);
  ASSERT_EQ(out.drafts.size(), 6u) << "the tree fills every slot";
  EXPECT_EQ(std::vector<std::int32_t>(out.drafts.begin(), out.drafts.begin() + 2), chain);
  // Depth first: d1, d2, d2's two alternatives (children of d1), then d1's (children of t0).
  EXPECT_EQ(out.parents, (std::vector<std::int32_t>{0, 1, 1, 1, 0, 0}));
  EXPECT_EQ(std::vector<std::int32_t>(out.drafts.begin() + 2, out.drafts.begin() + 4), runners_up_of(chain[1], 2));
  EXPECT_EQ(std::vector<std::int32_t>(out.drafts.begin() + 4, out.drafts.end()), runners_up_of(chain[0], 2));
  EXPECT_EQ(draft_tree_problem(out.drafts, out.parents), "");
  EXPECT_EQ(reply.steps, 2) << "runners-up cost no draft step";
}

TEST(DraftProposer, SlotsCutShortGoToTheShallowestRunnersUp) {
  draft_proposer proposer(kBlockSize, kVocab);
  fake_draft_model model;
  const std::vector<std::int32_t> tokens = {5, 9, 13, 2, 8, 1, 4};
  draft_job job = greedy_job(1, tokens, 5, blocks_from(0, 4));
  job.tree_width = 3;  // a chain of ceil(5 / 3) = 2: three slots left, two beside d1, one beside d2
  const draft_reply reply = run_round(proposer, model, {{job}});
  const drafted& out = reply.sequences[0];
  const std::vector<std::int32_t> chain = expected_chain(tokens, 2);
  ASSERT_EQ(out.drafts.size(), 5u);
  EXPECT_EQ(out.parents, (std::vector<std::int32_t>{0, 1, 1, 0, 0}));
  EXPECT_EQ(out.drafts[2], runners_up_of(chain[1], 1)[0]);
  EXPECT_EQ(std::vector<std::int32_t>(out.drafts.begin() + 3, out.drafts.end()), runners_up_of(chain[0], 2));
}

TEST(DraftProposer, ASampledRequestsTreeStaysAChain) {
  draft_proposer proposer(kBlockSize, kVocab);
  fake_draft_model model;
  draft_job job = greedy_job(1, {5, 9, 13, 2}, 4, blocks_from(0, 3));
  job.params.temperature = 1.0f;
  job.tree_width = 2;
  const draft_reply reply = run_round(proposer, model, {{job}});
  EXPECT_EQ(reply.sequences[0].drafts.size(), 2u);
  EXPECT_TRUE(reply.sequences[0].parents.empty());
  EXPECT_EQ(reply.sequences[0].probs.size(), 2u * kVocab);
}

// A head narrowed to ids [0, width): the fake model's rows cut to that width.
draft_reply run_narrow_round(draft_proposer& proposer, fake_draft_model& model, std::size_t width, draft_job job) {
  return proposer.run_round({{std::move(job)}}, [&](const scheduled_step& step) {
    const std::vector<float> full = model.run(step);
    std::vector<float> narrow;
    for (std::size_t row = 0; row * kVocab < full.size(); ++row)
      narrow.insert(narrow.end(), full.begin() + static_cast<std::ptrdiff_t>(row * kVocab),
                    full.begin() + static_cast<std::ptrdiff_t>(row * kVocab + width));
    return narrow;
  });
}

TEST(DraftProposer, ANarrowHeadDraftsOnlyItsIdsAndItsQRowsKeepTheTargetsIds) {
  constexpr std::size_t width = 20;
  draft_proposer proposer(kBlockSize, kVocab);
  proposer.set_logits_width(width);
  fake_draft_model model;
  const std::vector<std::int32_t> tokens = {45, 9, 13, 2, 48, 1, 4};
  std::vector<std::int32_t> context = tokens, expected;
  for (int i = 0; i < 3; ++i) {
    // The fake's peak when the head has it, else its best other logit below
    // the width: sin(0.3 v) peaks at v = 5.
    const std::int32_t next = fake_draft_model::next_after(context);
    expected.push_back(next < static_cast<std::int32_t>(width) ? next : 5);
    context.push_back(expected.back());
  }
  EXPECT_EQ(run_narrow_round(proposer, model, width, greedy_job(1, tokens, 3, blocks_from(0, 3))).sequences[0].drafts,
            expected);

  // Sampled, with penalties over context ids above the head's and a suppressed one.
  draft_job job = greedy_job(2, tokens, 3, blocks_from(10, 3));
  job.params.temperature = 1.0f;
  job.params.repetition_penalty = 1.3f;
  job.suppressed = {49, 3};
  const drafted sampled = run_narrow_round(proposer, model, width, job).sequences[0];
  ASSERT_EQ(sampled.probs.size(), 3u * kVocab) << "q rows are as wide as the vocabulary";
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_LT(sampled.drafts[i], static_cast<std::int32_t>(width));
    const auto q = std::span<const float>(sampled.probs).subspan(i * kVocab, kVocab);
    EXPECT_NEAR(std::accumulate(q.begin(), q.end(), 0.0), 1.0, 1e-5);
    EXPECT_EQ(q[3], 0.0f) << "suppressed";
    for (std::size_t id = width; id < kVocab; ++id) EXPECT_EQ(q[id], 0.0f) << "id " << id;
  }
}

TEST(DraftProposer, LogitsOfAnotherWidthAreRefused) {
  draft_proposer proposer(kBlockSize, kVocab);
  EXPECT_THROW(proposer.set_logits_width(0), std::invalid_argument);
  EXPECT_THROW(proposer.set_logits_width(kVocab + 1), std::invalid_argument);
  proposer.set_logits_width(20);
  fake_draft_model model;
  EXPECT_THROW(run_round(proposer, model, {{greedy_job(1, {5, 9, 13}, 2, blocks_from(0, 2))}}), std::invalid_argument)
      << "full rows from a head said to be narrow";
}

}  // namespace
}  // namespace troupe

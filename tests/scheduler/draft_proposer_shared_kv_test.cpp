// A draft proposer working in the target's KV (a layer-skipping drafter of
// the target's first layers): the target has written every position before
// t0, so a round feeds t0 alone; it never writes a block that a step in
// flight or a pending copy uses, so a sequence whose draft positions lie in
// one gets no drafts; and it remembers nothing between rounds.

#include <gtest/gtest.h>

#include "actors/core/draft_proposer.hpp"
#include "tests/scheduler/fake_draft_model.hpp"

namespace troupe {
namespace {

using testing::blocks_from;
using testing::expected_chain;
using testing::fake_draft_model;
using testing::greedy_job;
using testing::kBlockSize;
using testing::kVocab;

// The target's writes: every token of the context but t0 at its position.
void target_wrote(fake_draft_model& model, const std::vector<std::int32_t>& tokens,
                  const std::vector<std::int32_t>& blocks) {
  for (std::size_t pos = 0; pos + 1 < tokens.size(); ++pos)
    model.slot(blocks, static_cast<std::int32_t>(pos)) = tokens[pos];
}

draft_proposer sharing_proposer() {
  draft_proposer proposer(kBlockSize, kVocab);
  proposer.share_target_kv();
  return proposer;
}

TEST(DraftProposerSharingTargetKv, ARoundFeedsOnlyT0AndDraftsTheChainOnTheTargetsContext) {
  draft_proposer proposer = sharing_proposer();
  fake_draft_model model;
  const std::vector<std::int32_t> tokens = {5, 9, 13, 2, 8, 1, 4, 7, 3};
  const auto blocks = blocks_from(20, 4);
  target_wrote(model, tokens, blocks);
  const draft_reply reply = run_round(proposer, model, {{greedy_job(1, tokens, 3, blocks)}});
  ASSERT_EQ(reply.sequences.size(), 1u);
  EXPECT_EQ(reply.sequences[0].drafts, expected_chain(tokens, 3));
  EXPECT_EQ(model.tokens_fed, 1 + 2) << "t0, then d1 and d2: no catch-up on the context";
  EXPECT_EQ(reply.steps, 3);
  // A later round of another context in the same blocks trusts the target
  // again, not what this round wrote: nothing is remembered.
  std::vector<std::int32_t> next = tokens;
  next.back() = 11;
  next.push_back(6);
  target_wrote(model, next, blocks);
  EXPECT_EQ(proposer.trusted_prefix(next, blocks), 0);
  model.tokens_fed = 0;
  EXPECT_EQ(run_round(proposer, model, {{greedy_job(1, next, 2, blocks)}}).sequences[0].drafts,
            expected_chain(next, 2));
  EXPECT_EQ(model.tokens_fed, 1 + 1);
}

// Positions 9 .. 11 (t0 and two drafts) lie in table entry 2; the context
// before them in entries 0 and 1.
TEST(DraftProposerSharingTargetKv, ASequenceWhoseDraftPositionsLieInABusyBlockGetsNoDrafts) {
  const std::vector<std::int32_t> tokens = {5, 9, 13, 2, 8, 1, 4, 7, 3, 12};
  const std::vector<std::int32_t> blocks = {30, 31, 32};
  const std::vector<std::int32_t> other_tokens = {1, 2, 3, 4, 6};
  const std::vector<std::int32_t> other_blocks = {40, 41};
  for (const std::int32_t busy : {30, 32, 41}) {
    SCOPED_TRACE("busy block " + std::to_string(busy));
    draft_proposer proposer = sharing_proposer();
    fake_draft_model model;
    target_wrote(model, tokens, blocks);
    target_wrote(model, other_tokens, other_blocks);
    draft_request request{{greedy_job(1, tokens, 3, blocks), greedy_job(2, other_tokens, 2, other_blocks)}};
    request.jobs[1].sequence_index = 1;
    request.busy_blocks = {busy, 99};
    const draft_reply reply = run_round(proposer, model, request);
    ASSERT_EQ(reply.sequences.size(), 2u);
    // A busy block the round only reads (a shared prompt prefix a step in flight reads too) stops nothing.
    EXPECT_EQ(reply.sequences[0].drafts, busy == 32 ? std::vector<std::int32_t>{} : expected_chain(tokens, 3));
    EXPECT_EQ(reply.sequences[1].drafts, busy == 41 ? std::vector<std::int32_t>{} : expected_chain(other_tokens, 2));
    // The turn-down times the round by the sequences its steps fed, not by the jobs asked.
    EXPECT_EQ(reply.num_drafted(), busy == 30 ? 2 : 1);
  }
}

TEST(DraftProposerSharingTargetKv, ARoundWithEveryJobSkippedRunsNoStep) {
  draft_proposer proposer = sharing_proposer();
  fake_draft_model model;
  draft_request request{{greedy_job(1, {5, 9, 13, 2}, 2, blocks_from(0, 2))}};
  request.busy_blocks = {0};
  const draft_reply reply = run_round(proposer, model, request);
  EXPECT_EQ(model.steps, 0);
  EXPECT_EQ(reply.steps, 0);
  ASSERT_EQ(reply.sequences.size(), 1u);
  EXPECT_TRUE(reply.sequences[0].drafts.empty());
  EXPECT_EQ(reply.num_drafted(), 0);
}

// Without sharing the busy blocks change nothing: the draft's own pool is
// written by the drafter alone.
TEST(DraftProposerSharingTargetKv, AProposerWithItsOwnPoolIgnoresBusyBlocks) {
  draft_proposer proposer(kBlockSize, kVocab);
  fake_draft_model model;
  const std::vector<std::int32_t> tokens = {5, 9, 13, 2, 8};
  draft_request request{{greedy_job(1, tokens, 2, blocks_from(0, 2))}};
  request.busy_blocks = {0, 1};
  EXPECT_EQ(run_round(proposer, model, request).sequences[0].drafts, expected_chain(tokens, 2));
  EXPECT_EQ(model.tokens_fed, 5 + 1);
}

}  // namespace
}  // namespace troupe

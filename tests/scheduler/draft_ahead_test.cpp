// Drafting ahead, the pure parts: which sequences of a dispatched step get
// an ahead job (one with drafts, after its first chain, slots only as far as
// the table's blocks reach) and with what context and token index; and the book that hands a
// step the ahead drafts only when the sequence's outputs are exactly the
// verified drafts and the guessed bonus token.

#include <gtest/gtest.h>

#include "actors/core/draft_ahead.hpp"
#include "actors/core/speculation.hpp"

namespace troupe {
namespace {

constexpr sequence_id seq_id = 7;
constexpr std::uint64_t first_index = 40;  ///< token index of t0's row

/// A one-sequence step built by hand: the state its hooks point into.
struct hand_step {
  std::vector<std::int32_t> prompt;
  std::vector<std::int32_t> outputs;        ///< through t0, the token fed
  std::vector<std::int32_t> draft_context;  ///< outputs then drafts (the draft rows' spans)
  sampling_params params;
  scheduled_step step;

  /// `token_index` of t0's row; `drafts` set as set_drafts would (a chain).
  hand_step(std::vector<std::int32_t> prompt_ids, std::vector<std::int32_t> output_ids, std::int32_t slots,
            std::vector<std::int32_t> drafts, std::int32_t blocks, std::uint64_t token_index = first_index)
      : prompt(std::move(prompt_ids)), outputs(std::move(output_ids)) {
    draft_context = outputs;
    draft_context.insert(draft_context.end(), drafts.begin(), drafts.end());
    scheduled_sequence seq;
    seq.seq = seq_id;
    seq.start = static_cast<std::int32_t>(prompt.size() + outputs.size()) - 1;
    seq.tokens = {outputs.back()};
    for (std::int32_t b = 0; b < blocks; ++b) seq.block_table.push_back(100 + b);
    seq.draft_slots = slots;
    seq.drafts = drafts;
    step.sequences.push_back(seq);
    for (std::size_t i = 0; i <= drafts.size(); ++i) {
      logits_row_hook row;
      row.seq = seq_id;
      row.seed = 99;
      row.token_index = token_index + i;
      row.params = &params;
      row.prompt_tokens = prompt;
      row.output_tokens = std::span<const std::int32_t>(draft_context).first(outputs.size() + i);
      step.rows.push_back(row);
    }
  }
};

const std::vector<std::int32_t> prompt = {1, 2, 3, 4, 5};
const std::vector<std::int32_t> outputs = {6, 7, 8};  // t0 = 8
const std::vector<std::int32_t> drafts = {11, 12, 13};

TEST(DraftAhead, AChainGetsAJobThroughItsLastDraftWithTheSlotsItsBlocksCover) {
  // 5 + 3 + 3 = 11 tokens through the last draft; 4 blocks of 4 cover 16 positions.
  const hand_step full(prompt, outputs, 4, drafts, 4);
  const draft_request request = ahead_draft_jobs(full.step, 4);
  ASSERT_EQ(request.jobs.size(), 1u);
  const draft_job& job = request.jobs[0];
  EXPECT_EQ(job.seq, seq_id);
  EXPECT_EQ(job.tokens, (std::vector<std::int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13}));
  EXPECT_EQ(job.prompt_length, 5);
  EXPECT_EQ(job.slots, 5) << "the guess and as many drafts as the step had slots for";
  EXPECT_EQ(job.token_index, first_index + 3) << "the first draft drawn is the bonus token's";
  EXPECT_EQ(job.block_table, full.step.sequences[0].block_table);
  EXPECT_EQ(job.seed, 99u);

  // Fewer drafts than slots (a proposer may give fewer): the next round is as deep as the slots.
  EXPECT_EQ(ahead_draft_jobs(hand_step(prompt, outputs, 4, {11}, 4).step, 4).jobs.at(0).slots, 5);
  // 3 blocks cover positions 0..11: the last draft at 10, then the guess at 11 and one more draft.
  EXPECT_EQ(ahead_draft_jobs(hand_step(prompt, outputs, 4, drafts, 3).step, 4).jobs.at(0).slots, 2);
  // One prompt token more: only the guess fits, which is no next draft.
  EXPECT_TRUE(ahead_draft_jobs(hand_step({0, 1, 2, 3, 4, 5}, outputs, 4, drafts, 3).step, 4).jobs.empty());
}

TEST(DraftAhead, ATreeIsDraftedAheadAfterItsFirstChain) {
  EXPECT_TRUE(ahead_draft_jobs(hand_step(prompt, outputs, 4, {}, 4).step, 4).jobs.empty()) << "no drafts";
  // The draft model's tree: its chain 11, 12, then 13 a runner-up beside 12.
  hand_step tree(prompt, outputs, 4, drafts, 4);
  tree.step.sequences[0].draft_parents = {0, 1, 1};
  tree.step.sequences[0].tree_width = 2;
  std::vector<std::int32_t> path = outputs;  // the runner-up's row sees 11, 13
  path.insert(path.end(), {11, 13});
  tree.step.rows[3].output_tokens = path;
  tree.step.rows[3].token_index = first_index + 2;
  const draft_request request = ahead_draft_jobs(tree.step, 4);
  ASSERT_EQ(request.jobs.size(), 1u);
  EXPECT_EQ(request.jobs[0].tokens, (std::vector<std::int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 11, 12}));
  EXPECT_EQ(request.jobs[0].slots, 3) << "a tree of 4 slots and width 2 is 2 deep, then the guess";
  EXPECT_EQ(request.jobs[0].token_index, first_index + 2);
  EXPECT_EQ(request.jobs[0].tree_width, 1) << "drafted ahead as a chain";
  // A tree whose first node is a runner-up beside nothing: no chain to follow.
  hand_step flat(prompt, outputs, 4, drafts, 4);
  flat.step.sequences[0].draft_parents = {0, 0, 0};
  EXPECT_EQ(ahead_draft_jobs(flat.step, 4).jobs.at(0).tokens.size(), 9u) << "the chain is its first node";
}

/// The ahead round's answer for `request`'s one job: the guess 21, then 22, 23, 24, q row r all r.
draft_reply answer(const draft_request& request, bool with_probs) {
  drafted out;
  out.sequence_index = request.jobs.at(0).sequence_index;
  out.drafts = {21, 22, 23, 24};
  if (with_probs)
    for (int r = 0; r < 4; ++r) out.probs.insert(out.probs.end(), 3, static_cast<float>(r));
  draft_reply reply;
  reply.sequences.push_back(out);
  reply.steps = 4;
  return reply;
}

/// The next step's sequence after step N emitted `emitted`, with `slots` draft slots.
hand_step next_step(const std::vector<std::int32_t>& emitted, std::int32_t slots) {
  std::vector<std::int32_t> after = outputs;
  after.insert(after.end(), emitted.begin(), emitted.end());
  return hand_step(prompt, after, slots, {}, 5, first_index + emitted.size());
}

TEST(DraftAhead, TheNextStepTakesTheDraftsWhenEveryDraftAndTheGuessWereRight) {
  const draft_request request = ahead_draft_jobs(hand_step(prompt, outputs, 4, drafts, 4).step, 4);
  draft_ahead_book book;
  book.record(request, answer(request, true));
  EXPECT_EQ(book.size(), 1u);
  const auto hits = book.take(next_step({11, 12, 13, 21}, 4).step);
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].sequence_index, 0u);
  EXPECT_EQ(hits[0].drafts, (std::vector<std::int32_t>{22, 23, 24}));
  EXPECT_EQ(hits[0].probs, (std::vector<float>{1, 1, 1, 2, 2, 2, 3, 3, 3})) << "the guess's q row is not passed on";
  EXPECT_EQ(book.size(), 0u) << "an answer is for one step";

  // Fewer slots than drafts: the first ones, with their q rows.
  book.record(request, answer(request, true));
  const auto cut = book.take(next_step({11, 12, 13, 21}, 2).step);
  ASSERT_EQ(cut.size(), 1u);
  EXPECT_EQ(cut[0].drafts, (std::vector<std::int32_t>{22, 23}));
  EXPECT_EQ(cut[0].probs, (std::vector<float>{1, 1, 1, 2, 2, 2}));

  // Greedy drafts have no q rows.
  book.record(request, answer(request, false));
  const auto greedy = book.take(next_step({11, 12, 13, 21}, 4).step);
  ASSERT_EQ(greedy.size(), 1u);
  EXPECT_TRUE(greedy[0].probs.empty());
}

TEST(DraftAhead, AWrongGuessARejectedDraftOrNoSlotsDropTheAnswer) {
  const draft_request request = ahead_draft_jobs(hand_step(prompt, outputs, 4, drafts, 4).step, 4);
  draft_ahead_book book;
  for (const std::vector<std::int32_t>& emitted :
       {std::vector<std::int32_t>{11, 12, 13, 20}, {11, 12, 30}, {11, 12, 13}, {11, 12, 13, 21, 22}}) {
    book.record(request, answer(request, false));
    EXPECT_TRUE(book.take(next_step(emitted, 4).step).empty()) << emitted.size() << " emitted";
    EXPECT_EQ(book.size(), 0u);
  }
  book.record(request, answer(request, false));
  EXPECT_TRUE(book.take(next_step({11, 12, 13, 21}, 0).step).empty()) << "a step without slots wants no drafts";
  EXPECT_EQ(book.size(), 0u);
  // The right context at the wrong token index (another choice's count) is not the guessed one either.
  book.record(request, answer(request, false));
  hand_step shifted = next_step({11, 12, 13, 21}, 4);
  shifted.step.rows[0].token_index += 1;
  EXPECT_TRUE(book.take(shifted.step).empty());
}

TEST(DraftAhead, AnswersForSequencesThatNeverComeBackAreForgotten) {
  const draft_request request = ahead_draft_jobs(hand_step(prompt, outputs, 4, drafts, 4).step, 4);
  draft_ahead_book book;
  book.record(request, answer(request, false));
  hand_step other = next_step({11, 12, 13, 21}, 4);
  other.step.sequences[0].seq = seq_id + 1;
  for (int i = 0; i < 3; ++i) book.take(other.step, 3);
  EXPECT_EQ(book.size(), 1u);
  book.take(other.step, 3);
  EXPECT_EQ(book.size(), 0u);
}

}  // namespace
}  // namespace troupe

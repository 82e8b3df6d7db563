// Structured output in the scheduler core: each sampled row carries the
// constraint's mask, the matcher advances with every emitted token and
// survives preemption, a complete document finishes the choice with "stop",
// and verify rows get the masks after their drafts.

#include <gtest/gtest.h>

#include "actors/core/sequence_constraint.hpp"
#include "tests/scheduler/harness.hpp"
#include "tests/scheduler/spec_driver.hpp"

namespace troupe::testing {
namespace {

request_spec constrained_spec(const spec_shape& shape, std::shared_ptr<const positional_constraint> constraint,
                              std::int32_t vocab) {
  request_spec spec = make_spec(shape);
  spec.constraint = std::move(constraint);
  spec.constraint_vocab = vocab;
  return spec;
}

TEST(Constraint, OutputsAreCompleteDocumentsThatStopBesideFreeText) {
  harness h(small_config());
  std::vector<std::shared_ptr<const positional_constraint>> constraints;
  std::vector<request_handle> handles;
  for (int i = 0; i < 3; ++i) {
    constraints.push_back(spread_constraint(6 + i, 3, harness::kVocab, 11 * i));
    handles.push_back(h.submit(constrained_spec(
        {.prompt_len = 5, .max_tokens = 30, .first_token = 1 + 50 * i, .seed = 3 + static_cast<std::uint64_t>(i)},
        constraints.back(), harness::kVocab)));
  }
  const request_spec free = make_spec({.prompt_len = 4, .max_tokens = 20, .first_token = 400, .seed = 9});
  const request_handle free_handle = h.submit(free);
  h.run();
  for (std::size_t i = 0; i < handles.size(); ++i) {
    EXPECT_TRUE(constraints[i]->accepts(h.output(handles[i]))) << "request " << i;
    EXPECT_EQ(h.reason(handles[i]), finish_reason::stop) << "request " << i;
  }
  EXPECT_EQ(h.output(free_handle),
            reference_outputs({.prompt = free.prompt, .request_seed = 9, .max_tokens = 20, .vocab = harness::kVocab}));
  EXPECT_EQ(h.reason(free_handle), finish_reason::length);
}

TEST(Constraint, EveryForkedChoiceWalksItsOwnMatcher) {
  harness h(small_config());
  const auto constraint = spread_constraint(10, 4, harness::kVocab, 5);
  request_spec spec = constrained_spec({.prompt_len = 6, .max_tokens = 40, .seed = 21}, constraint, harness::kVocab);
  spec.n = 4;
  const request_handle handle = h.submit(spec);
  h.run();
  std::set<std::vector<std::int32_t>> distinct;
  for (int c = 0; c < 4; ++c) {
    EXPECT_TRUE(constraint->accepts(h.output(handle, c))) << "choice " << c;
    EXPECT_EQ(h.reason(handle, c), finish_reason::stop) << "choice " << c;
    distinct.insert(h.output(handle, c));
  }
  EXPECT_GT(distinct.size(), 1u) << "the choices' seeds differ, so should their documents";
}

TEST(Constraint, MatcherStateSurvivesRecomputeAndSwap) {
  for (const preemption_mode mode : {preemption_mode::recompute, preemption_mode::swap}) {
    scheduler_config config = small_config({.budget = 64, .max_seqs = 8, .blocks = 12, .host_blocks = 32});
    config.preemption = mode;
    harness h(config, {.real_kv = true});
    std::vector<std::shared_ptr<const positional_constraint>> constraints;
    std::vector<request_handle> handles;
    for (int i = 0; i < 3; ++i) {
      constraints.push_back(spread_constraint(36, 5, harness::kVocab, 3 * i));
      handles.push_back(h.submit(constrained_spec(
          {.prompt_len = 8, .max_tokens = 40, .first_token = 1 + 100 * i, .seed = 11 + static_cast<std::uint64_t>(i)},
          constraints.back(), harness::kVocab)));
      h.now += 0.001;
    }
    h.run();
    EXPECT_FALSE(h.preempted.empty()) << "the pool is meant to run out";
    for (std::size_t i = 0; i < handles.size(); ++i) {
      EXPECT_TRUE(constraints[i]->accepts(h.output(handles[i]))) << "request " << i;
      EXPECT_EQ(h.reason(handles[i]), finish_reason::stop);
    }
  }
}

// The proposer drafts what the constrained model will draw: every verify
// row must carry the mask after its drafts, or the drafts (and the bonus
// token) come out differently.
TEST(Constraint, VerifyRowsCarryTheMasksAfterTheirDrafts) {
  constexpr std::int32_t vocab = 64;
  const auto constraint = spread_constraint(24, 6, vocab, 1);
  fake_proposer proposer(proposer_kind::right, vocab);
  proposer.constrain = [constraint](std::size_t index, std::int32_t token) {
    if (index >= constraint->steps.size()) return token;
    const auto& allowed = constraint->steps[index];
    return constrained_token(token, std::vector<std::int32_t>(allowed.begin(), allowed.end()));
  };
  spec_driver d(spec_config(3), std::move(proposer), 0, vocab);
  const request_handle r = d.submit(constrained_spec({.prompt_len = 5, .max_tokens = 30}, constraint, vocab));
  d.run();
  EXPECT_TRUE(constraint->accepts(d.output(r)));
  EXPECT_EQ(d.reason(r), finish_reason::stop);
  const scheduler_metrics& m = d.sched().metrics();
  EXPECT_GT(m.spec_draft_tokens, 0u);
  EXPECT_EQ(m.spec_accepted_tokens, m.spec_draft_tokens) << "right drafts under the right masks are all accepted";
}

TEST(Constraint, DraftsTheConstraintForbidsAreRejected) {
  constexpr std::int32_t vocab = 64;
  const auto constraint = spread_constraint(20, 2, vocab, 7);
  for (const proposer_kind kind : {proposer_kind::right, proposer_kind::wrong, proposer_kind::right_prefix}) {
    spec_driver d(spec_config(4), fake_proposer(kind, vocab), 1, vocab);
    const request_handle r = d.submit(constrained_spec({.prompt_len = 3, .max_tokens = 40}, constraint, vocab));
    d.run();
    EXPECT_TRUE(constraint->accepts(d.output(r))) << "proposer " << static_cast<int>(kind);
    EXPECT_EQ(d.reason(r), finish_reason::stop);
  }
}

TEST(Constraint, DraftMasksRollTheMatcherBack) {
  const auto constraint =
      std::make_shared<const positional_constraint>(std::vector<std::set<std::int32_t>>{{1, 2}, {3}, {4, 5}, {6}});
  request_state request;
  request.spec.constraint = constraint;
  request.spec.constraint_vocab = 40;
  sequence seq;
  seq.request = &request;
  start_matcher(seq);
  const std::vector<std::uint32_t> before(next_row_mask(seq).begin(), next_row_mask(seq).end());
  EXPECT_EQ(mask_ids(before), (std::vector<std::int32_t>{1, 2}));
  const std::vector<std::int32_t> drafts = {2, 3, 9, 6};  // the third is forbidden
  const auto masks = draft_row_masks(seq, drafts);
  ASSERT_EQ(masks.size(), 4u);
  EXPECT_EQ(mask_ids(masks[0]), (std::vector<std::int32_t>{3}));
  EXPECT_EQ(mask_ids(masks[1]), (std::vector<std::int32_t>{4, 5}));
  EXPECT_EQ(mask_ids(masks[2]), (std::vector<std::int32_t>{4, 5})) << "after a forbidden draft: the last valid mask";
  EXPECT_EQ(mask_ids(masks[3]), (std::vector<std::int32_t>{4, 5}));
  EXPECT_EQ(mask_ids(next_row_mask(seq)), (std::vector<std::int32_t>{1, 2})) << "the matcher is back at the start";
  EXPECT_FALSE(advance_matcher(seq, 1));
  EXPECT_FALSE(advance_matcher(seq, 3));
  EXPECT_TRUE(advance_matcher(seq, 7)) << "a token outside the constraint ends the document";
}

TEST(Constraint, UnconstrainedSequencesHaveNoMasks) {
  request_state request;
  sequence seq;
  seq.request = &request;
  start_matcher(seq);
  EXPECT_TRUE(next_row_mask(seq).empty());
  EXPECT_TRUE(draft_row_masks(seq, std::vector<std::int32_t>{1, 2}).empty());
  EXPECT_FALSE(advance_matcher(seq, 1));
}

}  // namespace
}  // namespace troupe::testing

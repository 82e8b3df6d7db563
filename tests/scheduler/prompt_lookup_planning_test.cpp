// How the scheduler plans prompt lookup's rounds (config.prompt_lookup set):
// it looks each decode's match up as it plans, grants draft slots only where
// there is one and no more than it offers, and values a round by how well
// matches of its length were accepted. The steps are scripted: the fake
// model runs them (its draft verdicts stand), then the token each sequence
// emits is replaced by the test's, so every context is known.

#include <gtest/gtest.h>

#include "actors/core/speculation.hpp"
#include "tests/scheduler/spec_driver.hpp"

namespace troupe::testing {
namespace {

/// k = 4, prompt lookup matching suffixes of 4 .. 1 tokens.
scheduler_config lookup_config() {
  scheduler_config config = spec_config(4);
  config.prompt_lookup = {.max_ngram = 4, .min_ngram = 1};
  return config;
}

/// The only sequence of `step`.
const scheduled_sequence& only(const scheduled_step& step) {
  EXPECT_EQ(step.sequences.size(), 1u);
  return step.sequences.front();
}

/// Fills the step's draft slots as the scheduler actor does (lookup_drafts),
/// runs it, and makes the sequence emit `token` after the drafts the fake
/// model accepted (none here: lookup proposes the prompt's fillers, which
/// lie outside the fake model's vocabulary). Returns the drafts fed.
std::size_t run_emitting(spec_driver& d, scheduled_step step, std::int32_t token) {
  std::size_t drafts = 0;
  for (auto& [index, tree] : lookup_drafts(step, d.sched().config().prompt_lookup)) {
    drafts += tree.drafts.size();
    EXPECT_EQ(d.sched().set_drafts(step, index, std::move(tree.drafts)), "");
  }
  step_result result = d.execute(step);
  for (const std::int32_t accepted : result.accepted) EXPECT_EQ(accepted, 0);
  EXPECT_FALSE(result.samples.empty());
  result.samples.front().token = token;
  d.deliver(result);
  return drafts;
}

/// Target step costs where a round of 4 drafts pays when at least half of
/// them are accepted: a step feeding T tokens takes 1 + 0.5 (T - 1) ms.
void observe_costs(spec_driver& d) {
  for (std::int32_t tokens = 1; tokens <= 64; ++tokens)
    d.sched().speculation_costs().observe_target_step(tokens, (1 + 0.5 * (tokens - 1)) * 1e-3);
}

// Tokens 100 and up lie outside the fake model's vocabulary (64), so they
// only match where the test placed them.
TEST(PromptLookupPlanning, ADecodeWithoutAMatchGetsNoDraftSlots) {
  spec_driver d(lookup_config(), std::nullopt);
  d.submit(make_spec({.prompt_len = 8, .max_tokens = 20, .first_token = 100}));
  run_emitting(d, d.plan(), 50);  // 50 is nowhere before
  const scheduled_step unmatched = d.plan();
  EXPECT_EQ(only(unmatched).draft_slots, 0);
  run_emitting(d, unmatched, 103);  // ... 103 104 ... is in the prompt
  EXPECT_EQ(only(d.plan()).draft_slots, 4);
}

TEST(PromptLookupPlanning, WithoutPromptLookupTheSameDecodeGetsItsSlots) {
  scheduler_config config = lookup_config();
  config.prompt_lookup.max_ngram = 0;  // another proposer: the core does not look matches up
  spec_driver d(config, std::nullopt);
  d.submit(make_spec({.prompt_len = 8, .max_tokens = 20, .first_token = 100}));
  run_emitting(d, d.plan(), 50);
  EXPECT_EQ(only(d.plan()).draft_slots, 4);
}

TEST(PromptLookupPlanning, AChainIsNoLongerThanItsMatchOffers) {
  spec_driver d(lookup_config(), std::nullopt);
  request_spec spec = make_spec({.prompt_len = 8, .max_tokens = 20, .first_token = 100});
  spec.prompt[5] = 7;  // 7 120 121 end the prompt: after an emitted 7 the match offers 120 121 7
  spec.prompt[6] = 120;
  spec.prompt[7] = 121;
  d.submit(spec);
  run_emitting(d, d.plan(), 7);
  const scheduled_step step = d.plan();
  EXPECT_EQ(only(step).draft_slots, 3);
  EXPECT_EQ(only(step).lookup_from, 6) << "the drafts are read from the match, not looked up again";
  EXPECT_EQ(run_emitting(d, step, 50), 3u);
}

// One-token matches whose drafts are all rejected stop speculating; the
// first two-token match speculates at once, its acceptance being that of
// its own length (unmeasured, so the optimistic start). Valued by the
// sequence's overall acceptance it would wait for a probe 32 decodes on.
TEST(PromptLookupPlanning, AcceptanceIsKeptPerMatchLength) {
  scheduler_config config = lookup_config();
  config.max_prefill_chunk = 64;
  spec_driver d(config, std::nullopt);
  // Each of 1 6 7 8 9 is followed by four fillers (one-token matches);
  // "2 3" is a two-token match.
  request_spec spec = make_spec({.prompt_len = 1, .max_tokens = 60, .first_token = 100});
  spec.prompt = {100, 1,   101, 102, 103, 104, 6,   105, 106, 107, 108, 7, 109, 110, 111, 112, 8,
                 113, 114, 115, 116, 9,   117, 118, 119, 120, 2,   3,   4, 5,   121, 122, 123, 124};
  const request_handle r = d.submit(spec);
  run_emitting(d, d.plan(), 1);
  observe_costs(d);
  // Acceptance 1, 0.8, 0.64, 0.51: four drafts pay; at 0.8^4 = 0.41 they cost more than they win.
  for (const std::int32_t next : {6, 7, 8, 9}) {
    const scheduled_step step = d.plan();
    ASSERT_EQ(only(step).draft_slots, 4) << "before emitting " << next;
    EXPECT_EQ(run_emitting(d, step, next), 4u) << "the four fillers after a one-token match";
  }
  const sequence* seq = d.find(r);
  ASSERT_NE(seq, nullptr);
  EXPECT_LT(seq->acceptance, 0.5) << "the overall average would leave it plain too";
  const scheduled_step after_9 = d.plan();
  EXPECT_EQ(only(after_9).draft_slots, 0) << "\"9\" is a one-token match";
  run_emitting(d, after_9, 2);
  const scheduled_step after_2 = d.plan();
  EXPECT_EQ(only(after_2).draft_slots, 0) << "\"2\" is a one-token match";
  run_emitting(d, after_2, 3);
  const scheduled_step after_3 = d.plan();
  EXPECT_EQ(only(after_3).draft_slots, 4) << "\"2 3\" is the first two-token match";
  EXPECT_EQ(run_emitting(d, after_3, 50), 4u);
}

}  // namespace
}  // namespace troupe::testing

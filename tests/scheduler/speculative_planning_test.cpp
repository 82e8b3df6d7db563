// How the scheduler plans speculative steps: which sequences get draft slots
// and how many, what it asks of the KV manager, and what set_drafts and
// build_step_batch make of the drafts (block size 4).

#include <gtest/gtest.h>

#include "tests/scheduler/spec_driver.hpp"

namespace troupe::testing {
namespace {

constexpr std::int32_t kVocab = 64;

/// The entry of `request` in `step` (fails the test when absent).
const scheduled_sequence& entry(const scheduled_step& step, request_handle request) {
  for (const auto& s : step.sequences) {
    if (s.request == request) return s;
  }
  ADD_FAILURE() << "request " << request << " is not in step " << step.id;
  return step.sequences.front();
}

/// Runs a planned step without drafts and applies its result.
void run_plain(spec_driver& d, const scheduled_step& step) { d.deliver(d.execute(step)); }

// Plans a step in which every decode, its acceptance not yet measured,
// speculates whatever the costs say, and runs it with one draft each, so
// from then on the cost model decides for them.
void verify_one_round(spec_driver& d) {
  scheduled_step s = d.plan();
  for (std::size_t i = 0; i < s.sequences.size(); ++i) {
    EXPECT_GT(s.sequences[i].draft_slots, 0) << "an unmeasured decode speculates once";
    EXPECT_EQ(d.sched().set_drafts(s, i, {1}), "");
  }
  run_plain(d, s);
}

TEST(SpeculativePlanning, DecodesGetDraftSlotsAndPrefillsDoNot) {
  spec_driver d(spec_config(3), std::nullopt);
  const request_handle r = d.submit(make_spec({.prompt_len = 10, .max_tokens = 20}));
  const scheduled_step prefill = d.plan();
  EXPECT_EQ(entry(prefill, r).draft_slots, 0);
  run_plain(d, prefill);
  const scheduled_step decode = d.plan();
  EXPECT_EQ(entry(decode, r).draft_slots, 3);
  EXPECT_EQ(entry(decode, r).tokens.size(), 1u);
  EXPECT_GE(entry(decode, r).block_table.size() * 4, 10u + 1 + 3) << "blocks for t0 and the draft slots";
  const kv_append& append = d.kv_requests().back().appends.at(0);
  EXPECT_EQ(append.tokens, entry(decode, r).tokens);
  EXPECT_EQ(append.num_speculative, 3);
  EXPECT_EQ(d.kv().num_speculative(entry(decode, r).seq), 3);
  run_plain(d, decode);
}

TEST(SpeculativePlanning, DraftSlotsShrinkBeforeMaxTokensAndTheContextEnd) {
  scheduler_config config = spec_config(8);
  config.max_model_len = 20;
  spec_driver d(config, fake_proposer(proposer_kind::right, kVocab));
  const request_handle short_output =
      d.submit(make_spec({.prompt_len = 4, .max_tokens = 4}));  // 3 tokens left after the first
  const request_handle near_the_end =
      d.submit(make_spec({.prompt_len = 14, .max_tokens = -1, .first_token = 50}));  // context 20: 5 tokens left
  d.step();
  const scheduled_step decode = d.plan();
  EXPECT_EQ(entry(decode, short_output).draft_slots, 2) << "a round emits up to slots + 1 tokens";
  EXPECT_EQ(entry(decode, near_the_end).draft_slots, 4);
  d.deliver(d.execute(decode));
  EXPECT_EQ(d.output(short_output).size(), 4u);
  EXPECT_EQ(d.reason(short_output), finish_reason::length);
  d.run();
  EXPECT_EQ(d.output(near_the_end).size(), 6u);
  EXPECT_EQ(d.reason(near_the_end), finish_reason::length);
}

TEST(SpeculativePlanning, RequestsThatOptOutAndForkStepsNeverSpeculate) {
  spec_driver d(spec_config(3), std::nullopt);
  request_spec opted_out = make_spec({.prompt_len = 6, .max_tokens = 10});
  opted_out.speculate = false;
  const request_handle quiet = d.submit(opted_out);
  request_spec forked =
      make_spec({.prompt_len = 1, .max_tokens = 10, .first_token = 40});  // the fork step is a one-token prefill
  forked.n = 2;
  const request_handle fork = d.submit(forked);
  const scheduled_step first = d.plan();
  EXPECT_EQ(entry(first, fork).num_samples, 2);
  EXPECT_EQ(entry(first, fork).draft_slots, 0);
  run_plain(d, first);
  const scheduled_step second = d.plan();
  EXPECT_EQ(entry(second, quiet).draft_slots, 0);
  int forked_choices = 0;
  for (const scheduled_sequence& s : second.sequences) {
    if (s.request != fork) continue;
    ++forked_choices;
    EXPECT_EQ(s.draft_slots, 3) << "the forked choices decode with draft slots";
  }
  EXPECT_EQ(forked_choices, 2);
  run_plain(d, second);
  d.run();
}

TEST(SpeculativePlanning, NoSpeculationInAStepWithMoreDecodesThanTheLimit) {
  scheduler_config config = spec_config(2);
  config.speculative_max_batch = 2;
  spec_driver d(config, std::nullopt);
  for (int i = 0; i < 3; ++i) d.submit(make_spec({.prompt_len = 4, .max_tokens = 6, .first_token = 10 * i + 1}));
  run_plain(d, d.plan());
  const scheduled_step three = d.plan();
  ASSERT_EQ(three.sequences.size(), 3u);
  for (const auto& s : three.sequences) EXPECT_EQ(s.draft_slots, 0);
  run_plain(d, three);
  config.speculative_max_batch = 3;
  EXPECT_EQ(d.sched().set_config(config), "");
  const scheduled_step allowed = d.plan();
  for (const auto& s : allowed.sequences) EXPECT_EQ(s.draft_slots, 2);
  run_plain(d, allowed);
  d.run();
}

TEST(SpeculativePlanning, MeasuredStepCostsDecideWhetherDecodesSpeculate) {
  spec_driver d(spec_config(2), std::nullopt);
  for (int i = 0; i < 3; ++i) d.submit(make_spec({.prompt_len = 4, .max_tokens = 8, .first_token = 10 * i + 1}));
  run_plain(d, d.plan());
  speculation_cost_model& costs = d.sched().speculation_costs();
  constexpr double ms = 1e-3;
  for (std::int32_t tokens = 1; tokens <= 64; ++tokens) costs.observe_target_step(tokens, tokens * ms);
  verify_one_round(d);
  const scheduled_step compute_bound = d.plan();
  ASSERT_EQ(compute_bound.sequences.size(), 3u);
  for (const auto& s : compute_bound.sequences) EXPECT_EQ(s.draft_slots, 0) << "every draft costs a whole token";
  run_plain(d, compute_bound);
  for (int round = 0; round < 100; ++round)
    for (std::int32_t tokens = 1; tokens <= 64; ++tokens) costs.observe_target_step(tokens, (1 + 0.001 * tokens) * ms);
  const scheduled_step memory_bound = d.plan();
  for (const auto& s : memory_bound.sequences) EXPECT_EQ(s.draft_slots, 2) << "drafts are nearly free";
  run_plain(d, memory_bound);
  d.run();
}

// speculative_turn_down false: costs that turn every draft down are measured,
// and every decode speculates anyway (live: back on, they are turned down).
TEST(SpeculativePlanning, WithoutTheTurnDownEveryDecodeSpeculatesWhateverTheCosts) {
  scheduler_config config = spec_config(2);
  config.speculative_turn_down = false;
  spec_driver d(config, std::nullopt);
  for (int i = 0; i < 3; ++i) d.submit(make_spec({.prompt_len = 4, .max_tokens = 8, .first_token = 10 * i + 1}));
  run_plain(d, d.plan());
  speculation_cost_model& costs = d.sched().speculation_costs();
  for (std::int32_t tokens = 1; tokens <= 64; ++tokens) costs.observe_target_step(tokens, tokens * 1e-3);
  verify_one_round(d);
  const scheduled_step forced = d.plan();
  ASSERT_EQ(forced.sequences.size(), 3u);
  for (const auto& s : forced.sequences) EXPECT_EQ(s.draft_slots, 2) << "every draft costs a whole token, yet";
  run_plain(d, forced);
  config.speculative_turn_down = true;
  ASSERT_EQ(d.sched().set_config(config), "");
  const scheduled_step turned_down = d.plan();
  for (const auto& s : turned_down.sequences) EXPECT_EQ(s.draft_slots, 0) << "the turn-down is back";
  run_plain(d, turned_down);
  d.run();
}

TEST(SpeculativePlanning, ASequenceLeftPlainForLongIsProbedAgain) {
  spec_driver d(spec_config(2), std::nullopt);
  const request_handle r = d.submit(make_spec({.prompt_len = 4, .max_tokens = 60}));
  run_plain(d, d.plan());
  for (std::int32_t tokens = 1; tokens <= 64; ++tokens)
    d.sched().speculation_costs().observe_target_step(tokens, tokens * 1e-3);
  verify_one_round(d);
  for (int i = 0; i < 32; ++i) {
    const scheduled_step plain = d.plan();
    EXPECT_EQ(entry(plain, r).draft_slots, 0) << "decode " << i;
    run_plain(d, plain);
  }
  const scheduled_step probe = d.plan();
  EXPECT_EQ(entry(probe, r).draft_slots, 2) << "after 32 plain decodes it speculates once";
  run_plain(d, probe);
  const scheduled_step after = d.plan();
  EXPECT_EQ(entry(after, r).draft_slots, 0);
  run_plain(d, after);
  d.run();
}

// A decode left plain by compute-bound costs, after its first verified round.
struct probe_harness {
  spec_driver d;
  request_handle r;

  explicit probe_harness(double draft_step_s, bool drafter_shares_target_kv = false)
      : d(probe_config(drafter_shares_target_kv), std::nullopt),
        r(d.submit(make_spec({.prompt_len = 4, .max_tokens = 700}))) {
    run_plain(d, d.plan());
    if (draft_step_s > 0) d.sched().speculation_costs().observe_draft_round(1, 1, draft_step_s);
    observe(1, 0);  // every draft costs a whole token: plain decoding wins
    verify_one_round(d);
  }
  static scheduler_config probe_config(bool drafter_shares_target_kv) {
    scheduler_config config = spec_config(2, /*blocks=*/256);
    config.drafter_shares_target_kv = drafter_shares_target_kv;
    return config;
  }
  void observe(double per_token_ms, double fixed_ms) {
    for (int round = 0; round < 100; ++round)
      for (std::int32_t tokens = 1; tokens <= 64; ++tokens)
        d.sched().speculation_costs().observe_target_step(tokens, (fixed_ms + per_token_ms * tokens) * 1e-3);
  }
  /// `wait` plain decodes, then a probe.
  void expect_probe_after(int wait) {
    expect_plain(wait);
    const scheduled_step probe = d.plan();
    EXPECT_EQ(entry(probe, r).draft_slots, 2) << "a probe after " << wait << " plain decodes";
    run_plain(d, probe);
  }
  void expect_plain(int decodes) {
    for (int i = 0; i < decodes; ++i) {
      const scheduled_step plain = d.plan();
      ASSERT_EQ(entry(plain, r).draft_slots, 0) << "decode " << i << " of " << decodes;
      run_plain(d, plain);
    }
  }
};

// With a draft model, probes of text it cannot follow would cost a draft
// round (and a catch-up as long as the wait) every 32 decodes for good:
// each probe the cost model does not follow up doubles the wait, after the
// third there are none, and a decode the cost model chooses again starts
// over from 32.
TEST(SpeculativePlanning, DrafterProbesBackOffAndStopUntilTheCostModelChoosesTheSequenceAgain) {
  probe_harness h(/*draft_step_s=*/1e-4);
  h.expect_probe_after(32);
  h.expect_probe_after(64);
  h.expect_probe_after(128);
  h.expect_plain(300);
  h.observe(0.001, 1);  // drafts nearly free: the cost model chooses it again
  const scheduled_step chosen = h.d.plan();
  EXPECT_EQ(entry(chosen, h.r).draft_slots, 2);
  run_plain(h.d, chosen);
  h.observe(1, 0);
  h.expect_probe_after(32);
  h.d.run();
}

// A drafter working in the target's KV has no catch-up, so a probe costs
// one round however long the wait: the waits double to the longest, and
// probes go on there.
TEST(SpeculativePlanning, ADrafterInTheTargetsKvKeepsProbingAtTheLongestWait) {
  probe_harness h(/*draft_step_s=*/1e-4, /*drafter_shares_target_kv=*/true);
  h.expect_probe_after(32);
  h.expect_probe_after(64);
  for (int probe = 0; probe < 3; ++probe) h.expect_probe_after(128);
  h.d.run();
}

// Prompt lookup has no draft round: a probe costs its verified slots only,
// so it comes every 32 decodes.
TEST(SpeculativePlanning, WithoutDraftRoundsProbesComeEvery32Decodes) {
  probe_harness h(/*draft_step_s=*/0);
  for (int probe = 0; probe < 5; ++probe) h.expect_probe_after(32);
  h.d.run();
}

// A draft model's first round (and a probe's) catches it up on the whole
// context (the stretch since its last round): with fewer tokens left than
// two full rounds emit (2 × (k + 1) = 6 here) that costs more than it can
// win back, so with a drafter whose rounds cost time such a sequence stays
// plain. Prompt lookup has nothing to catch up.
// A drafter working in the target's KV (layer skipping of the first layers)
// has no catch-up to avoid: near the end it is treated as prompt lookup is.
TEST(SpeculativePlanning, ADrafterDoesNotCatchUpASequenceNearItsEnd) {
  struct drafter_case {
    double draft_step_s;
    bool catches_up;
  };
  for (const auto [draft_step_s, catches_up] :
       {drafter_case{1e-4, true}, drafter_case{1e-4, false}, drafter_case{0.0, true}}) {
    SCOPED_TRACE(draft_step_s == 0 ? "prompt lookup" : catches_up ? "draft model" : "in the target's KV");
    scheduler_config config = spec_config(2, /*blocks=*/128);
    config.drafter_shares_target_kv = !catches_up;
    spec_driver d(config, std::nullopt);
    const bool avoids_catch_up = draft_step_s > 0 && catches_up;
    const request_handle short_output = d.submit(make_spec({.prompt_len = 4, .max_tokens = 6, .first_token = 1}));
    const request_handle long_output = d.submit(make_spec({.prompt_len = 4, .max_tokens = 36, .first_token = 11}));
    run_plain(d, d.plan());
    if (draft_step_s > 0) d.sched().speculation_costs().observe_draft_round(2, 1, draft_step_s);
    scheduled_step first = d.plan();
    EXPECT_EQ(entry(first, short_output).draft_slots, avoids_catch_up ? 0 : 2) << "5 tokens left";
    EXPECT_EQ(entry(first, long_output).draft_slots, 2) << "35 tokens left";
    for (std::size_t i = 0; i < first.sequences.size(); ++i)
      if (first.sequences[i].draft_slots > 0) {
        EXPECT_EQ(d.sched().set_drafts(first, i, {1}), "");
      }
    run_plain(d, first);
    // Compute-bound costs leave the long one plain; after 32 plain decodes
    // it has about 2 tokens left: prompt lookup probes it, a drafter not.
    for (std::int32_t tokens = 1; tokens <= 64; ++tokens)
      d.sched().speculation_costs().observe_target_step(tokens, tokens * 1e-3);
    std::vector<std::size_t> probed_at;  // the long request's outputs when it was probed
    while (d.sched().has_unfinished_requests()) {
      const scheduled_step step = d.plan();
      for (const auto& seq : step.sequences)
        if (seq.request == long_output && seq.draft_slots > 0) probed_at.push_back(d.outputs[{long_output, 0}].size());
      run_plain(d, step);
    }
    EXPECT_EQ(probed_at.size(), avoids_catch_up ? 0u : 1u);
    if (!probed_at.empty()) {
      EXPECT_GE(probed_at[0], 32u) << "a probe after 32 plain decodes";
    }
    d.run();
  }
}

TEST(SpeculativePlanning, EveryDecodeKeepsItsTokenWhenTheBudgetIsShort) {
  spec_driver d(spec_config(4, 64, 32, /*budget=*/8), std::nullopt);
  for (int i = 0; i < 3; ++i) d.submit(make_spec({.prompt_len = 2, .max_tokens = 10, .first_token = 10 * i + 1}));
  run_plain(d, d.plan());
  const scheduled_step decodes = d.plan();
  ASSERT_EQ(decodes.sequences.size(), 3u);
  std::int32_t planned = 0;
  for (const auto& s : decodes.sequences) planned += 1 + s.draft_slots;
  EXPECT_EQ(decodes.sequences[0].draft_slots, 4) << "the most urgent takes what the others leave";
  EXPECT_EQ(decodes.sequences[1].draft_slots, 1);
  EXPECT_EQ(decodes.sequences[2].draft_slots, 0);
  EXPECT_EQ(planned, 8);
  run_plain(d, decodes);
  d.run();
}

TEST(SpeculativePlanning, DraftSlotsLeaveABlockForEveryLaterDecode) {
  // 4 blocks, two 4-token prompts: each decode needs a new block, and the
  // two left must serve both, so neither takes slots past its new block.
  spec_driver d(spec_config(8, /*blocks=*/4, /*host_blocks=*/0), std::nullopt);
  const request_handle a = d.submit(make_spec({.prompt_len = 4, .max_tokens = 20, .first_token = 1}));
  const request_handle b = d.submit(make_spec({.prompt_len = 4, .max_tokens = 20, .first_token = 20}));
  run_plain(d, d.plan());
  const scheduled_step decode = d.plan();
  EXPECT_EQ(d.preemptions, 0);
  ASSERT_EQ(decode.sequences.size(), 2u);
  EXPECT_EQ(entry(decode, a).draft_slots, 3) << "positions 4..7: one new block, the other kept for b";
  EXPECT_EQ(entry(decode, b).draft_slots, 3);
  run_plain(d, decode);
  d.run();  // later the two outgrow the pool and take turns
}

TEST(SpeculativePlanning, AdaptiveDraftLengthFollowsTheAcceptanceRate) {
  for (const proposer_kind kind : {proposer_kind::wrong, proposer_kind::right}) {
    scheduler_config config = spec_config(4);
    config.speculative_adaptive = true;
    spec_driver d(config, fake_proposer(kind, kVocab));
    const request_handle r = d.submit(make_spec({.prompt_len = 3, .max_tokens = 200}));
    std::vector<std::int32_t> slots;
    for (int i = 0; i < 12; ++i) {
      const scheduled_step s = d.plan();
      slots.push_back(entry(s, r).draft_slots);
      d.deliver(d.execute(s));
    }
    EXPECT_EQ(slots[1], 4) << "a sequence starts at k_max";
    if (kind == proposer_kind::wrong)
      EXPECT_EQ(slots.back(), 1) << "every draft rejected: down to one";
    else
      EXPECT_EQ(slots.back(), 4);
  }
}

TEST(SpeculativePlanning, SetDraftsAddsOneVerifiedRowPerDraft) {
  spec_driver d(spec_config(3), std::nullopt);
  const request_handle r = d.submit(make_spec({.prompt_len = 5, .max_tokens = 20}));
  run_plain(d, d.plan());
  scheduled_step step = d.plan();
  const sequence& seq = *d.find(r);
  const std::uint64_t base = seq.outputs.size();
  ASSERT_EQ(step.rows.size(), 1u);
  EXPECT_EQ(d.sched().set_drafts(step, 0, {11, 12}), "");
  ASSERT_EQ(step.rows.size(), 3u);
  for (std::uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(step.rows[i].token_index, base + i);
    ASSERT_EQ(step.rows[i].output_tokens.size(), base + i);
  }
  EXPECT_EQ(step.rows[2].output_tokens.back(), 12);
  EXPECT_EQ(step.rows[2].output_tokens[base], 11);
  EXPECT_EQ(step.num_tokens(), 3);
  const step_batch batch = build_step_batch(step, 4);
  EXPECT_EQ(batch.token_ids, (std::vector<std::int32_t>{seq.outputs.back(), 11, 12}));
  EXPECT_EQ(batch.positions, (std::vector<std::int32_t>{5, 6, 7}));
  EXPECT_EQ(batch.seq_lens, (std::vector<std::int32_t>{8}));
  EXPECT_EQ(batch.logits_indices, (std::vector<std::int32_t>{0, 1, 2}));
  ASSERT_EQ(batch.verify.size(), 1u);
  EXPECT_EQ(batch.verify[0].first_row, 0);
  EXPECT_EQ(batch.verify[0].drafts, (std::vector<std::int32_t>{11, 12}));
  EXPECT_TRUE(batch.verify[0].draft_probs.empty());
  d.deliver(d.execute(step));
  d.run();
}

TEST(SpeculativePlanning, SetDraftsRefusesMisuseAndChangesNothing) {
  spec_driver d(spec_config(2), std::nullopt);
  d.submit(make_spec({.prompt_len = 5, .max_tokens = 20}));
  run_plain(d, d.plan());
  scheduled_step step = d.plan();
  EXPECT_NE(d.sched().set_drafts(step, 1, {1}), "") << "no such sequence";
  EXPECT_NE(d.sched().set_drafts(step, 0, {1, 2, 3}), "") << "more drafts than slots";
  EXPECT_NE(d.sched().set_drafts(step, 0, {1, 2}, std::vector<float>(3, 0.5f)), "") << "not one q row per draft";
  scheduled_step unknown = step;
  unknown.id += 100;
  EXPECT_NE(d.sched().set_drafts(unknown, 0, {1}), "") << "not in flight";
  EXPECT_EQ(step.rows.size(), 1u);
  EXPECT_EQ(d.sched().set_drafts(step, 0, {1}, std::vector<float>(kVocab, 1.0f / kVocab)), "");
  EXPECT_NE(d.sched().set_drafts(step, 0, {1}), "") << "set twice";
  const step_batch batch = build_step_batch(step, 4);
  EXPECT_EQ(batch.verify.at(0).draft_probs.size(), static_cast<std::size_t>(kVocab));
  d.deliver(d.execute(step));
  d.run();
}

}  // namespace
}  // namespace troupe::testing

// One speculative round end to end: the settle that follows a result, stops
// inside an accepted run, cancellation and abandonment mid-round, the
// metrics, and the knobs (block size 4).

#include <gtest/gtest.h>

#include "actors/core/scheduler_loop.hpp"
#include "config/config_store.hpp"
#include "tests/scheduler/spec_driver.hpp"

namespace troupe::testing {
namespace {

constexpr std::int32_t kVocab = 64;

/// What `spec` produces without speculation.
std::vector<std::int32_t> plain_output(const request_spec& spec) {
  spec_driver alone(spec_config(0), std::nullopt, 0, kVocab);
  const request_handle handle = alone.submit(spec);
  alone.run();
  return alone.output(handle);
}

TEST(SpeculativeRounds, TheNextKvRequestSettlesTheAcceptedDraftsFirst) {
  spec_driver d(spec_config(3), fake_proposer(proposer_kind::right, kVocab));
  const request_handle r = d.submit(make_spec({.prompt_len = 5, .max_tokens = 20}));
  d.step();  // prefill
  d.step();  // t0 and three drafts, all accepted
  const sequence& seq = *d.find(r);
  ASSERT_EQ(seq.outputs.size(), 5u);
  EXPECT_EQ(seq.num_computed, 5 + 4) << "t0 and the drafts have K/V; the bonus token is the next t0";
  d.step();
  const kv_request& next = d.kv_requests().back();
  ASSERT_EQ(next.settles.size(), 1u);
  EXPECT_EQ(next.settles[0].seq, seq.id);
  EXPECT_EQ(next.settles[0].accepted, 3);
  EXPECT_EQ(next.settles[0].tokens, std::vector<std::int32_t>(seq.outputs.begin() + 1, seq.outputs.begin() + 4));
  EXPECT_EQ(d.kv().num_tokens(seq.id), 5 + 4 + 1) << "settled, then the next t0";
  d.run();
}

TEST(SpeculativeRounds, RejectedSlotsGoBackAndTheMirrorMatchesTheManager) {
  spec_driver d(spec_config(6), fake_proposer(proposer_kind::wrong, kVocab));
  const request_handle r = d.submit(make_spec({.prompt_len = 3, .max_tokens = 12}));
  d.step();
  for (int i = 0; i < 5; ++i) {
    const scheduled_step step = d.plan();
    const sequence* seq = d.find(r);
    if (seq == nullptr || !seq->resident()) break;
    const auto table = d.kv().block_table(seq->id);
    EXPECT_EQ(seq->block_table, std::vector<std::int32_t>(table.begin(), table.end()));
    d.deliver(d.execute(step));
    seq = d.find(r);  // released once finished
    if (seq == nullptr || !seq->resident()) break;
    EXPECT_EQ(seq->num_computed, static_cast<std::int32_t>(3 + seq->outputs.size() - 1));
    EXPECT_EQ(seq->block_table.size(), static_cast<std::size_t>((seq->num_computed + 3) / 4))
        << "the mirror drops the rejected slots' blocks at once; the settle follows";
  }
  d.run();
  EXPECT_EQ(d.output(r), plain_output(make_spec({.prompt_len = 3, .max_tokens = 12})));
}

TEST(SpeculativeRounds, AStopIdInsideAnAcceptedRunEndsTheChoiceThere) {
  request_spec spec = make_spec({.prompt_len = 6, .max_tokens = 30, .first_token = 1, .seed = 1});
  std::vector<std::int32_t> reference = plain_output(spec);
  // The first token that did not come before, from the fourth on, becomes a stop id.
  std::size_t stop_at = 3;
  while (std::find(reference.begin(), reference.begin() + static_cast<std::ptrdiff_t>(stop_at), reference[stop_at]) !=
         reference.begin() + static_cast<std::ptrdiff_t>(stop_at))
    ++stop_at;
  spec.stop_token_ids = {reference[stop_at]};
  spec_driver d(spec_config(8), fake_proposer(proposer_kind::right, kVocab));
  const request_handle r = d.submit(spec);
  d.run();
  reference.resize(stop_at + 1);
  EXPECT_EQ(d.output(r), reference);
  EXPECT_EQ(d.reason(r), finish_reason::stop);
  EXPECT_LE(d.steps, 4) << "the stop came inside an accepted run";
}

TEST(SpeculativeRounds, CancellingBeforeTheDraftsOrBeforeTheResultReleasesEverything) {
  for (const bool before_drafts : {true, false}) {
    spec_driver d(spec_config(4), std::nullopt);
    const request_handle r = d.submit(make_spec({.prompt_len = 5, .max_tokens = 20}));
    d.deliver(d.execute(d.plan()));
    scheduled_step step = d.plan();
    ASSERT_EQ(step.sequences.at(0).draft_slots, 4);
    if (before_drafts) d.record(d.sched().cancel(r, d.now));
    EXPECT_EQ(d.sched().set_drafts(step, 0, {1, 2, 3}), "");
    EXPECT_EQ(step.rows.size(), before_drafts ? 1u : 4u) << "a finished sequence gets no draft rows";
    if (!before_drafts) d.record(d.sched().cancel(r, d.now));
    const std::size_t tokens = d.output(r).size();
    d.deliver(d.execute(step));
    EXPECT_EQ(d.output(r).size(), tokens) << "a cancelled choice gets no more tokens";
    EXPECT_EQ(d.reason(r), finish_reason::abort);
    d.run();
  }
}

TEST(SpeculativeRounds, AnAbandonedSpeculativeStepIsRecomputed) {
  spec_driver d(spec_config(4), fake_proposer(proposer_kind::right, kVocab));
  const request_handle r = d.submit(make_spec({.prompt_len = 5, .max_tokens = 16}));
  d.step();
  const scheduled_step step = d.plan();
  ASSERT_FALSE(step.rows.size() == 1u) << "the drafts were set";
  const scheduler_events events = d.sched().abandon_step(step.id);
  EXPECT_EQ(events.preempted.size(), 1u);
  EXPECT_EQ(d.find(r)->status, sequence_status::waiting);
  d.run();
  EXPECT_EQ(d.output(r), plain_output(make_spec({.prompt_len = 5, .max_tokens = 16})));
}

TEST(SpeculativeRounds, MetricsCountDraftsAcceptedTokensAndPositions) {
  spec_driver right(spec_config(3), fake_proposer(proposer_kind::right, kVocab));
  right.submit(
      make_spec({.prompt_len = 3, .max_tokens = 13}));  // 1 token from the prefill, then three rounds of 3 drafts + 1
  right.run();
  const scheduler_metrics& m = right.sched().metrics();
  EXPECT_EQ(m.spec_drafts, 3u);
  EXPECT_EQ(m.spec_draft_tokens, 9u);
  EXPECT_EQ(m.spec_accepted_tokens, 9u);
  EXPECT_EQ(m.spec_accepted_per_position, (std::vector<std::uint64_t>{3, 3, 3}));
  EXPECT_EQ(m.generation_tokens, 13u);
  engine_stats stats;
  m.fill(stats);
  EXPECT_EQ(stats.spec_decode_num_drafts, 3u);
  EXPECT_EQ(stats.spec_decode_num_draft_tokens, 9u);
  EXPECT_EQ(stats.spec_decode_num_accepted_tokens, 9u);
  EXPECT_EQ(stats.spec_decode_num_accepted_tokens_per_pos, (std::vector<std::uint64_t>{3, 3, 3}));

  spec_driver wrong(spec_config(3), fake_proposer(proposer_kind::wrong, kVocab));
  wrong.submit(make_spec({.prompt_len = 3, .max_tokens = 5}));  // rounds of 3, 2 and 1 drafts, then a plain decode
  wrong.run();
  EXPECT_EQ(wrong.sched().metrics().spec_drafts, 3u);
  EXPECT_EQ(wrong.sched().metrics().spec_draft_tokens, 6u);
  EXPECT_EQ(wrong.sched().metrics().spec_accepted_tokens, 0u);
  EXPECT_EQ(wrong.sched().metrics().spec_accepted_per_position, (std::vector<std::uint64_t>{0, 0, 0}));
}

TEST(SpeculativeRounds, AResultWhoseAcceptedCountsDoNotFitIsRefused) {
  spec_driver d(spec_config(2), fake_proposer(proposer_kind::right, kVocab));
  d.submit(make_spec({.prompt_len = 3, .max_tokens = 10}));
  d.step();
  const scheduled_step step = d.plan();
  step_result result = d.execute(step);
  step_result missing = result;
  missing.accepted.clear();
  EXPECT_NE(d.sched().on_step_result(missing, d.now).error, "");
  step_result too_many = result;
  too_many.accepted[0] = 3;
  EXPECT_NE(d.sched().on_step_result(too_many, d.now).error, "");
  d.deliver(result);
  d.run();
}

// A new sequence's acceptance starts from the engine's average over the
// rounds before it, not from 1: after a request whose every draft was
// rejected, the next one's first round asks for fewer slots (adaptive k);
// after one whose every draft was accepted, for all of them.
TEST(SpeculativeRounds, ANewSequenceStartsFromTheEnginesAcceptance) {
  for (const proposer_kind kind : {proposer_kind::wrong, proposer_kind::right}) {
    scheduler_config config = spec_config(4);
    config.speculative_adaptive = true;
    spec_driver d(config, fake_proposer(kind, kVocab));
    d.submit(make_spec({.prompt_len = 3, .max_tokens = 40}));
    d.run();
    const request_handle next = d.submit(make_spec({.prompt_len = 3, .max_tokens = 40, .first_token = 9}));
    std::int32_t first_slots = -1;
    for (int i = 0; i < 4 && first_slots <= 0; ++i) {
      const scheduled_step step = d.plan();
      for (const scheduled_sequence& s : step.sequences)
        if (s.request == next && s.draft_slots > 0) first_slots = s.draft_slots;
      d.deliver(d.execute(step));
    }
    if (kind == proposer_kind::wrong) {
      EXPECT_GE(first_slots, 1) << "a sequence never measured still gets its round";
      EXPECT_LT(first_slots, 4) << "its first round's slots";
    } else {
      EXPECT_EQ(first_slots, 4);
    }
    d.run();
  }
}

// Waiting and prefilling sequences count towards speculative_max_batch: a
// decode beside two long prompts gets no draft slots with a cap of 2, and
// gets them with 3.
TEST(SpeculativeKnobs, TheBatchCapCountsPrefillingSequences) {
  for (const int cap : {2, 3}) {
    scheduler_config config = spec_config(3);
    config.speculative_max_batch = cap;
    spec_driver d(config, fake_proposer(proposer_kind::right, kVocab));
    const request_handle shorter = d.submit(make_spec({.prompt_len = 2, .max_tokens = 40}));
    d.step();  // the short prompt's prefill
    d.submit(make_spec({.prompt_len = 60, .max_tokens = 4}));
    d.submit(make_spec({.prompt_len = 60, .max_tokens = 4}));
    std::int32_t slots_beside_prefills = 0;
    for (int i = 0; i < 3; ++i) {
      const scheduled_step step = d.plan();
      for (const scheduled_sequence& s : step.sequences)
        if (s.request == shorter) slots_beside_prefills += s.draft_slots;
      d.deliver(d.execute(step));
    }
    if (cap == 2)
      EXPECT_EQ(slots_beside_prefills, 0) << "three sequences running";
    else
      EXPECT_GT(slots_beside_prefills, 0) << "three sequences running, cap 3";
    d.run();
  }
}

TEST(SpeculativeKnobs, TheKnobsReachTheSchedulerAndAreLive) {
  engine_config engine;
  EXPECT_EQ(engine.num_speculative_tokens, 0) << "off by default";
  EXPECT_TRUE(engine.speculative_adaptive);
  EXPECT_EQ(engine.speculative_max_batch, 16);
  engine.num_speculative_tokens = 5;
  engine.speculative_adaptive = false;
  engine.speculative_max_batch = 7;
  const scheduler_config config(engine);
  EXPECT_EQ(config.num_speculative_tokens, 5);
  EXPECT_FALSE(config.speculative_adaptive);
  EXPECT_EQ(config.speculative_max_batch, 7);

  scheduler_loop_config setup;
  setup.scheduler.num_device_blocks = 16;
  scheduler_loop loop(setup);
  settings_change change;
  change.num_speculative_tokens = 4;
  change.speculative_adaptive = false;
  change.speculative_max_batch = 3;
  EXPECT_EQ(loop.configure(change, 0), "");
  const live_settings settings = loop.stats(0).settings;
  EXPECT_EQ(settings.num_speculative_tokens, 4);
  EXPECT_FALSE(settings.speculative_adaptive);
  EXPECT_EQ(settings.speculative_max_batch, 3);
  EXPECT_EQ(loop.core().metrics().spec_accepted_per_position.size(), 4u) << "every position's series from the start";
  change = {};
  change.num_speculative_tokens = 17;
  EXPECT_EQ(loop.configure(change, 0), knob_defaults().problem("num_speculative_tokens", "17"));
  EXPECT_EQ(loop.core().config().num_speculative_tokens, 4);
}

}  // namespace
}  // namespace troupe::testing

// Live settings: how a settings change maps to the scheduler's knobs, and
// the stats snapshot that reports them.

#include <gtest/gtest.h>

#include "tests/scheduler/loop_driver.hpp"

namespace troupe::testing {
namespace {

TEST(LoopConfigure, EveryFieldOfAChangeReachesTheScheduler) {
  loop_driver d;
  settings_change change;
  change.policy = "priority";
  change.preemption_mode = "swap";
  change.max_num_batched_tokens = 128;
  change.max_num_seqs = 4;
  change.max_prefill_chunk = 16;
  change.max_waiting_requests = 10;
  EXPECT_EQ(d.loop.configure(change, 0), "");
  const scheduler_config& config = d.loop.core().config();
  EXPECT_EQ(d.loop.core().policy().name(), std::string("priority"));
  EXPECT_EQ(config.preemption, preemption_mode::swap);
  EXPECT_EQ(config.max_num_batched_tokens, 128);
  EXPECT_EQ(config.max_num_seqs, 4);
  EXPECT_EQ(config.max_prefill_chunk, 16);
  EXPECT_EQ(config.max_waiting_requests, 10);

  const live_settings settings = d.loop.stats(0).settings;
  EXPECT_EQ(settings.policy, "priority");
  EXPECT_EQ(settings.preemption_mode, "swap");
  EXPECT_EQ(settings.max_num_batched_tokens, 128);
  EXPECT_EQ(settings.max_num_seqs, 4);
  EXPECT_EQ(settings.max_prefill_chunk, 16);
  EXPECT_EQ(settings.max_waiting_requests, 10);
}

TEST(LoopConfigure, ThePolicyAndPreemptionTunablesAreLive) {
  loop_driver d;
  settings_change change;
  change.mlfq_levels = 3;
  change.mlfq_quantum_growth = 4;
  change.mlfq_entry_prompt_tokens = 64;
  change.mlfq_promote_after = 2.5;
  change.fair_prompt_weight = 0.5;
  change.fair_output_weight = 3;
  change.fair_idle_tenants = 7;
  change.swap_min_tokens = 100;
  change.preemption_grace_steps = 2;
  change.admission_watermark = 0.1;
  EXPECT_EQ(d.loop.configure(change, 0), "");
  const scheduler_config& config = d.loop.core().config();
  EXPECT_EQ(config.policies.mlfq_levels, 3);
  EXPECT_EQ(config.policies.mlfq_quantum_growth, 4);
  EXPECT_EQ(config.policies.mlfq_entry_prompt_tokens, 64);
  EXPECT_DOUBLE_EQ(config.policies.mlfq_promote_after_s, 2.5);
  EXPECT_DOUBLE_EQ(config.policies.fair_prompt_weight, 0.5);
  EXPECT_DOUBLE_EQ(config.policies.fair_output_weight, 3);
  EXPECT_EQ(config.policies.fair_idle_tenants, 7u);
  EXPECT_EQ(config.swap_min_tokens, 100);
  EXPECT_EQ(config.preemption_grace_steps, 2);
  EXPECT_DOUBLE_EQ(config.admission_watermark, 0.1);
  const live_settings settings = d.loop.stats(0).settings;
  EXPECT_EQ(settings.mlfq_levels, 3);
  EXPECT_DOUBLE_EQ(settings.mlfq_promote_after, 2.5);
  EXPECT_EQ(settings.fair_idle_tenants, 7);
  EXPECT_EQ(settings.swap_min_tokens, 100);
  EXPECT_DOUBLE_EQ(settings.admission_watermark, 0.1);
  change = {};
  change.admission_watermark = 0.6;
  EXPECT_EQ(d.loop.configure(change, 0), "knob 'admission_watermark': 0.6 is outside [0, 0.5]");
  EXPECT_DOUBLE_EQ(d.loop.core().config().admission_watermark, 0.1) << "nothing changed";
}

TEST(LoopConfigure, UnsetFieldsStayAsTheyAre) {
  loop_driver d;
  const scheduler_config before = d.loop.core().config();
  settings_change change;
  change.max_num_seqs = 3;
  EXPECT_EQ(d.loop.configure(change, 0), "");
  EXPECT_EQ(d.loop.core().config().max_num_seqs, 3);
  EXPECT_EQ(d.loop.core().config().max_num_batched_tokens, before.max_num_batched_tokens);
  EXPECT_EQ(d.loop.core().config().preemption, before.preemption);
  EXPECT_EQ(d.loop.core().policy().name(), std::string("fcfs"));
}

TEST(LoopConfigure, AWrongChangeSaysWhyAndChangesNothing) {
  loop_driver d;
  const scheduler_config before = d.loop.core().config();
  settings_change change;
  change.max_num_seqs = 5;
  change.preemption_mode = "sometimes";
  EXPECT_EQ(d.loop.configure(change, 0), "unknown preemption_mode 'sometimes'");
  change.preemption_mode.reset();
  change.policy = "lottery";
  EXPECT_EQ(d.loop.configure(change, 0), "unknown policy 'lottery'");
  change.policy.reset();
  change.max_num_batched_tokens = 0;
  EXPECT_EQ(d.loop.configure(change, 0), "knob 'max_num_batched_tokens': 0 is outside [1, 1048576]");
  EXPECT_EQ(d.loop.core().config().max_num_seqs, before.max_num_seqs);
  EXPECT_EQ(d.loop.core().config().max_num_batched_tokens, before.max_num_batched_tokens);
  EXPECT_EQ(d.loop.core().policy().name(), std::string("fcfs"));
}

// A drafter in the target's KV drafting ahead would write blocks the step
// being verified uses: forcing it on live is refused; auto and off are not.
TEST(LoopConfigure, DraftingAheadIsNotForcedOnForADrafterInTheTargetsKv) {
  for (const bool shares_target_kv : {false, true}) {
    SCOPED_TRACE(shares_target_kv ? "in the target's KV" : "its own pool");
    scheduler_loop_config config = small_loop_config();
    config.scheduler.drafter_shares_target_kv = shares_target_kv;
    loop_driver d(config);
    settings_change change;
    change.speculative_draft_ahead = "on";
    const std::string problem = d.loop.configure(change, 0);
    EXPECT_EQ(d.loop.core().config().speculative_draft_ahead,
              shares_target_kv ? draft_ahead_mode::automatic : draft_ahead_mode::on);
    if (shares_target_kv) {
      EXPECT_NE(problem.find("speculative_draft_ahead on needs a drafter with a KV pool of its own"), std::string::npos)
          << problem;
    } else {
      EXPECT_EQ(problem, "");
    }
    change.speculative_draft_ahead = "off";
    EXPECT_EQ(d.loop.configure(change, 0), "");
    EXPECT_EQ(d.loop.core().config().speculative_draft_ahead, draft_ahead_mode::off);
  }
}

TEST(LoopConfigure, TheSnapshotCountsRequestsAndReportsHealthAndSettings) {
  loop_driver d;
  d.submit("a", 100);
  d.submit("b", 100);
  engine_stats stats = d.loop.stats(0);
  EXPECT_EQ(stats.num_requests_waiting, 0) << "gauges move at the step boundary";
  ASSERT_TRUE(d.plan());
  stats = d.loop.stats(0);
  EXPECT_EQ(stats.num_requests_running, 2);
  EXPECT_EQ(stats.num_requests_waiting, 0);
  EXPECT_EQ(stats.steps, 1u);
  EXPECT_EQ(stats.prompt_tokens, 8u);
  EXPECT_TRUE(stats.healthy);
  EXPECT_EQ(stats.health_detail, "");
  EXPECT_EQ(stats.settings.policy, "fcfs");
  EXPECT_EQ(stats.settings.preemption_mode, "recompute");
  EXPECT_EQ(stats.settings.max_num_batched_tokens, 64);
}

}  // namespace
}  // namespace troupe::testing

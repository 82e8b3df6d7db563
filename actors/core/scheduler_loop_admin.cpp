// The scheduler loop's admin side: the stats snapshot, live settings, the
// operator's request actions, drains and their deadline tick.

#include <algorithm>

#include "actors/core/scheduler_loop.hpp"

namespace troupe {

live_settings scheduler_loop::settings() const {
  const scheduler_config& config = core_.config();
  live_settings settings;
  settings.policy = core_.policy().name();
  settings.preemption_mode = preemption_mode_name(config.preemption);
  settings.max_num_batched_tokens = config.max_num_batched_tokens;
  settings.max_num_seqs = config.max_num_seqs;
  settings.max_prefill_chunk = config.max_prefill_chunk;
  settings.max_waiting_requests = config.max_waiting_requests;
  const policy_config& policies = config.policies;
  settings.mlfq_quantum = policies.mlfq_base_quantum;
  settings.mlfq_levels = policies.mlfq_levels;
  settings.mlfq_quantum_growth = policies.mlfq_quantum_growth;
  settings.mlfq_entry_prompt_tokens = policies.mlfq_entry_prompt_tokens;
  settings.mlfq_promote_after = policies.mlfq_promote_after_s;
  settings.fair_prompt_weight = policies.fair_prompt_weight;
  settings.fair_output_weight = policies.fair_output_weight;
  settings.fair_idle_tenants = static_cast<int>(policies.fair_idle_tenants);
  settings.swap_min_tokens = config.swap_min_tokens;
  settings.preemption_grace_steps = config.preemption_grace_steps;
  settings.admission_watermark = config.admission_watermark;
  settings.num_speculative_tokens = config.num_speculative_tokens;
  settings.speculative_adaptive = config.speculative_adaptive;
  settings.speculative_turn_down = config.speculative_turn_down;
  settings.speculative_max_batch = config.speculative_max_batch;
  settings.speculative_tree_width = config.speculative_tree_width;
  settings.speculative_draft_ahead = draft_ahead_mode_name(config.speculative_draft_ahead);
  return settings;
}

engine_stats scheduler_loop::stats(double now) const {
  engine_stats stats;
  core_.metrics().fill(stats);
  stats.settings = settings();
  stats.step_failures = step_failures_;
  stats.healthy = healthy_;
  stats.health_detail = health_detail_;
  if (healthy_ && !in_flight_.empty() && now - in_flight_.begin()->second > config_.stuck_after_s) {
    stats.healthy = false;
    stats.health_detail = "a step has been running for " + std::to_string(now - in_flight_.begin()->second) + " s";
  }
  return stats;
}

// The one mapping from a live settings change to the scheduler's knobs.
std::string scheduler_loop::configure(const settings_change& change, double now) {
  scheduler_config config = core_.config();
  if (change.preemption_mode) {
    auto mode = parse_preemption_mode(*change.preemption_mode);
    if (!mode) return "unknown preemption_mode '" + *change.preemption_mode + "'";
    config.preemption = *mode;
  }
  if (change.max_num_batched_tokens) config.max_num_batched_tokens = *change.max_num_batched_tokens;
  if (change.max_num_seqs) config.max_num_seqs = *change.max_num_seqs;
  // A budget whose steps the workspace cannot hold would grow it until memory runs out.
  if (change.max_num_batched_tokens || change.max_num_seqs) {
    std::string problem = config_.workspace.problem(config.max_num_batched_tokens, config.max_num_seqs);
    if (!problem.empty()) return problem;
  }
  if (change.max_prefill_chunk) config.max_prefill_chunk = *change.max_prefill_chunk;
  if (change.max_waiting_requests) config.max_waiting_requests = *change.max_waiting_requests;
  policy_config& policies = config.policies;
  if (change.mlfq_quantum) policies.mlfq_base_quantum = *change.mlfq_quantum;
  if (change.mlfq_levels) policies.mlfq_levels = *change.mlfq_levels;
  if (change.mlfq_quantum_growth) policies.mlfq_quantum_growth = *change.mlfq_quantum_growth;
  if (change.mlfq_entry_prompt_tokens) policies.mlfq_entry_prompt_tokens = *change.mlfq_entry_prompt_tokens;
  if (change.mlfq_promote_after) policies.mlfq_promote_after_s = *change.mlfq_promote_after;
  if (change.fair_prompt_weight) policies.fair_prompt_weight = *change.fair_prompt_weight;
  if (change.fair_output_weight) policies.fair_output_weight = *change.fair_output_weight;
  if (change.fair_idle_tenants) policies.fair_idle_tenants = static_cast<std::size_t>(*change.fair_idle_tenants);
  if (change.swap_min_tokens) config.swap_min_tokens = *change.swap_min_tokens;
  if (change.preemption_grace_steps) config.preemption_grace_steps = *change.preemption_grace_steps;
  if (change.admission_watermark) config.admission_watermark = *change.admission_watermark;
  if (change.num_speculative_tokens) config.num_speculative_tokens = *change.num_speculative_tokens;
  if (change.speculative_adaptive) config.speculative_adaptive = *change.speculative_adaptive;
  if (change.speculative_turn_down) config.speculative_turn_down = *change.speculative_turn_down;
  if (change.speculative_max_batch) config.speculative_max_batch = *change.speculative_max_batch;
  if (change.speculative_tree_width) config.speculative_tree_width = *change.speculative_tree_width;
  if (change.speculative_draft_ahead) {
    const auto ahead = parse_draft_ahead_mode(*change.speculative_draft_ahead);
    if (!ahead) return "unknown speculative_draft_ahead '" + *change.speculative_draft_ahead + "'";
    // Its drafts ahead would write blocks the target's step in flight may use.
    if (*ahead == draft_ahead_mode::on && config.drafter_shares_target_kv)
      return "speculative_draft_ahead on needs a drafter with a KV pool of its own, and this one works in the "
             "target's KV: restart with --speculative-draft-ahead on to give it one";
    config.speculative_draft_ahead = *ahead;
  }
  if (change.policy && !make_policy(*change.policy)) return "unknown policy '" + *change.policy + "'";
  if (std::string problem = core_.set_config(config); !problem.empty()) return problem;
  if (change.policy) core_.set_policy(*change.policy, now);
  return {};
}

std::optional<loop_events> scheduler_loop::abort(const std::string& id, double now) {
  if (!handle_of(id)) return std::nullopt;
  return cancel(id, now);
}

bool scheduler_loop::set_priority(const std::string& id, int priority) {
  const std::optional<request_handle> handle = handle_of(id);
  return handle && core_.set_priority(*handle, priority);
}

drain_start scheduler_loop::drain(double seconds, double now) {
  draining_ = true;
  if (!core_.has_unfinished_requests()) return {true};
  if (!healthy_) return {false};  // nothing can finish on a failed executor
  const drain_id id = next_drain_++;
  drains_.push_back({id, now + seconds});
  return {std::nullopt, id};
}

loop_events scheduler_loop::on_tick(double now) {
  const bool overdue =
      std::any_of(drains_.begin(), drains_.end(), [now](const pending_drain& d) { return now >= d.deadline_s; });
  if (!overdue) return {};
  // Drained when the aborted requests are released at once; given up on
  // when a step in flight still holds some.
  loop_events out = routed(abort_live(now));
  give_up_drains(out.drains);
  return out;
}

}  // namespace troupe

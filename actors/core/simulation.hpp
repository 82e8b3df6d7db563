#pragma once
// The scheduler simulator's pure core: the real scheduler and block manager
// run against a cost model of step time instead of a model, on a generated
// workload. Deterministic: the same inputs give the same outcome.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actors/core/policy.hpp"
#include "actors/core/scheduler_types.hpp"
#include "actors/core/workload.hpp"

namespace troupe {

/// Step time = base + per_token × tokens computed + per_context × Σ context
/// lengths of the step's sequences (attention reads every sequence's cache).
struct step_cost_model {
  double base_s = 0.004;
  double per_token_s = 40e-6;
  double per_context_token_s = 0.2e-6;

  /// Seconds one step takes.
  double step_time(std::int64_t tokens, std::int64_t context_tokens) const {
    return base_s + per_token_s * static_cast<double>(tokens) +
           per_context_token_s * static_cast<double>(context_tokens);
  }
};

/// One simulation: a policy, the scheduler's knobs (including the pools, the
/// preemption mode and the policies' tunables) and the cost model.
struct simulation_config {
  std::string policy = engine_config{}.policy;  ///< the policy knob's default unless set
  scheduler_config scheduler;
  step_cost_model cost;
};

/// Percentiles (nearest rank) and mean of a sample.
struct latency_summary {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0;
  std::size_t count = 0;
};

/// Summarizes `values` (empty: all zero).
latency_summary summarize(std::vector<double> values);

/// What happened to one request.
struct request_outcome {
  int tenant = 0;
  int priority = 0;
  int prompt_tokens = 0;
  int output_tokens = 0;  ///< generated
  double arrival_s = 0;
  double first_token_s = -1;         ///< -1: none
  double finish_s = -1;              ///< -1: not finished (rejected)
  std::optional<double> deadline_s;  ///< absolute
  bool rejected = false;
};

/// The outcome of one run.
struct simulation_result {
  std::string policy;
  std::string preemption;
  std::vector<request_outcome> requests;  ///< in workload order
  latency_summary ttft_s;                 ///< arrival to first token
  latency_summary tpot_s;                 ///< per output token after the first
  latency_summary jct_s;                  ///< arrival to the last token
  int completed = 0;
  int rejected = 0;
  int deadline_requests = 0;
  int deadline_missed = 0;                   ///< finished after the deadline
  int deadline_rejected = 0;                 ///< refused at admission
  std::vector<double> tenant_share;          ///< tokens per tenant while every tenant had queued work
  std::vector<double> tenant_share_overall;  ///< tokens per tenant over the whole run
  std::uint64_t preemptions_swap = 0;
  std::uint64_t preemptions_recompute = 0;
  std::int64_t steps = 0;
  double makespan_s = 0;
  double mean_step_tokens = 0;
  std::uint64_t prefix_hit_tokens = 0;
};

/// Runs `workload` to completion. Throws std::invalid_argument for an
/// unknown policy or inconsistent configuration.
simulation_result run_simulation(const simulation_config& config, const std::vector<generated_request>& workload,
                                 int tenants);

}  // namespace troupe

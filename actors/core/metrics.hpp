#pragma once
// The metrics pure core: counters, gauges and fixed-bucket histograms that
// the scheduler updates with times passed in, snapshotted in the shape of
// api/troupe/engine.hpp (Prometheus cumulative buckets).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "memory/kv_protocol.hpp"
#include "troupe/engine.hpp"

namespace troupe {

/// A histogram over fixed upper bounds (ascending; +Inf is implicit).
class histogram {
 public:
  /// Throws std::invalid_argument when `upper_bounds` is not strictly ascending.
  explicit histogram(std::vector<double> upper_bounds);
  /// Counts `value` in the first bucket whose bound is >= value (Prometheus `le`).
  void observe(double value);
  /// Cumulative counts per bound, then +Inf; sum and count of observations.
  histogram_snapshot snapshot() const;
  std::uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;  ///< per bucket (not cumulative), bounds + 1 entries
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

/// Default bucket bounds, in seconds or tokens.
std::vector<double> ttft_buckets_s();
std::vector<double> inter_token_buckets_s();
std::vector<double> request_latency_buckets_s();
std::vector<double> iteration_token_buckets();
std::vector<double> step_time_buckets_s();

/// Everything the scheduler measures.
struct scheduler_metrics {
  histogram time_to_first_token_s{ttft_buckets_s()};
  histogram inter_token_latency_s{inter_token_buckets_s()};
  histogram e2e_request_latency_s{request_latency_buckets_s()};
  histogram request_queue_time_s{request_latency_buckets_s()};
  histogram iteration_tokens{iteration_token_buckets()};
  histogram model_execute_time_s{step_time_buckets_s()};  ///< executor time of each step with sequences

  std::uint64_t steps = 0;
  std::uint64_t step_sequences = 0;                       ///< sequences over all steps (batch sizes summed)
  std::uint64_t prompt_tokens = 0;                        ///< prompt tokens of admitted requests
  std::uint64_t generation_tokens = 0;                    ///< sampled tokens
  std::uint64_t requests_rejected = 0;                    ///< refused at submit (overloaded, too long, deadline)
  std::map<std::string, std::uint64_t> preemptions;       ///< by kind: swap, recompute
  std::map<std::string, std::uint64_t> request_success;   ///< by finish reason: stop, length, abort
  std::uint64_t spec_drafts = 0;                          ///< verify groups: one sequence's drafts in one step
  std::uint64_t spec_draft_tokens = 0;                    ///< drafts verified
  std::uint64_t spec_accepted_tokens = 0;                 ///< drafts accepted
  std::vector<std::uint64_t> spec_accepted_per_position;  ///< [>= k_max] groups that accepted draft i (0-based)
  std::uint64_t spec_ahead_drafts = 0;  ///< sequences drafted for ahead of their step (draft_ahead.hpp)
  std::uint64_t spec_ahead_used = 0;    ///< of those, whose guess held: their drafts were used

  int num_running = 0;  ///< gauges, set after each planned step
  int num_waiting = 0;
  int num_swapped = 0;
  kv_usage kv;  ///< the KV manager's last reported usage

  /// Copies counters, gauges and histogram snapshots into `stats` (the
  /// fields the scheduler owns; health and policy are left alone).
  void fill(engine_stats& stats) const;
};

}  // namespace troupe

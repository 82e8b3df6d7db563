#include "actors/core/metrics.hpp"

#include <algorithm>
#include <stdexcept>

namespace troupe {

histogram::histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {
  for (std::size_t i = 1; i < bounds_.size(); ++i) {
    if (!(bounds_[i - 1] < bounds_[i])) throw std::invalid_argument("histogram bounds must be strictly ascending");
  }
}

void histogram::observe(double value) {
  const auto bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[static_cast<std::size_t>(bucket)];
  sum_ += value;
  ++count_;
}

histogram_snapshot histogram::snapshot() const {
  histogram_snapshot s;
  s.upper_bounds = bounds_;
  s.bucket_counts.resize(counts_.size());
  std::uint64_t running = 0;
  for (std::size_t i = 0; i < counts_.size(); ++i) s.bucket_counts[i] = running += counts_[i];
  s.sum = sum_;
  s.count = count_;
  return s;
}

std::vector<double> ttft_buckets_s() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
}

std::vector<double> inter_token_buckets_s() {
  return {0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5};
}

std::vector<double> request_latency_buckets_s() {
  return {0.01, 0.1,  0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,  10.0,
          15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0};
}

std::vector<double> iteration_token_buckets() {
  return {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
}

std::vector<double> step_time_buckets_s() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0};
}

void scheduler_metrics::fill(engine_stats& stats) const {
  stats.num_requests_running = num_running;
  stats.num_requests_waiting = num_waiting;
  stats.num_requests_swapped = num_swapped;
  stats.kv_blocks_total = kv.device_blocks;
  stats.kv_blocks_free = kv.device_free_blocks;
  stats.kv_cache_usage =
      kv.device_blocks > 0 ? 1.0 - static_cast<double>(kv.device_free_blocks) / kv.device_blocks : 0.0;
  stats.host_kv_cache_usage =
      kv.host_blocks > 0 ? 1.0 - static_cast<double>(kv.host_free_blocks) / kv.host_blocks : 0.0;
  stats.prefix_cache_queries = kv.prefix_query_tokens;
  stats.prefix_cache_hits = kv.prefix_hit_tokens;
  stats.prompt_tokens = prompt_tokens;
  stats.generation_tokens = generation_tokens;
  stats.preemptions = preemptions;
  stats.request_success = request_success;
  stats.steps = steps;
  stats.step_sequences = step_sequences;
  stats.spec_decode_num_drafts = spec_drafts;
  stats.spec_decode_num_draft_tokens = spec_draft_tokens;
  stats.spec_decode_num_accepted_tokens = spec_accepted_tokens;
  stats.spec_decode_num_accepted_tokens_per_pos = spec_accepted_per_position;
  stats.spec_decode_num_ahead_drafts = spec_ahead_drafts;
  stats.spec_decode_num_ahead_used = spec_ahead_used;
  stats.time_to_first_token_s = time_to_first_token_s.snapshot();
  stats.inter_token_latency_s = inter_token_latency_s.snapshot();
  stats.e2e_request_latency_s = e2e_request_latency_s.snapshot();
  stats.request_queue_time_s = request_queue_time_s.snapshot();
  stats.iteration_tokens = iteration_tokens.snapshot();
  stats.model_execute_time_s = model_execute_time_s.snapshot();
}

}  // namespace troupe

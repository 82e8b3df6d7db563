// Histograms (Prometheus `le` buckets, cumulative snapshots) and the
// scheduler's latency metrics with times passed in.

#include <gtest/gtest.h>

#include <stdexcept>

#include "tests/scheduler/harness.hpp"

namespace troupe::testing {
namespace {

TEST(Histogram, CountsCumulativelyPerUpperBound) {
  histogram h({1.0, 2.0, 5.0});
  for (double v : {0.5, 1.0, 1.5, 7.0}) h.observe(v);
  const histogram_snapshot s = h.snapshot();
  EXPECT_EQ(s.upper_bounds, (std::vector<double>{1.0, 2.0, 5.0}));
  EXPECT_EQ(s.bucket_counts, (std::vector<std::uint64_t>{2, 3, 3, 4})) << "a value equal to a bound is in its bucket";
  EXPECT_DOUBLE_EQ(s.sum, 10.0);
  EXPECT_EQ(s.count, 4u);
  EXPECT_THROW(histogram({1.0, 1.0}), std::invalid_argument);
}

TEST(SchedulerMetrics, LatenciesFollowTheTimesPassedIn) {
  harness h(small_config({.budget = 64, .max_seqs = 1}));
  h.step_s = 0.25;
  h.submit(make_spec({.prompt_len = 8, .max_tokens = 3, .first_token = 1}));
  h.now = 0.5;
  h.submit(make_spec({.prompt_len = 8, .max_tokens = 2, .first_token = 100}));
  h.now = 1.0;
  h.run();
  // Request 1 (arrived 0) is planned at t=1.0 (queued 1 s) and gets tokens
  // at 1.25, 1.5, 1.75. Request 2 (arrived 0.5) starts at 1.75 (queued
  // 1.25 s) and gets tokens at 2.0 and 2.25. Steps carry 8, 1, 1, 8, 1 tokens.
  const scheduler_metrics& m = h.sched().metrics();
  const histogram_snapshot ttft = m.time_to_first_token_s.snapshot();
  EXPECT_EQ(ttft.count, 2u);
  EXPECT_DOUBLE_EQ(ttft.sum, 1.25 + 1.5);
  const histogram_snapshot itl = m.inter_token_latency_s.snapshot();
  EXPECT_EQ(itl.count, 3u);
  EXPECT_DOUBLE_EQ(itl.sum, 0.75);
  const histogram_snapshot queue = m.request_queue_time_s.snapshot();
  EXPECT_DOUBLE_EQ(queue.sum, 1.0 + 1.25);
  const histogram_snapshot e2e = m.e2e_request_latency_s.snapshot();
  EXPECT_DOUBLE_EQ(e2e.sum, 1.75 + 1.75);
  EXPECT_EQ(m.generation_tokens, 5u);
  EXPECT_EQ(m.prompt_tokens, 16u);
  EXPECT_EQ(m.request_success.at("length"), 2u);
  EXPECT_DOUBLE_EQ(m.iteration_tokens.snapshot().sum, 19.0);
  EXPECT_EQ(m.iteration_tokens.snapshot().count, 5u);
  EXPECT_EQ(m.model_execute_time_s.snapshot().count, 5u);  // the fake model reports 1 ms per step
  EXPECT_DOUBLE_EQ(m.model_execute_time_s.snapshot().sum, 0.005);

  engine_stats stats;
  m.fill(stats);
  EXPECT_EQ(stats.generation_tokens, 5u);
  EXPECT_EQ(stats.num_requests_running, 0);
  EXPECT_EQ(stats.kv_blocks_total, 64);
  EXPECT_EQ(stats.time_to_first_token_s.count, 2u);
  EXPECT_EQ(stats.model_execute_time_s.count, 5u);
}

TEST(SchedulerMetrics, GaugesAndKvUsageTrackTheLastStep) {
  harness h(small_config({.budget = 64, .max_seqs = 2, .blocks = 16}));
  for (int i = 0; i < 3; ++i) h.submit(make_spec({.prompt_len = 8, .max_tokens = 10, .first_token = 1 + 20 * i}));
  h.step();
  const scheduler_metrics& m = h.sched().metrics();
  EXPECT_EQ(m.num_running, 2);
  EXPECT_EQ(m.num_waiting, 1);
  engine_stats stats;
  m.fill(stats);
  EXPECT_EQ(stats.kv_blocks_free, 12);
  EXPECT_DOUBLE_EQ(stats.kv_cache_usage, 4.0 / 16.0);
}

}  // namespace
}  // namespace troupe::testing

#pragma once
// Workloads for the speculative identity tests: seeded requests arriving
// over the first steps, run through spec_driver with or without a
// proposer, and the comparison of their outputs.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include "tests/scheduler/spec_driver.hpp"

namespace troupe::testing {

inline constexpr std::int32_t kVocab = 64;

struct arrival {
  int step = 0;
  request_spec spec;
};

/// Seeded requests with random lengths, n, stop ids and arrival steps; some share a prompt prefix.
inline std::vector<arrival> random_workload(std::uint32_t seed, int count) {
  std::mt19937 rng(seed);
  const auto pick = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<arrival> work;
  for (int i = 0; i < count; ++i) {
    arrival a;
    a.step = pick(0, 30);
    const int prompt_len = pick(1, 40);
    const int max_tokens = pick(1, 48);
    const std::int32_t first_token = pick(0, 1) == 0 ? 1 : 100 * (i + 1);
    const auto seed = static_cast<std::uint64_t>(pick(1, 1 << 20));
    a.spec = make_spec({.prompt_len = prompt_len, .max_tokens = max_tokens, .first_token = first_token, .seed = seed});
    a.spec.n = pick(0, 3) == 0 ? pick(2, 3) : 1;
    if (pick(0, 1) == 0) a.spec.stop_token_ids = {pick(0, kVocab - 1), pick(0, kVocab - 1)};
    if (pick(0, 3) == 0) a.spec.min_tokens = pick(0, 6);
    work.push_back(std::move(a));
  }
  return work;
}

struct run_outcome {
  std::map<std::pair<request_handle, int>, std::vector<std::int32_t>> outputs;
  std::map<std::pair<request_handle, int>, finish_reason> reasons;
  int steps = 0;
  int preemptions = 0;
  int preempted_with_unsettled_slots = 0;
  scheduler_metrics metrics;
  std::vector<request_handle> handles;  ///< [request index]
};

/// Submits each request at its step and runs until all finished; cancels
/// request i at step `cancels[i]` when given.
inline run_outcome run_workload(const scheduler_config& config, std::optional<fake_proposer> proposer, int depth,
                                const std::vector<arrival>& work, const std::map<std::size_t, int>& cancels = {}) {
  spec_driver driver(config, std::move(proposer), depth, kVocab);
  std::vector<request_handle> handles(work.size(), 0);
  for (int step = 0; step < 20000; ++step) {
    for (std::size_t i = 0; i < work.size(); ++i) {
      if (work[i].step == step) handles[i] = driver.submit(work[i].spec);
      const auto cancel = cancels.find(i);
      if (cancel != cancels.end() && cancel->second == step && handles[i] != 0)
        driver.record(driver.sched().cancel(handles[i], driver.now));
    }
    const bool arrivals_left =
        std::any_of(work.begin(), work.end(), [step](const arrival& a) { return a.step > step; });
    if (!arrivals_left && !driver.sched().has_unfinished_requests() && !driver.sched().has_pending_kv_updates() &&
        driver.sched().num_steps_in_flight() == 0)
      break;
    driver.step();
  }
  EXPECT_FALSE(driver.sched().has_unfinished_requests());
  driver.expect_empty_pools();
  return {
      driver.outputs,           driver.reasons, driver.steps, driver.preemptions, driver.preempted_with_unsettled_slots,
      driver.sched().metrics(), handles};
}

inline void expect_same_outputs(const run_outcome& expected, const run_outcome& actual) {
  EXPECT_EQ(actual.outputs.size(), expected.outputs.size());
  for (const auto& [key, tokens] : expected.outputs) {
    EXPECT_EQ(actual.outputs.count(key) ? actual.outputs.at(key) : std::vector<std::int32_t>{}, tokens)
        << "request " << key.first << " choice " << key.second;
    EXPECT_EQ(actual.reasons.count(key) ? actual.reasons.at(key) : finish_reason::abort, expected.reasons.at(key))
        << "request " << key.first << " choice " << key.second;
  }
}

/// Every choice not cancelled (`cancels`: request index -> step) got the
/// tokens it gets in `expected`; a cancelled one a prefix of them.
inline void expect_outputs_or_prefixes(const run_outcome& expected, const run_outcome& actual,
                                       const std::map<std::size_t, int>& cancels) {
  std::set<request_handle> cancelled;
  for (const auto& [index, step] : cancels) cancelled.insert(actual.handles[index]);
  for (const auto& [key, tokens] : expected.outputs) {
    const std::vector<std::int32_t> got =
        actual.outputs.count(key) ? actual.outputs.at(key) : std::vector<std::int32_t>{};
    if (cancelled.count(key.first) == 0) {
      EXPECT_EQ(got, tokens) << "request " << key.first << " choice " << key.second;
      continue;
    }
    ASSERT_LE(got.size(), tokens.size());
    EXPECT_TRUE(std::equal(got.begin(), got.end(), tokens.begin())) << "a cancelled choice's tokens are a prefix";
  }
}

}  // namespace troupe::testing

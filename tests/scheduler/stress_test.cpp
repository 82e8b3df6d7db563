// Determinism under stress: random arrivals, lengths, n, priorities,
// deadlines, tenants, seeds and cancellations against a small pool that
// forces preemption, under every policy and both preemption modes, with and
// without a step in flight while the next is planned. Every choice that was
// not cancelled must produce exactly what it produces alone; cancelled ones
// a prefix of it; every request finishes once; the pools end full.

#include <gtest/gtest.h>

#include <random>

#include "tests/scheduler/harness.hpp"
#include "tests/scheduler/pipeline.hpp"

namespace troupe::testing {
namespace {

struct stress_case {
  const char* policy;
  preemption_mode mode;
  int depth;
  const char* switch_to;  // policy switched to halfway, or nullptr
};

std::ostream& operator<<(std::ostream& os, const stress_case& c) {
  return os << c.policy << "/" << preemption_mode_name(c.mode) << "/depth" << c.depth
            << (c.switch_to ? std::string("/to_") + c.switch_to : "");
}

struct planned_request {
  double arrival = 0;
  double cancel_at = -1;
  request_spec spec;
  request_handle handle = 0;
};

constexpr std::int32_t kEos = 7;

std::vector<planned_request> random_workload(std::uint32_t seed, int count) {
  std::mt19937 rng(seed);
  const auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<std::vector<std::int32_t>> documents(3);
  for (auto& doc : documents) {
    for (int i = 0; i < 16; ++i) doc.push_back(uniform(10, 999));
  }
  std::vector<planned_request> plan;
  double t = 0;
  for (int i = 0; i < count; ++i) {
    planned_request p;
    t += std::exponential_distribution<double>(250.0)(rng);
    p.arrival = t;
    const auto& doc = documents[static_cast<std::size_t>(uniform(0, 2))];
    p.spec.prompt.assign(doc.begin(), doc.begin() + uniform(0, 16));
    for (int k = uniform(1, 40); k > 0; --k) p.spec.prompt.push_back(uniform(10, 999));
    p.spec.max_tokens = uniform(1, 30);
    p.spec.min_tokens = uniform(0, 2);
    p.spec.ignore_eos = uniform(0, 4) == 0;
    p.spec.n = std::max(1, uniform(-3, 3));
    p.spec.priority = uniform(0, 3);
    if (uniform(0, 1) == 0) p.spec.deadline_s = 0.5 + uniform(0, 45) / 10.0;
    p.spec.user = std::string(1, static_cast<char>('a' + uniform(0, 2)));
    p.spec.seed = static_cast<std::uint64_t>(uniform(0, 1 << 30));
    if (uniform(0, 9) == 0) p.cancel_at = t + uniform(0, 50) / 100.0;
    plan.push_back(std::move(p));
  }
  return plan;
}

/// Every request finished once per choice; surviving choices produced what
/// they produce alone, cancelled ones a prefix of it.
void expect_run_alone_outputs(const std::vector<planned_request>& plan, pipeline& run) {
  for (const planned_request& p : plan) {
    EXPECT_EQ(run.done_per_request[p.handle], 1) << "request " << p.handle;
    const std::vector<std::int32_t> stops = p.spec.ignore_eos ? std::vector<std::int32_t>{} : std::vector{kEos};
    for (int choice = 0; choice < p.spec.n; ++choice) {
      const auto key = std::make_pair(p.handle, choice);
      ASSERT_EQ(run.finishes[key], 1) << "request " << p.handle << " choice " << choice;
      const auto expected = reference_outputs({.prompt = p.spec.prompt,
                                               .request_seed = *p.spec.seed,
                                               .choice = choice,
                                               .max_tokens = p.spec.max_tokens,
                                               .stop_ids = stops,
                                               .min_tokens = p.spec.min_tokens,
                                               .vocab = harness::kVocab});
      const auto& got = run.outputs[key];
      if (run.reasons[key] == finish_reason::abort) {
        ASSERT_LE(got.size(), expected.size());
        EXPECT_TRUE(std::equal(got.begin(), got.end(), expected.begin())) << "cancelled " << p.handle;
      } else {
        EXPECT_EQ(got, expected) << "request " << p.handle << " choice " << choice;
      }
    }
  }
}

class Stress : public ::testing::TestWithParam<stress_case> {};

TEST_P(Stress, EverySurvivingChoiceMatchesItsRunAlone) {
  const stress_case c = GetParam();
  scheduler_config config = small_config({.budget = 64, .max_seqs = 12, .chunk = 24, .blocks = 48, .host_blocks = 24});
  config.preemption = c.mode;
  config.eos_token_ids = {kEos};
  config.max_model_len = 256;
  config.swap_min_tokens = 24;
  config.policies.mlfq_promote_after_s = 0.3;
  scheduler sched(config, make_policy(c.policy));
  block_manager kv(kv_manager_config(config));
  fake_model model(config.num_device_blocks, config.num_host_blocks, config.block_size, harness::kVocab);
  pipeline run(sched, kv, model, c.depth);

  std::vector<planned_request> plan = random_workload(20261122u + static_cast<std::uint32_t>(c.depth), 1000);
  std::size_t next = 0;
  double now = 0;
  for (int step = 0; step < 20000; ++step) {
    for (; next < plan.size() && plan[next].arrival <= now; ++next) {
      const submit_result r = sched.submit(plan[next].spec, now);
      ASSERT_TRUE(r.accepted) << r.message;
      plan[next].handle = r.handle;
    }
    for (std::size_t i = 0; i < next; ++i) {
      if (plan[i].cancel_at >= 0 && plan[i].cancel_at <= now) {
        run.record(sched.cancel(plan[i].handle, now));
        plan[i].cancel_at = -1;
      }
    }
    if (c.switch_to != nullptr && step == 150) {
      ASSERT_TRUE(sched.set_policy(c.switch_to, now));
    }
    if (next == plan.size() && !sched.has_unfinished_requests() && !sched.has_pending_kv_updates()) break;
    run.step(now);
    now += 0.01;
  }
  run.drain(now);
  for (int i = 0; i < 3 && sched.has_pending_kv_updates(); ++i) run.step(now);

  EXPECT_GT(run.preemptions, 0) << "the pool should be small enough to force preemption";
  expect_run_alone_outputs(plan, run);
  EXPECT_FALSE(sched.has_unfinished_requests());
  EXPECT_EQ(kv.num_sequences(), 0u);
  EXPECT_EQ(kv.usage().device_free_blocks, config.num_device_blocks);
  EXPECT_EQ(kv.usage().host_free_blocks, config.num_host_blocks);
  EXPECT_EQ(kv.check_invariants(), "");
}

INSTANTIATE_TEST_SUITE_P(PoliciesAndModes, Stress,
                         ::testing::Values(stress_case{"fcfs", preemption_mode::recompute, 0, nullptr},
                                           stress_case{"fcfs", preemption_mode::swap, 1, nullptr},
                                           stress_case{"priority", preemption_mode::recompute, 1, nullptr},
                                           stress_case{"priority", preemption_mode::swap, 0, nullptr},
                                           stress_case{"mlfq", preemption_mode::recompute, 0, nullptr},
                                           stress_case{"mlfq", preemption_mode::swap, 1, nullptr},
                                           stress_case{"deadline", preemption_mode::recompute, 1, nullptr},
                                           stress_case{"deadline", preemption_mode::swap, 0, nullptr},
                                           stress_case{"fair", preemption_mode::recompute, 0, nullptr},
                                           stress_case{"fair", preemption_mode::swap, 1, nullptr},
                                           stress_case{"fcfs", preemption_mode::automatic, 1, "priority"},
                                           stress_case{"mlfq", preemption_mode::automatic, 0, "fair"}));

}  // namespace
}  // namespace troupe::testing

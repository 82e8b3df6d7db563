// Determinism under stress: 1,000 requests (fewer under sanitizers) with random prompts, lengths,
// priorities, seeds, n, arrival times and cancellations go through the real
// troupe (CPU backend, tiny model, batch-invariant numerics) with a KV pool
// small enough to force preemption, under every policy and both preemption
// modes. Every choice of every request that was not cancelled must equal its
// output when run alone; cancelled choices must be a prefix of it; every
// request must end; and the pool must be whole again at the end.

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#include "actors/core/scheduler_types.hpp"
#include "engine_fixture.hpp"
#include "model/checkpoint.hpp"
#include "solo_reference.hpp"

namespace troupe {
namespace {

/// Requests in the workload: 1,000, or TROUPE_STRESS_REQUESTS (at least
/// 100). The sanitizer presets run fewer (CMakePresets.json): under TSan the
/// thousand cost ten minutes per policy and mode, and a few hundred still
/// preempt, cancel and interleave on every thread.
int num_requests() {
  static const int count = [] {
    const char* text = std::getenv("TROUPE_STRESS_REQUESTS");
    const int value = text ? std::stoi(text) : 1000;
    if (value < 100) throw std::invalid_argument("TROUPE_STRESS_REQUESTS must be at least 100");
    return value;
  }();
  return count;
}

struct planned_request {
  generation_request request;
  int arrival_batch = 0;                            ///< submitted with the requests of the same batch
  bool cancel = false;                              ///< cancelled shortly after submission
  std::vector<std::vector<std::int32_t>> expected;  ///< per choice, run alone
};

std::vector<planned_request> make_workload(std::int64_t vocab) {
  std::mt19937_64 rng(2024);
  auto uniform = [&](int low, int high) { return std::uniform_int_distribution<int>(low, high)(rng); };
  std::vector<planned_request> plan(static_cast<std::size_t>(num_requests()));
  for (int i = 0; i < num_requests(); ++i) {
    generation_request& r = plan[static_cast<std::size_t>(i)].request;
    r.kind = prompt_kind::token_ids;
    r.prompt_token_ids.resize(static_cast<std::size_t>(uniform(2, 48)));
    for (auto& id : r.prompt_token_ids) id = uniform(0, static_cast<int>(vocab) - 1);
    r.max_tokens = uniform(1, 24);
    r.n = std::array{1, 1, 1, 2, 3}[static_cast<std::size_t>(uniform(0, 4))];
    r.seed = rng();
    r.sampling.temperature = std::array{0.0f, 0.7f, 1.0f}[static_cast<std::size_t>(uniform(0, 2))];
    r.sampling.top_p = uniform(0, 1) ? 1.0f : 0.9f;
    r.priority = uniform(0, 3);
    r.user = "tenant-" + std::to_string(uniform(0, 2));
    if (uniform(0, 9) == 0) r.deadline_ms = 60'000.0;
    plan[static_cast<std::size_t>(i)].arrival_batch = i / 50;
    plan[static_cast<std::size_t>(i)].cancel = uniform(0, 19) == 0;
  }
  return plan;
}

// Runs every choice of every request alone on the reference runner.
void compute_references(std::vector<planned_request>& plan) {
  checkpoint_options options;
  options.show_progress = false;
  const checkpoint ckpt = checkpoint::open(testing::tiny_model_dir(), options);
  testing::solo_reference reference(ckpt);
  for (auto& planned : plan) {
    const generation_request& r = planned.request;
    for (int c = 0; c < r.n; ++c) {
      runner_request alone;
      alone.prompt = r.prompt_token_ids;
      alone.params = r.sampling;
      alone.seed = choice_seed(*r.seed, c);
      alone.max_tokens = r.max_tokens;
      planned.expected.push_back(reference.generate(alone));
    }
  }
}

const std::vector<planned_request>& workload() {
  static const std::vector<planned_request> plan = [] {
    auto p = make_workload(640);
    compute_references(p);
    return p;
  }();
  return plan;
}

class DeterminismStress : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(DeterminismStress, EveryRequestMatchesItsRunAlone) {
  const auto& plan = workload();
  engine_config config = testing::tiny_engine_config();
  config.policy = std::get<0>(GetParam());
  config.preemption_mode = std::get<1>(GetParam());
  config.batch_invariant = true;
  config.kv_cache_bytes = 40 * 32 * 1024;  // 40 blocks of 16 tokens: far less than the load needs
  config.swap_space_bytes = 200 * 32 * 1024;
  config.max_num_seqs = 24;
  config.max_num_batched_tokens = 256;
  config.max_prefill_chunk = 64;
  auto engine = engine::start(config);
  const engine_stats idle = engine->stats();

  std::vector<std::shared_ptr<testing::recording_sink>> sinks;
  int batch = 0;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    if (plan[i].arrival_batch != batch) {
      batch = plan[i].arrival_batch;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    sinks.push_back(std::make_shared<testing::recording_sink>());
    const std::string id = engine->submit(plan[i].request, sinks.back());
    if (plan[i].cancel) engine->cancel(id);
  }

  int compared = 0, rejected = 0;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    ASSERT_TRUE(sinks[i]->wait(std::chrono::seconds(120))) << "request " << i << " never ended";
    if (sinks[i]->error) {
      // Only admission may refuse (overloaded queue or an unmeetable deadline).
      EXPECT_EQ(sinks[i]->error->kind, error_kind::overloaded) << sinks[i]->error->message;
      ++rejected;
      continue;
    }
    ASSERT_EQ(sinks[i]->choices.size(), plan[i].expected.size()) << "request " << i;
    for (std::size_t c = 0; c < plan[i].expected.size(); ++c) {
      const auto& got = sinks[i]->choices[c].tokens;
      const auto& want = plan[i].expected[c];
      if (plan[i].cancel) {
        ASSERT_LE(got.size(), want.size());
        EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin())) << "cancelled request " << i << " choice " << c;
      } else {
        EXPECT_EQ(got, want) << "request " << i << " choice " << c;
        ++compared;
      }
    }
  }
  // About 1.6 choices per request, 5% of them cancelled; admission refuses a few.
  EXPECT_GT(compared, num_requests() * 6 / 5);
  EXPECT_LT(rejected, num_requests() / 20);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  engine_stats end = engine->stats();
  while ((end.kv_blocks_free != idle.kv_blocks_free || end.host_kv_cache_usage > 0) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    end = engine->stats();
  }
  EXPECT_EQ(end.kv_blocks_free, idle.kv_blocks_free);
  EXPECT_EQ(end.host_kv_cache_usage, 0.0);
  std::uint64_t preemptions = 0;
  for (const auto& [kind, count] : end.preemptions) preemptions += count;
  EXPECT_GT(preemptions, 0u) << "the pool was meant to force preemption";
  EXPECT_TRUE(end.healthy);
}

INSTANTIATE_TEST_SUITE_P(PoliciesAndModes, DeterminismStress,
                         ::testing::Combine(::testing::Values("fcfs", "priority", "mlfq", "deadline", "fair"),
                                            ::testing::Values("swap", "recompute")),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

}  // namespace
}  // namespace troupe

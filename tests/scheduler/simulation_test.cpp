// The simulator's pure core: workload generation against the distributions'
// definitions, complete and deterministic runs for every policy and
// preemption mode, percentile summaries and the report formats.

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>

#include "actors/core/simulation.hpp"
#include "actors/core/simulation_report.hpp"

namespace troupe {
namespace {

TEST(Workload, FollowsItsDistributionsAndItsSeed) {
  workload_config config;
  config.num_requests = 5000;
  config.rate = 4.0;
  config.prompt_median = 300;
  config.prompt_sigma = 0.5;
  config.prompt_max = 100000;
  config.tenants = 2;
  config.tenant_skew = 3.0;
  config.deadline_fraction = 0.25;
  const auto requests = generate_workload(config);
  ASSERT_EQ(requests.size(), 5000u);
  EXPECT_NEAR(requests.back().arrival_s / 5000.0, 1.0 / 4.0, 0.025) << "Poisson gaps average 1/rate";
  std::vector<double> prompts;
  int tenant0 = 0, deadlines = 0;
  for (const auto& r : requests) {
    prompts.push_back(static_cast<double>(r.spec.prompt.size()));
    tenant0 += r.tenant == 0;
    deadlines += r.spec.deadline_s.has_value();
    EXPECT_TRUE(r.spec.ignore_eos);
  }
  std::nth_element(prompts.begin(), prompts.begin() + 2500, prompts.end());
  EXPECT_NEAR(prompts[2500], 300, 15) << "the log-normal's median is exp(mu)";
  EXPECT_NEAR(tenant0 / 5000.0, 0.75, 0.02) << "weights 1 and 1/3";
  EXPECT_NEAR(deadlines / 5000.0, 0.25, 0.02);
  EXPECT_TRUE(std::is_sorted(requests.begin(), requests.end(),
                             [](const auto& a, const auto& b) { return a.arrival_s < b.arrival_s; }));
  const auto again = generate_workload(config);
  EXPECT_EQ(again[4321].spec.prompt, requests[4321].spec.prompt);
  config.seed = 2;
  EXPECT_NE(generate_workload(config)[0].spec.prompt, requests[0].spec.prompt);
}

TEST(Workload, BurstyGapsVaryMoreThanPoissonGaps) {
  workload_config config;
  config.num_requests = 4000;
  const auto squared_cv = [&](const char* arrival) {
    config.arrival = arrival;
    const auto requests = generate_workload(config);
    std::vector<double> gaps;
    for (std::size_t i = 1; i < requests.size(); ++i) gaps.push_back(requests[i].arrival_s - requests[i - 1].arrival_s);
    double mean = 0, var = 0;
    for (double g : gaps) mean += g / static_cast<double>(gaps.size());
    for (double g : gaps) var += (g - mean) * (g - mean) / static_cast<double>(gaps.size());
    return var / (mean * mean);
  };
  EXPECT_NEAR(squared_cv("poisson"), 1.0, 0.15);
  EXPECT_NEAR(squared_cv("bursty"), config.burstiness, 0.25 * config.burstiness);
}

TEST(Workload, BadSettingsAreNamed) {
  workload_config config;
  config.arrival = "uniform";
  EXPECT_NE(validate_workload(config).find("arrival"), std::string::npos);
  config = {};
  config.tenants = 0;
  EXPECT_NE(validate_workload(config).find("tenants"), std::string::npos);
  EXPECT_EQ(validate_workload(workload_config{}), "");
}

TEST(Summarize, UsesNearestRankPercentiles) {
  std::vector<double> values;
  for (int i = 100; i >= 1; --i) values.push_back(i);
  const latency_summary s = summarize(values);
  EXPECT_EQ(s.p50, 50);
  EXPECT_EQ(s.p90, 90);
  EXPECT_EQ(s.p99, 99);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_EQ(s.count, 100u);
  EXPECT_EQ(summarize({}).count, 0u);
}

simulation_config small_simulation(const std::string& policy, preemption_mode mode) {
  simulation_config config;
  config.policy = policy;
  config.scheduler.max_num_batched_tokens = 256;
  config.scheduler.max_num_seqs = 16;
  config.scheduler.max_prefill_chunk = 128;
  config.scheduler.num_device_blocks = 96;
  config.scheduler.num_host_blocks = 64;
  config.scheduler.max_model_len = 2048;
  config.scheduler.preemption = mode;
  return config;
}

workload_config small_workload() {
  workload_config w;
  w.num_requests = 80;
  w.rate = 40;
  w.prompt_median = 60;
  w.prompt_max = 400;
  w.output_median = 30;
  w.output_max = 200;
  return w;
}

TEST(Simulation, EveryPolicyAndModeServesEveryRequest) {
  const auto workload = generate_workload(small_workload());
  for (const char* policy : {"fcfs", "priority", "mlfq", "deadline", "fair"}) {
    for (preemption_mode mode : {preemption_mode::swap, preemption_mode::recompute}) {
      const simulation_result r = run_simulation(small_simulation(policy, mode), workload, 2);
      EXPECT_EQ(r.completed + r.rejected, 80) << policy;
      for (std::size_t i = 0; i < workload.size(); ++i) {
        const request_outcome& o = r.requests[i];
        if (o.rejected) continue;
        EXPECT_EQ(o.output_tokens, workload[i].spec.max_tokens) << policy << " request " << i;
        EXPECT_GE(o.first_token_s, o.arrival_s);
        EXPECT_GE(o.finish_s, o.first_token_s);
      }
      EXPECT_LE(r.ttft_s.p50, r.ttft_s.p90);
      EXPECT_LE(r.jct_s.p90, r.jct_s.p99);
      EXPECT_GT(r.preemptions_swap + r.preemptions_recompute, 0u) << policy << ": the pool is meant to be tight";
      if (mode == preemption_mode::recompute) {
        EXPECT_EQ(r.preemptions_swap, 0u);
      }
      EXPECT_NEAR(r.tenant_share_overall[0] + r.tenant_share_overall[1], 1.0, 1e-9);
    }
  }
}

TEST(Simulation, IsDeterministicAndReportsRoundTrip) {
  const auto workload = generate_workload(small_workload());
  const simulation_config config = small_simulation("mlfq", preemption_mode::automatic);
  const std::vector<simulation_result> first{run_simulation(config, workload, 2)};
  const std::vector<simulation_result> second{run_simulation(config, workload, 2)};
  EXPECT_EQ(simulation_json(first), simulation_json(second));
  const boost::json::value parsed = boost::json::parse(simulation_json(first));
  const auto& run = parsed.at("runs").at(0);
  EXPECT_EQ(run.at("policy").as_string(), "mlfq");
  EXPECT_EQ(run.at("preemption").as_string(), "auto");
  EXPECT_EQ(run.at("requests").as_array().size(), 80u);
  EXPECT_NEAR(run.at("jct_s").at("p50").to_number<double>(), first[0].jct_s.p50, 1e-6);
  const std::string csv = simulation_csv(first);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 2);
  EXPECT_EQ(csv.rfind("policy,preemption,", 0), 0u);
  EXPECT_NE(format_simulation_table(first).find("mlfq"), std::string::npos);
  EXPECT_THROW(run_simulation(small_simulation("lottery", preemption_mode::swap), workload, 2), std::invalid_argument);
}

}  // namespace
}  // namespace troupe

// `troupe simulate`: the real scheduler and block manager against a cost
// model of step time on a generated workload, for every requested policy and
// preemption mode. Prints TTFT / TPOT / JCT percentiles, deadline misses and
// tenant shares; optionally writes CSV and JSON (tools/bench/plot_simulation.py).

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "actors/core/scheduler.hpp"
#include "actors/core/simulation.hpp"
#include "actors/core/simulation_report.hpp"
#include "tools/cli/command_registry.hpp"

namespace troupe::cli {

namespace {

struct simulate_options {
  workload_config workload;
  scheduler_config scheduler;
  step_cost_model cost;
  std::string policy_list = "fcfs,priority,mlfq,deadline,fair";
  std::string preemption_list = "swap,recompute";
  std::string csv_path;
  std::string json_path;
};

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> items;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out || !(out << text)) throw std::runtime_error("simulate: cannot write " + path);
}

void run_simulate(simulate_options options) {
  if (auto problem = validate_workload(options.workload); !problem.empty())
    throw std::runtime_error("simulate: " + problem);
  if (auto problem = scheduler::validate_config(options.scheduler); !problem.empty())
    throw std::runtime_error("simulate: " + problem);
  const std::vector<std::string> policies = split(options.policy_list);
  const std::vector<std::string> modes = split(options.preemption_list);
  if (policies.empty() || modes.empty()) throw std::runtime_error("simulate: --policies and --preemption need names");
  for (const std::string& p : policies) {
    if (!make_policy(p)) throw std::runtime_error("simulate: unknown policy '" + p + "' in --policies");
  }
  const std::vector<generated_request> workload = generate_workload(options.workload);
  std::vector<simulation_result> results;
  for (const std::string& p : policies) {
    for (const std::string& m : modes) {
      const auto mode = parse_preemption_mode(m);
      if (!mode) throw std::runtime_error("simulate: unknown preemption mode '" + m + "' in --preemption");
      simulation_config config;
      config.policy = p;
      config.scheduler = options.scheduler;
      config.scheduler.preemption = *mode;
      config.cost = options.cost;
      results.push_back(run_simulation(config, workload, options.workload.tenants));
    }
  }
  std::fputs(format_simulation_table(results).c_str(), stdout);
  if (!options.csv_path.empty()) write_file(options.csv_path, simulation_csv(results));
  if (!options.json_path.empty()) write_file(options.json_path, simulation_json(results));
}

void add_workload_options(CLI::App& cmd, workload_config& w) {
  cmd.add_option("--requests", w.num_requests, "Requests to generate")->capture_default_str();
  cmd.add_option("--arrival", w.arrival, "Arrival process: poisson or bursty")->capture_default_str();
  cmd.add_option("--rate", w.rate, "Mean arrivals per second")->capture_default_str();
  cmd.add_option("--burstiness", w.burstiness, "Bursty: squared CV of the gaps")->capture_default_str();
  cmd.add_option("--prompt-median", w.prompt_median, "Median prompt length (log-normal)")->capture_default_str();
  cmd.add_option("--prompt-sigma", w.prompt_sigma, "Sigma of log prompt length")->capture_default_str();
  cmd.add_option("--prompt-max", w.prompt_max, "Longest prompt")->capture_default_str();
  cmd.add_option("--output-median", w.output_median, "Median output length (log-normal)")->capture_default_str();
  cmd.add_option("--output-sigma", w.output_sigma, "Sigma of log output length")->capture_default_str();
  cmd.add_option("--output-max", w.output_max, "Longest output")->capture_default_str();
  cmd.add_option("--priorities", w.priorities, "Priority levels (uniform)")->capture_default_str();
  cmd.add_option("--deadline-fraction", w.deadline_fraction, "Share of requests with a deadline")
      ->capture_default_str();
  cmd.add_option("--deadline-slack", w.deadline_slack, "Deadline as a multiple of the service time alone")
      ->capture_default_str();
  cmd.add_option("--tenants", w.tenants, "Tenants (users t0, t1, ...)")->capture_default_str();
  cmd.add_option("--tenant-skew", w.tenant_skew, "Tenant i sends skew^-i as many requests as t0")
      ->capture_default_str();
  cmd.add_option("--seed", w.seed, "Workload seed")->capture_default_str();
}

void add_engine_options(CLI::App& cmd, simulate_options& o) {
  scheduler_config& s = o.scheduler;
  cmd.add_option("--max-num-batched-tokens", s.max_num_batched_tokens, "Token budget per step")->capture_default_str();
  cmd.add_option("--max-num-seqs", s.max_num_seqs, "Running sequences at most")->capture_default_str();
  cmd.add_option("--max-prefill-chunk", s.max_prefill_chunk, "Prompt tokens per sequence per step")
      ->capture_default_str();
  cmd.add_option("--block-size", s.block_size, "KV tokens per block")->capture_default_str();
  cmd.add_option("--kv-blocks", s.num_device_blocks, "Device KV blocks")->capture_default_str();
  cmd.add_option("--host-blocks", s.num_host_blocks, "Host swap blocks")->capture_default_str();
  cmd.add_option("--max-model-len", s.max_model_len, "Context length")->capture_default_str();
  cmd.add_option("--swap-min-tokens", s.swap_min_tokens, "auto preemption: recompute below this length")
      ->capture_default_str();
  cmd.add_option("--policies", o.policy_list, "Policies to compare (comma separated)")->capture_default_str();
  cmd.add_option("--preemption", o.preemption_list, "Preemption modes: swap,recompute,auto")->capture_default_str();
  cmd.add_option("--cost-base", o.cost.base_s, "Step time: seconds per step")->capture_default_str();
  cmd.add_option("--cost-token", o.cost.per_token_s, "Step time: seconds per computed token")->capture_default_str();
  cmd.add_option("--cost-context", o.cost.per_context_token_s, "Step time: seconds per context token")
      ->capture_default_str();
  cmd.add_option("--mlfq-quantum", o.scheduler.policies.mlfq_base_quantum, "mlfq: level-0 quantum in decode steps")
      ->capture_default_str();
  cmd.add_option("--mlfq-promote-after", o.scheduler.policies.mlfq_promote_after_s,
                 "mlfq: seconds unserved before promotion")
      ->capture_default_str();
  cmd.add_option("--csv", o.csv_path, "Write the summary as CSV to this file");
  cmd.add_option("--json", o.json_path, "Write summaries and per-request outcomes as JSON to this file");
}

void setup(CLI::App& root) {
  CLI::App* cmd = root.add_subcommand(
      "simulate",
      "Compare scheduling policies: the real scheduler and KV manager on a generated workload, timed by a "
      "cost model (a + b*tokens + c*context per step)");
  auto options = std::make_shared<simulate_options>();
  options->scheduler.max_num_seqs = 128;
  options->scheduler.num_device_blocks = 1024;
  options->scheduler.num_host_blocks = 2048;
  options->scheduler.max_model_len = 8192;
  add_workload_options(*cmd, options->workload);
  add_engine_options(*cmd, *options);
  cmd->callback([options] { run_simulate(*options); });
}

const bool registered = register_command("simulate", setup);

}  // namespace

}  // namespace troupe::cli

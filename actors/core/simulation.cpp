#include "actors/core/simulation.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

#include "actors/core/scheduler.hpp"
#include "memory/block_manager.hpp"

namespace troupe {

latency_summary summarize(std::vector<double> values) {
  latency_summary s;
  s.count = values.size();
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  const auto rank = [&](double q) {
    const auto index = static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size()))) - 1;
    return values[std::min(index, values.size() - 1)];
  };
  s.p50 = rank(0.50);
  s.p90 = rank(0.90);
  s.p99 = rank(0.99);
  double sum = 0;
  for (double v : values) sum += v;
  s.mean = sum / static_cast<double>(values.size());
  return s;
}

namespace {

/// The simulation loop's state.
class simulation_run {
 public:
  simulation_run(const simulation_config& config, const std::vector<generated_request>& workload, int tenants)
      : config_(config),
        workload_(workload),
        kv_(kv_manager_config(config.scheduler)),
        sched_(config.scheduler, make_policy(config.policy)),
        queued_(static_cast<std::size_t>(tenants)),
        served_(static_cast<std::size_t>(tenants), 0.0),
        contended_(static_cast<std::size_t>(tenants), 0.0) {
    result_.policy = config.policy;
    result_.preemption = preemption_mode_name(config.scheduler.preemption);
    result_.requests.resize(workload.size());
  }

  simulation_result run() {
    double step_estimate = config_.cost.base_s;
    while (next_ < workload_.size() || sched_.has_unfinished_requests() || sched_.has_pending_kv_updates()) {
      if (!sched_.has_unfinished_requests() && !sched_.has_pending_kv_updates() && next_ < workload_.size())
        now_ = std::max(now_, workload_[next_].arrival_s);  // idle: jump to the next arrival
      admit_arrivals();
      sched_.set_step_time_estimate(step_estimate);
      const scheduled_step step = sched_.schedule(now_, kv_);
      const double dt = account(step);
      step_estimate = 0.9 * step_estimate + 0.1 * dt;
      now_ += dt;
      if (!step.sequences.empty()) apply(sched_.on_step_result(fake_samples(step), now_));
    }
    return finish();
  }

 private:
  void admit_arrivals() {
    for (; next_ < workload_.size() && workload_[next_].arrival_s <= now_; ++next_) {
      const generated_request& g = workload_[next_];
      request_outcome& out = result_.requests[next_];
      out.tenant = g.tenant;
      out.priority = g.spec.priority;
      out.prompt_tokens = static_cast<int>(g.spec.prompt.size());
      out.arrival_s = g.arrival_s;
      if (g.spec.deadline_s) out.deadline_s = g.arrival_s + *g.spec.deadline_s;
      const submit_result r = sched_.submit(g.spec, g.arrival_s);
      if (!r.accepted) {
        out.rejected = true;
        continue;
      }
      index_of_[r.handle] = next_;
      queued_[static_cast<std::size_t>(g.tenant)].insert(r.handle);
    }
  }

  /// Step time for `step`; counts tokens per tenant.
  double account(const scheduled_step& step) {
    if (step.sequences.empty())
      return step.copies.empty() && !sched_.has_unfinished_requests() ? 0.0 : config_.cost.base_s;
    const bool contended = std::all_of(queued_.begin(), queued_.end(), [](const auto& q) { return !q.empty(); });
    std::int64_t context = 0;
    for (const scheduled_sequence& s : step.sequences) {
      const auto tokens = static_cast<std::int64_t>(s.tokens.size());
      context += s.start + tokens;
      const int tenant = workload_[index_of_.at(s.request)].tenant;
      served_[static_cast<std::size_t>(tenant)] += static_cast<double>(tokens);
      if (contended) contended_[static_cast<std::size_t>(tenant)] += static_cast<double>(tokens);
      queued_[static_cast<std::size_t>(tenant)].erase(s.request);
    }
    ++result_.steps;
    total_tokens_ += step.num_tokens();
    return config_.cost.step_time(step.num_tokens(), context);
  }

  static step_result fake_samples(const scheduled_step& step) {
    step_result result;
    result.step = step.id;
    for (const logits_row_hook& row : step.rows) {
      sample_output sample;
      sample.token = 100 + static_cast<std::int32_t>(row.token_index % 1000);
      result.samples.push_back(sample);
    }
    return result;
  }

  void apply(const scheduler_events& events) {
    for (const token_event& t : events.tokens) {
      request_outcome& out = result_.requests[index_of_.at(t.request)];
      if (out.first_token_s < 0) out.first_token_s = now_;
      ++out.output_tokens;
    }
    for (const finish_event& f : events.finished) {
      if (f.request_done) result_.requests[index_of_.at(f.request)].finish_s = now_;
    }
  }

  simulation_result finish();

  const simulation_config& config_;
  const std::vector<generated_request>& workload_;
  block_manager kv_;
  scheduler sched_;
  simulation_result result_;
  std::map<request_handle, std::size_t> index_of_;
  std::vector<std::set<request_handle>> queued_;
  std::vector<double> served_, contended_;
  std::size_t next_ = 0;
  double now_ = 0;
  std::int64_t total_tokens_ = 0;
};

std::vector<double> shares(const std::vector<double>& tokens) {
  double total = 0;
  for (double t : tokens) total += t;
  std::vector<double> out;
  for (double t : tokens) out.push_back(total > 0 ? t / total : 0.0);
  return out;
}

simulation_result simulation_run::finish() {
  std::vector<double> ttft, tpot, jct;
  for (const request_outcome& r : result_.requests) {
    result_.deadline_requests += r.deadline_s.has_value();
    if (r.rejected) {
      ++result_.rejected;
      result_.deadline_rejected += r.deadline_s.has_value();
      continue;
    }
    ++result_.completed;
    ttft.push_back(r.first_token_s - r.arrival_s);
    jct.push_back(r.finish_s - r.arrival_s);
    if (r.output_tokens > 1) tpot.push_back((r.finish_s - r.first_token_s) / (r.output_tokens - 1));
    if (r.deadline_s && r.finish_s > *r.deadline_s) ++result_.deadline_missed;
  }
  result_.ttft_s = summarize(std::move(ttft));
  result_.tpot_s = summarize(std::move(tpot));
  result_.jct_s = summarize(std::move(jct));
  result_.tenant_share = shares(contended_);
  result_.tenant_share_overall = shares(served_);
  const auto& preemptions = sched_.metrics().preemptions;
  if (auto it = preemptions.find("swap"); it != preemptions.end()) result_.preemptions_swap = it->second;
  if (auto it = preemptions.find("recompute"); it != preemptions.end()) result_.preemptions_recompute = it->second;
  result_.makespan_s = now_;
  result_.mean_step_tokens = result_.steps > 0 ? static_cast<double>(total_tokens_) / result_.steps : 0.0;
  result_.prefix_hit_tokens = kv_.usage().prefix_hit_tokens;
  return std::move(result_);
}

}  // namespace

simulation_result run_simulation(const simulation_config& config, const std::vector<generated_request>& workload,
                                 int tenants) {
  if (!make_policy(config.policy)) throw std::invalid_argument("unknown policy: " + config.policy);
  if (tenants < 1) throw std::invalid_argument("tenants must be at least 1");
  for (const generated_request& g : workload) {
    if (g.tenant < 0 || g.tenant >= tenants) throw std::invalid_argument("a request names a tenant out of range");
  }
  simulation_run run(config, workload, tenants);
  return run.run();
}

}  // namespace troupe

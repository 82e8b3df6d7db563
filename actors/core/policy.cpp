#include "actors/core/policy.hpp"

namespace troupe {

bool scheduling_policy::may_preempt(const request_state&, const request_state&) const { return false; }

std::string scheduling_policy::admission_problem(const request_state&, const admission_context&) const { return {}; }

void scheduling_policy::on_attach(request_state&, double) {}

void scheduling_policy::on_detach(const request_state&) {}

void scheduling_policy::on_step_begin(double, std::span<request_state* const>) {}

bool scheduling_policy::on_scheduled(request_state&, std::int64_t, double) { return false; }

void scheduling_policy::on_served(request_state&, std::int64_t, double) {}

bool serve_before(const scheduling_policy& policy, const request_state& a, const request_state& b) {
  const double ka = policy.sort_key(a), kb = policy.sort_key(b);
  if (ka != kb) return ka < kb;
  return a.arrival_order < b.arrival_order;
}

double fcfs_policy::sort_key(const request_state& request) const { return request.arrival; }

double priority_policy::sort_key(const request_state& request) const { return request.spec.priority; }

bool priority_policy::may_preempt(const request_state& candidate, const request_state& victim) const {
  return candidate.spec.priority < victim.spec.priority;
}

std::unique_ptr<scheduling_policy> make_policy(std::string_view name, const policy_config& config) {
  if (name == "fcfs") return std::make_unique<fcfs_policy>();
  if (name == "priority") return std::make_unique<priority_policy>();
  if (name == "mlfq") return std::make_unique<mlfq_policy>(config);
  if (name == "deadline") return std::make_unique<deadline_policy>();
  if (name == "fair") return std::make_unique<fair_policy>(config);
  return nullptr;
}

}  // namespace troupe

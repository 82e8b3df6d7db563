#include <algorithm>

#include "actors/core/policy.hpp"

namespace troupe {

double fair_policy::counter(const std::string& user) const {
  const auto it = tenants_.find(user);
  return it == tenants_.end() ? 0.0 : it->second.counter;
}

double fair_policy::sort_key(const request_state& request) const { return counter(request.spec.user); }

void fair_policy::set_counter(tenant_map::iterator it, double value) {
  tenant& t = it->second;
  if (!t.queued.empty()) {
    backlog_.erase({t.counter, &it->first});
    backlog_.insert({value, &it->first});
  }
  t.counter = value;
  greatest_counter_ = std::max(greatest_counter_, value);
}

void fair_policy::leave_queue(tenant_map::iterator it, request_handle handle) {
  tenant& t = it->second;
  if (t.queued.erase(handle) != 0 && t.queued.empty()) backlog_.erase({t.counter, &it->first});
}

void fair_policy::trim_idle() {
  while (idle_.size() > config_.fair_idle_tenants) {
    tenants_.erase(tenants_.find(*idle_.back()));
    idle_.pop_back();
  }
}

void fair_policy::on_attach(request_state& request, double) {
  const auto [it, inserted] = tenants_.try_emplace(request.spec.user);
  tenant& t = it->second;
  if (t.live++ == 0 && !inserted) idle_.erase(t.idle_entry);
  if (request.queued()) {
    if (t.queued.empty()) {
      const double lift = backlog_.empty() ? greatest_counter_ : backlog_.begin()->first;
      set_counter(it, std::max(t.counter, lift));
      backlog_.insert({t.counter, &it->first});
    }
    t.queued.insert(request.handle);
  }
  trim_idle();
}

// The tenant stays (idle) for now: the step that finished the request may
// still report its last tokens through on_served.
void fair_policy::on_detach(const request_state& request) {
  const auto it = tenants_.find(request.spec.user);
  if (it == tenants_.end()) return;
  leave_queue(it, request.handle);
  if (--it->second.live > 0) return;
  idle_.push_front(&it->first);
  it->second.idle_entry = idle_.begin();
}

void fair_policy::on_step_begin(double, std::span<request_state* const>) { trim_idle(); }

// Prompt tokens count when scheduled, so admissions within one step already
// alternate between tenants; generated tokens count when they exist.
bool fair_policy::on_scheduled(request_state& request, std::int64_t prompt_tokens, double) {
  const auto it = tenants_.find(request.spec.user);
  if (it == tenants_.end()) return false;
  leave_queue(it, request.handle);
  if (prompt_tokens <= 0) return false;
  set_counter(it, it->second.counter + config_.fair_prompt_weight * static_cast<double>(prompt_tokens));
  return true;
}

void fair_policy::on_served(request_state& request, std::int64_t generated_tokens, double) {
  const auto it = tenants_.find(request.spec.user);
  if (it == tenants_.end()) return;
  set_counter(it, it->second.counter + config_.fair_output_weight * static_cast<double>(generated_tokens));
}

}  // namespace troupe

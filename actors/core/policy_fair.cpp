#include <algorithm>
#include <cmath>
#include <limits>

#include "actors/core/policy.hpp"

namespace troupe {

double fair_policy::counter(const std::string& user) const {
  const auto it = tenants_.find(user);
  return it == tenants_.end() ? 0.0 : it->second.counter;
}

double fair_policy::sort_key(const request_state& request) const { return counter(request.spec.user); }

void fair_policy::on_attach(request_state& request, double) {
  tenant& t = tenants_[request.spec.user];
  if (!request.queued()) return;
  if (t.queued.empty()) {
    double least_backlogged = std::numeric_limits<double>::infinity(), greatest = 0;
    for (const auto& [name, other] : tenants_) {
      greatest = std::max(greatest, other.counter);
      if (!other.queued.empty()) least_backlogged = std::min(least_backlogged, other.counter);
    }
    t.counter = std::max(t.counter, std::isfinite(least_backlogged) ? least_backlogged : greatest);
  }
  t.queued.insert(request.handle);
}

void fair_policy::on_detach(const request_state& request) {
  const auto it = tenants_.find(request.spec.user);
  if (it != tenants_.end()) it->second.queued.erase(request.handle);
}

// Prompt tokens count when scheduled, so admissions within one step already
// alternate between tenants; generated tokens count when they exist.
bool fair_policy::on_scheduled(request_state& request, std::int64_t prompt_tokens, double) {
  tenant& t = tenants_[request.spec.user];
  t.queued.erase(request.handle);
  if (prompt_tokens <= 0) return false;
  t.counter += config_.fair_prompt_weight * static_cast<double>(prompt_tokens);
  return true;
}

void fair_policy::on_served(request_state& request, std::int64_t generated_tokens, double) {
  tenants_[request.spec.user].counter += config_.fair_output_weight * static_cast<double>(generated_tokens);
}

}  // namespace troupe

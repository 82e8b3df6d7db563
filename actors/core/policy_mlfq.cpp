#include <algorithm>

#include "actors/core/policy.hpp"

namespace troupe {

int mlfq_policy::entry_level(std::int64_t prompt_tokens) const {
  std::int64_t limit = std::max(config_.mlfq_entry_prompt_tokens, 1);
  for (int level = 0; level < config_.mlfq_levels - 1; ++level) {
    if (prompt_tokens <= limit) return level;
    limit *= std::max(config_.mlfq_quantum_growth, 1);
  }
  return std::max(config_.mlfq_levels - 1, 0);
}

std::int64_t mlfq_policy::quantum(int level) const {
  std::int64_t q = std::max(config_.mlfq_base_quantum, 1);
  for (int i = 0; i < level; ++i) q *= std::max(config_.mlfq_quantum_growth, 1);
  return q;
}

double mlfq_policy::sort_key(const request_state& request) const { return request.mlfq_level; }

bool mlfq_policy::may_preempt(const request_state& candidate, const request_state& victim) const {
  return candidate.mlfq_level < victim.mlfq_level;
}

void mlfq_policy::on_attach(request_state& request, double now) {
  request.mlfq_level = entry_level(static_cast<std::int64_t>(request.spec.prompt.size()));
  request.mlfq_level_service = 0;
  request.last_served = now;
}

void mlfq_policy::on_step_begin(double now, std::span<request_state* const> requests) {
  for (request_state* request : requests) {
    if (request->mlfq_level > 0 && now - request->last_served >= config_.mlfq_promote_after_s) {
      request->mlfq_level = 0;  // starvation guard
      request->mlfq_level_service = 0;
      request->last_served = now;
    }
  }
}

bool mlfq_policy::on_scheduled(request_state& request, std::int64_t, double now) {
  request.last_served = now;
  return false;
}

void mlfq_policy::on_served(request_state& request, std::int64_t generated_tokens, double now) {
  request.last_served = now;
  if (generated_tokens <= 0) return;
  // Service is counted in decode iterations, so n parallel choices do not
  // use up the quantum n times faster.
  if (++request.mlfq_level_service >= quantum(request.mlfq_level) && request.mlfq_level < config_.mlfq_levels - 1) {
    ++request.mlfq_level;
    request.mlfq_level_service = 0;
  }
}

}  // namespace troupe

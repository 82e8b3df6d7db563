#include <cmath>
#include <sstream>

#include "actors/core/policy.hpp"

namespace troupe {

double deadline_policy::sort_key(const request_state& request) const { return request.absolute_deadline; }

bool deadline_policy::may_preempt(const request_state& candidate, const request_state& victim) const {
  return candidate.absolute_deadline < victim.absolute_deadline;
}

double deadline_policy::service_time_estimate(const request_state& request, const admission_context& context) {
  const auto prompt = static_cast<double>(request.spec.prompt.size());
  const double chunk = std::max(context.max_prefill_chunk, 1);
  const double outputs = request.spec.max_tokens >= 0
                             ? request.spec.max_tokens
                             : std::max(0.0, static_cast<double>(context.max_model_len) - prompt);
  return (std::ceil(prompt / chunk) + outputs) * context.step_time_s;
}

std::string deadline_policy::admission_problem(const request_state& request, const admission_context& context) const {
  if (!std::isfinite(request.absolute_deadline) || context.step_time_s <= 0) return {};
  // Queued work due no later than this request's deadline is served first.
  double tokens_ahead = 0;
  for (const request_state* other : context.queued) {
    if (other != &request && other->absolute_deadline <= request.absolute_deadline)
      tokens_ahead += static_cast<double>(other->spec.prompt.size());
  }
  const double queue_delay = tokens_ahead / std::max(context.max_num_batched_tokens, 1) * context.step_time_s;
  const double finish = context.now + queue_delay + service_time_estimate(request, context);
  if (finish <= request.absolute_deadline) return {};
  std::ostringstream why;
  why << "the deadline cannot be met: about " << finish - context.now << " s needed, "
      << request.absolute_deadline - context.now << " s left";
  return why.str();
}

}  // namespace troupe

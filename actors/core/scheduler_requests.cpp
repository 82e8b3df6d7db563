// The scheduler core's view of its requests for the operator: the request
// table and priority changes.

#include "actors/core/scheduler.hpp"

namespace troupe {

namespace {

// The furthest a request has come: a resident choice says more than a swapped one.
std::string state_of(const request_state& request) {
  if (request.done() || request.cancelled) return "finishing";
  bool running = false;
  bool prefilling = false;
  bool swapped = false;
  for (const auto& seq : request.choices) {
    if (seq->status == sequence_status::running) {
      running = true;
      prefilling = prefilling || seq->num_computed < static_cast<std::int32_t>(request.spec.prompt.size());
    }
    swapped = swapped || seq->status == sequence_status::swapped;
  }
  if (running) return prefilling ? "prefilling" : "decoding";
  if (swapped) return "swapped";
  return request.queued() ? "queued" : "preempted";
}

request_info info_of(const request_state& request, double now) {
  request_info info;
  info.id = request.spec.request_id;
  info.state = state_of(request);
  info.priority = request.spec.priority;
  info.user = request.spec.user;
  info.deadline_s = request.spec.deadline_s;
  info.mlfq_level = request.mlfq_level;
  info.n = request.spec.n;
  info.prompt_tokens = static_cast<std::int64_t>(request.spec.prompt.size());
  for (const auto& seq : request.choices) {
    info.generated_tokens += static_cast<std::int64_t>(seq->outputs.size());
    info.device_blocks += static_cast<std::int64_t>(seq->block_table.size());
    info.host_blocks += seq->host_blocks;
  }
  info.age_s = now - request.arrival;
  if (request.first_token >= 0) info.ttft_s = request.first_token - request.arrival;
  return info;
}

}  // namespace

std::vector<request_info> scheduler::request_table(double now) const {
  std::vector<request_info> table;
  table.reserve(requests_.size());
  for (const auto& [handle, request] : requests_) {
    if (!request->done()) table.push_back(info_of(*request, now));
  }
  return table;
}

bool scheduler::set_priority(request_handle handle, int priority) {
  const auto it = requests_.find(handle);
  if (it == requests_.end() || it->second->done()) return false;
  it->second->spec.priority = priority;
  refresh_key(*it->second);
  return true;
}

}  // namespace troupe

#include "actors/core/prepare_queue.hpp"

#include <algorithm>
#include <string>

namespace troupe {

prepare_limits::prepare_limits() : prepare_limits(engine_config{}) {}

prepare_limits::prepare_limits(const engine_config& engine)
    : max_pending(engine.max_pending_prompts),
      max_pending_per_origin(engine.max_pending_prompts_per_connection),
      max_waiting(engine.max_waiting_requests) {}

std::optional<prepare_refusal> prepare_queue::refusal(std::uint64_t origin, int scheduler_queued) const {
  const auto pending = static_cast<std::int64_t>(jobs_.size());
  if (origin != 0 && pending_of(origin) >= limits_.max_pending_per_origin) return prepare_refusal::origin_full;
  if (pending >= limits_.max_pending) return prepare_refusal::pending_full;
  if (pending + std::max(0, scheduler_queued) >= limits_.max_waiting) return prepare_refusal::waiting_full;
  return std::nullopt;
}

error_event refusal_error(const std::string& id, prepare_refusal refusal, const prepare_limits& limits) {
  switch (refusal) {
    case prepare_refusal::origin_full:
      return {id, error_kind::overloaded,
              "too many prompts awaiting preparation on this connection (at most " +
                  std::to_string(limits.max_pending_per_origin) + ", max_pending_prompts_per_connection)",
              "", "connection_prompt_limit"};
    case prepare_refusal::pending_full:
      return {id, error_kind::overloaded,
              "too many prompts awaiting preparation (at most " + std::to_string(limits.max_pending) +
                  ", max_pending_prompts)",
              "", "prompt_queue_full"};
    case prepare_refusal::waiting_full:
      break;
  }
  return {id, error_kind::overloaded,
          "the waiting queue is full (" + std::to_string(limits.max_waiting) +
              " requests, prompts awaiting preparation included)",
          "", ""};
}

prepare_push prepare_queue::push(const std::string& id, std::uint64_t origin, int scheduler_queued, double deadline_s) {
  prepare_push out;
  out.refusal = refusal(origin, scheduler_queued);
  if (out.refusal) return out;
  out.ticket = next_ticket_++;
  jobs_.emplace(out.ticket, job{id, origin, deadline_s, false, false});
  queues_[origin].push_back(out.ticket);
  if (deadline_s != std::numeric_limits<double>::infinity()) deadlines_.emplace(deadline_s, out.ticket);
  if (!id.empty()) by_id_.emplace(id, out.ticket);
  ++per_origin_[origin];
  ++queued_;
  return out;
}

std::optional<prepare_ticket> prepare_queue::pop() {
  if (queues_.empty()) return std::nullopt;
  auto next = last_origin_ ? queues_.upper_bound(*last_origin_) : queues_.begin();
  if (next == queues_.end()) next = queues_.begin();  // wrap around: every origin had its turn
  const prepare_ticket ticket = next->second.front();
  next->second.pop_front();
  last_origin_ = next->first;
  if (next->second.empty()) queues_.erase(next);
  job& entry = jobs_.at(ticket);
  entry.running = true;
  deadlines_.erase({entry.deadline_s, ticket});
  --queued_;
  return ticket;
}

bool prepare_queue::finish(prepare_ticket ticket) {
  const auto it = jobs_.find(ticket);
  if (it == jobs_.end()) return false;
  const bool cancelled = it->second.cancelled;
  forget(ticket);
  return cancelled;
}

prepare_cancel prepare_queue::cancel(const std::string& id) {
  prepare_cancel out;
  if (id.empty()) return out;
  std::vector<prepare_ticket> named;
  const auto [first, last] = by_id_.equal_range(id);
  for (auto it = first; it != last; ++it) named.push_back(it->second);
  for (const prepare_ticket ticket : named) {
    job& entry = jobs_.at(ticket);
    if (entry.running) {
      entry.cancelled = true;
      out.running = true;
      continue;
    }
    unqueue(ticket);
    out.removed.push_back(ticket);
  }
  return out;
}

std::vector<prepare_ticket> prepare_queue::expire(double now_s) {
  std::vector<prepare_ticket> expired;
  while (!deadlines_.empty() && deadlines_.begin()->first <= now_s) {
    const prepare_ticket ticket = deadlines_.begin()->second;
    unqueue(ticket);
    expired.push_back(ticket);
  }
  return expired;
}

std::optional<double> prepare_queue::next_deadline() const {
  if (deadlines_.empty()) return std::nullopt;
  return deadlines_.begin()->first;
}

int prepare_queue::pending_of(std::uint64_t origin) const {
  const auto it = per_origin_.find(origin);
  return it == per_origin_.end() ? 0 : it->second;
}

// Takes a queued job out of the queues and drops it.
void prepare_queue::unqueue(prepare_ticket ticket) {
  const job& entry = jobs_.at(ticket);
  const auto queue = queues_.find(entry.origin);
  queue->second.erase(std::find(queue->second.begin(), queue->second.end(), ticket));
  if (queue->second.empty()) queues_.erase(queue);
  deadlines_.erase({entry.deadline_s, ticket});
  --queued_;
  forget(ticket);
}

// Drops a job that is no longer queued from the tables (not from queues_).
void prepare_queue::forget(prepare_ticket ticket) {
  const auto it = jobs_.find(ticket);
  if (it == jobs_.end()) return;
  const job& entry = it->second;
  if (!entry.id.empty()) {
    const auto [first, last] = by_id_.equal_range(entry.id);
    for (auto named = first; named != last; ++named) {
      if (named->second != ticket) continue;
      by_id_.erase(named);
      break;
    }
  }
  if (const auto count = per_origin_.find(entry.origin); count != per_origin_.end() && --count->second == 0)
    per_origin_.erase(count);
  jobs_.erase(it);
}

}  // namespace troupe

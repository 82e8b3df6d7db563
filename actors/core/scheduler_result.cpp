// A step's samples: forks for n > 1, new tokens (the verified run of a
// speculating sequence among them), stop conditions, service accounting for
// the policy; and abandoning a step that never ran.

#include <algorithm>

#include "actors/core/draft_tree.hpp"
#include "actors/core/scheduler.hpp"
#include "actors/core/sequence_constraint.hpp"

namespace troupe {

sequence& scheduler::fork_child(sequence& parent, int choice) {
  request_state& request = *parent.request;
  sequence& child = add_sequence(request, choice);
  child.started = true;
  if (parent.resident() && parent.kv_known) {
    transition(child, &sequence::to_forked_from, parent);
    pending_forks_.push_back({parent.id, child.id});
  }  // else the parent left the device meanwhile: the child prefills from scratch
  return child;
}

std::optional<finish_reason> scheduler::stop_reason(const sequence& seq, std::int32_t token) const {
  const request_spec& spec = seq.request->spec;
  const auto produced = static_cast<std::int64_t>(seq.outputs.size());
  const auto contains = [token](const std::vector<std::int32_t>& ids) {
    return std::find(ids.begin(), ids.end(), token) != ids.end();
  };
  if (produced >= spec.min_tokens) {
    if (!spec.ignore_eos && contains(config_.eos_token_ids)) return finish_reason::stop;
    if (contains(spec.stop_token_ids)) return finish_reason::stop;
  }
  if (spec.max_tokens >= 0 && produced >= spec.max_tokens) return finish_reason::length;
  if (seq.total_tokens() >= config_.max_model_len) return finish_reason::length;
  return std::nullopt;
}

void scheduler::append_token(sequence& seq, const sample_output& sample, double now, scheduler_events& events) {
  request_state& request = *seq.request;
  seq.outputs.push_back(sample.token);
  const bool document_over = advance_matcher(seq, sample.token);
  ++request.usage.completion_tokens;
  ++metrics_.generation_tokens;
  events.tokens.push_back({request.handle, seq.choice, sample});
  if (request.first_token < 0) {
    request.first_token = now;
    metrics_.time_to_first_token_s.observe(now - request.arrival);
  } else if (seq.last_token_time >= 0) {
    metrics_.inter_token_latency_s.observe(now - seq.last_token_time);
  }
  seq.last_token_time = now;
  if (document_over) {
    finish_sequence(seq, finish_reason::stop, now, events);
  } else if (const auto reason = stop_reason(seq, sample.token)) {
    finish_sequence(seq, *reason, now, events);
  }
}

scheduler_events scheduler::on_step_result(const step_result& result, double now) {
  scheduler_events events;
  const auto it = in_flight_.find(result.step);
  if (it == in_flight_.end()) {
    events.error = "step " + std::to_string(result.step) + " is not in flight";
    return events;
  }
  if (result.samples.size() != it->second.rows.size()) {
    events.error = "step " + std::to_string(result.step) + " has " + std::to_string(it->second.rows.size()) +
                   " logits rows but the result has " + std::to_string(result.samples.size()) + " samples";
    return events;
  }
  if (std::string problem = verify_problem(it->second, result); !problem.empty()) {
    events.error = "step " + std::to_string(result.step) + ": " + problem;
    return events;
  }
  const in_flight_step record = std::move(it->second);
  in_flight_.erase(it);
  metrics_.model_execute_time_s.observe(result.execute_s);
  // Children first, so a parent that stops on its first token still forks.
  for (const in_flight_row& row : record.rows) {
    request_state& request = *row.request;
    if (row.choice == row.seq->choice) continue;
    request.forked = true;
    if (!request.cancelled && static_cast<int>(request.choices.size()) == row.choice) fork_child(*row.seq, row.choice);
  }
  settle_step(record, apply_samples(record, result, now, events));
  for (const in_flight_row& row : record.rows) {
    request_state& request = *row.request;
    if (request.generated_in_step == 0) continue;
    policy_->on_served(request, request.generated_in_step, now);
    request.generated_in_step = 0;
  }
  update_gauges();
  release_done_requests();
  return events;
}

std::vector<std::pair<sequence*, std::int32_t>> scheduler::apply_samples(const in_flight_step& record,
                                                                         const step_result& result, double now,
                                                                         scheduler_events& events) {
  std::vector<std::pair<sequence*, std::int32_t>> verified;  // each verify group's sequence and accepted drafts
  std::int32_t accepted = 0;
  for (std::size_t i = 0; i < record.rows.size(); ++i) {
    const in_flight_row& row = record.rows[i];
    request_state& request = *row.request;
    --request.rows_in_flight;
    --row.seq->pending_rows;
    if (i + 1 < record.rows.size() && record.rows[i + 1].draft_position == 1) {  // a verify group starts
      accepted = result.accepted[verified.size()];
      // The accepted path's tokens are the group's first rows; a tree's off the first chain are recomputed.
      std::vector<std::int32_t> path;
      for (std::int32_t r = 0; r < accepted; ++r) path.push_back(result.samples[i + static_cast<std::size_t>(r)].token);
      verified.emplace_back(row.seq, drafts_in_place(row.seq->drafts_fed, path));
      observe_verified(*row.seq, accepted);
    }
    if (row.draft_position > accepted) continue;  // follows a rejected draft: no token
    if (row.choice >= static_cast<int>(request.choices.size())) continue;
    sequence& target = *request.choices[static_cast<std::size_t>(row.choice)];
    if (target.status == sequence_status::finished) continue;  // e.g. a stop inside the accepted run
    append_token(target, result.samples[i], now, events);
    ++request.generated_in_step;
  }
  return verified;
}

scheduler_events scheduler::abandon_step(std::uint64_t step) {
  scheduler_events events;
  const auto it = in_flight_.find(step);
  if (it == in_flight_.end() || plan_) {
    events.error = plan_ ? "abandon_step during planning" : "step " + std::to_string(step) + " is not in flight";
    return events;
  }
  const in_flight_step record = std::move(it->second);
  in_flight_.erase(it);
  for (const in_flight_row& row : record.rows) {
    --row.request->rows_in_flight;
    --row.seq->pending_rows;
  }
  for (sequence_id id : record.sequences) {
    sequence* seq = find_sequence(id);
    if (seq == nullptr || seq->status == sequence_status::finished) continue;
    if (seq->kv_known) pending_frees_.push_back({seq->id, /*forget_prefix=*/true});
    if (seq->resident()) pending_freed_blocks_ += freeable_blocks(*seq);
    transition(*seq, &sequence::to_recompute);
    events.preempted.push_back({seq->request->handle, seq->choice, preemption_kind::recompute});
    ++metrics_.preemptions["recompute"];
  }
  update_gauges();
  release_done_requests();
  return events;
}

std::vector<request_handle> scheduler::fail_step_requests(std::uint64_t step, double now) {
  std::vector<request_handle> failed;
  const auto it = in_flight_.find(step);
  if (it == in_flight_.end()) return failed;
  // Every sequence fed in the step, a prefill chunk without a logits row
  // too: a request whose input made the step fail would fail the next one.
  std::vector<request_state*> requests;
  for (const sequence_id id : it->second.sequences) {
    const sequence* seq = find_sequence(id);
    if (seq == nullptr || std::find(requests.begin(), requests.end(), seq->request) != requests.end()) continue;
    requests.push_back(seq->request);
    failed.push_back(seq->request->handle);
  }
  scheduler_events dropped;
  for (request_state* request_ptr : requests) {
    request_state& request = *request_ptr;
    if (!request.done()) cancel_request(request, now, dropped);
    // A block the failed step wrote holds no valid K/V: none may be found
    // by a later prompt.
    for (const auto& seq : request.choices) {
      for (kv_free& free : pending_frees_) {
        if (free.seq == seq->id) free.forget_prefix = true;
      }
    }
  }
  update_gauges();
  release_done_requests();
  return failed;
}

}  // namespace troupe

// Requests by id and the step loop, in the order a step flows: submit →
// plan → KV → run → result → route; then failures. Stats, knobs, drains
// and ticks are in scheduler_loop_admin.cpp.

#include "actors/core/scheduler_loop.hpp"

#include <algorithm>
#include <utility>

namespace troupe {

scheduler_loop::scheduler_loop(scheduler_loop_config config)
    : config_(std::move(config)),
      core_(config_.scheduler, make_policy(config_.policy)),
      step_cost_(config_.one_token_step_s),
      overlap_(step_cost_.mode()) {
  // Known before the first round: a drafter's rounds cost time (the probe
  // and catch-up rules of the turn-down apply from the first step).
  if (config_.draft_one_token_step_s > 0)
    core_.speculation_costs().observe_draft_round(1, 1, config_.draft_one_token_step_s);
  // And what a plain decode costs: a sequence that speculates from its first
  // decode feeds no one-token step to measure, and the curve extrapolated
  // below its verify steps from the prefill's slope made the k extra tokens
  // look nearly free.
  if (config_.one_token_step_s > 0) core_.speculation_costs().observe_target_step(1, config_.one_token_step_s);
}

// ---- submit ---------------------------------------------------------------

loop_submission scheduler_loop::submit(const std::string& id, request_spec spec, double now) {
  loop_submission out;
  if (!healthy_ || draining_) {
    const error_kind kind = healthy_ ? error_kind::shutting_down : error_kind::internal;
    out.error = {id, kind, healthy_ ? "the engine is shutting down" : "the engine failed: " + health_detail_, ""};
    return out;
  }
  if (handles_.count(id) != 0) {
    out.error = {id, error_kind::invalid_request, "a request with id '" + id + "' is already running", "request_id"};
    return out;
  }
  spec.request_id = id;  // the id the request table shows
  const submit_result result = core_.submit(std::move(spec), now);
  if (!result.accepted) {
    out.error = {id, result.error, result.message, ""};
    return out;
  }
  handles_[id] = result.handle;
  ids_[result.handle] = id;
  out.handle = result.handle;
  changed_while_planning_ |= planning_;
  if (early_cancel_set_.erase(id) != 0) out.events = routed(core_.cancel(result.handle, now));
  return out;
}

std::optional<loop_events> scheduler_loop::cancel(const std::string& id, double now) {
  const auto it = handles_.find(id);
  if (it == handles_.end()) {
    remember_early_cancel(id);
    return std::nullopt;
  }
  return routed(core_.cancel(it->second, now));
}

void scheduler_loop::remember_early_cancel(const std::string& id) {
  if (early_cancel_set_.insert(id).second) early_cancels_.push_back(id);
  while (early_cancels_.size() > max_early_cancels) {
    early_cancel_set_.erase(early_cancels_.front());
    early_cancels_.pop_front();
  }
}

loop_events scheduler_loop::finish_at_stop(request_handle request, int choice, double now) {
  return routed(core_.finish(request, choice, finish_reason::stop, now));
}

std::optional<request_handle> scheduler_loop::handle_of(const std::string& id) const {
  const auto it = handles_.find(id);
  if (it == handles_.end()) return std::nullopt;
  return it->second;
}

// ---- plan -----------------------------------------------------------------

std::optional<kv_request> scheduler_loop::begin_step(double now) {
  if (planning_) return std::nullopt;
  if (!healthy_) {
    // Nothing runs any more, but the KV manager (unless it is what failed)
    // still holds the failed requests' blocks: a step of frees returns them.
    if (kv_failed_ || !core_.has_pending_kv_updates()) return std::nullopt;
    planning_ = true;
    return core_.begin_step(now);
  }
  const int max_in_flight = overlap_ == overlap_mode::serial ? 1 : config_.max_steps_in_flight;
  if (static_cast<int>(in_flight_.size()) >= max_in_flight) return std::nullopt;
  if (!core_.has_unfinished_requests() && !core_.has_pending_kv_updates()) {
    result_received_s_ = -1;  // idle: the next dispatch waits for a request, not for planning
    return std::nullopt;
  }
  planning_ = true;
  return core_.begin_step(now);
}

// ---- run ------------------------------------------------------------------

planned_step scheduler_loop::take_step(double now) {
  planned_step out;
  out.step = core_.take_step();
  planning_ = false;
  const bool stale = std::exchange(changed_while_planning_, false);
  out.events = routed(std::exchange(out.step.events, {}));
  const bool across_step_failure = std::exchange(abandon_planned_, false);
  if ((!healthy_ || across_step_failure) && !out.step.empty()) {
    // Planned across a failure: nothing may run any more, or its sequences
    // may read blocks the failed step left half written. After a step
    // failure its block copies still run: a swap-out among them is the only
    // copy of its victim's K/V.
    abandon_when_taken_.push_back(out.step.id);
    if (healthy_) {
      out.step.sequences.clear();
      out.step.rows.clear();
    } else {
      out.step = {};
    }
  }
  for (const std::uint64_t id : std::exchange(abandon_when_taken_, {})) {
    if (core_.has_step_in_flight(id)) core_.abandon_step(id);
  }
  if (out.step.empty()) {
    result_received_s_ = -1;
    if (core_.has_pending_kv_updates()) {
      out.next = after_planning::plan_again;  // frees queued while this step was planned (a cancel)
    } else if (in_flight_.empty() && core_.has_unfinished_requests()) {
      // Only a timer can bring new work, unless it came during this plan.
      out.next = stale ? after_planning::plan_again : after_planning::tick_later;
    }
    return out;
  }
  in_flight_[out.step.id] = now;
  if (result_received_s_ >= 0 && overlap_ == overlap_mode::serial)
    step_cost_.observe_serial_gap(now - result_received_s_ + messaging_s_);
  result_received_s_ = -1;
  out.next = after_planning::run;
  return out;
}

// ---- result ---------------------------------------------------------------

step_outcome scheduler_loop::on_step_result(const step_result& result, double now) {
  step_outcome out;
  const auto started = in_flight_.find(result.step);
  if (started != in_flight_.end()) {
    const double elapsed = now - started->second;
    step_time_ewma_s_ = step_time_ewma_s_ == 0 ? elapsed : 0.9 * step_time_ewma_s_ + 0.1 * elapsed;
    core_.set_step_time_estimate(step_time_ewma_s_);
    messaging_s_ = std::max(0.0, elapsed - result.execute_s);  // to the executor and back
    in_flight_.erase(started);
  }
  observe_step_cost(result);
  if (const overlap_mode mode = step_cost_.mode(); mode != overlap_) {
    out.overlap_switched = overlap_switch{mode, step_cost_.fixed_step_s(), step_cost_.serial_gap_s()};
    overlap_ = mode;
    core_.set_split_decodes(mode == overlap_mode::split);
  }
  result_received_s_ = now;
  changed_while_planning_ |= planning_;
  // A result for a step the core no longer tracks (already settled or
  // abandoned) has nothing to apply; it is stale, not malformed, so it is
  // dropped as before rather than failing the engine.
  if (!core_.has_step_in_flight(result.step)) return out;
  if (!result.failure.empty()) {
    out.failed_requests = fail_step(result.step, result.failure, now);
    out.events = routed({});  // a drain may have waited for the failed requests only
    return out;
  }
  scheduler_events events = core_.on_step_result(result, now);
  if (!events.error.empty()) {
    // A result that does not fit its step (sample count, verification,
    // unknown step): nothing the executor says can be trusted any more, and
    // the step's requests would otherwise wait for rows that never settle.
    core_.abandon_step(result.step);
    in_flight_.clear();
    out.failure = fail("step " + std::to_string(result.step) + ": malformed result: " + events.error, now);
    return out;
  }
  out.events = routed(std::move(events));
  return out;
}

// What speculation's turn-down decides by: the step's executor time by the
// tokens it fed, and what a serial step costs on top (the executor idles
// while the result travels back and the next step is planned; overlapped
// steps hide that).
void scheduler_loop::observe_step_cost(const step_result& result) {
  speculation_cost_model& costs = core_.speculation_costs();
  if (result.tokens > 0) costs.observe_target_step(result.tokens, result.execute_s);
  costs.set_step_overhead(overlap_ == overlap_mode::serial ? step_cost_.serial_gap_s() : 0.0);
}

bool scheduler_loop::settle_drafted(scheduled_step& step, double now) {
  if (!healthy_) {
    // A failure that dropped only the steps it knew of (a malformed result)
    // left this one to the core, whose requests would wait for its rows.
    if (core_.has_step_in_flight(step.id)) core_.abandon_step(step.id);
    in_flight_.erase(step.id);
    return false;
  }
  if (!core_.has_step_in_flight(step.id)) {
    step.sequences.clear();
    step.rows.clear();
    if (step.empty()) return false;
    in_flight_.emplace(step.id, now);
  }
  return true;
}

std::optional<std::pair<std::uint64_t, double>> scheduler_loop::oldest_step_in_flight() const {
  const auto oldest = std::min_element(in_flight_.begin(), in_flight_.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
  if (oldest == in_flight_.end()) return std::nullopt;
  return *oldest;
}

void scheduler_loop::on_dispatched(std::uint64_t step, double now) {
  if (const auto it = in_flight_.find(step); it != in_flight_.end()) it->second = now;
}

void scheduler_loop::on_draft_round(std::int32_t sequences, std::int32_t steps, double seconds) {
  core_.speculation_costs().observe_draft_round(sequences, steps, seconds);
}

// ---- route ----------------------------------------------------------------

loop_events scheduler_loop::routed(scheduler_events events) {
  for (const finish_event& finish : events.finished) {
    if (!finish.request_done) continue;
    const auto it = ids_.find(finish.request);
    if (it == ids_.end()) continue;
    handles_.erase(it->second);
    ids_.erase(it);
  }
  loop_events out{std::move(events), {}};
  if (!drains_.empty() && !core_.has_unfinished_requests()) {
    for (const pending_drain& drain : drains_) out.drains.push_back({drain.id, true});
    drains_.clear();
  }
  return out;
}

// ---- failures -------------------------------------------------------------

std::optional<engine_failure> scheduler_loop::on_step_failed(std::uint64_t step, const std::string& error, double now) {
  abandon_from(step);
  return fail("step " + std::to_string(step) + ": " + error, now);
}

// The rows of these steps are released (once the step being planned, if
// any, is taken), so that their requests can be released or recomputed and
// their blocks freed.
void scheduler_loop::abandon_from(std::uint64_t step) {
  for (auto it = in_flight_.lower_bound(step); it != in_flight_.end(); it = in_flight_.erase(it))
    abandon_in_core(it->first);
}

void scheduler_loop::abandon_in_core(std::uint64_t step) {
  if (planning_) {
    abandon_when_taken_.push_back(step);
  } else if (core_.has_step_in_flight(step)) {
    core_.abandon_step(step);
  }
}

// The failed requests are cancelled before their step is abandoned, so that
// their blocks leave the prefix cache and their sequences are not recomputed.
std::vector<std::pair<request_handle, error_event>> scheduler_loop::fail_step(std::uint64_t step,
                                                                              const std::string& error, double now) {
  ++step_failures_;
  std::vector<std::pair<request_handle, error_event>> errors;
  for (const request_handle handle : core_.fail_step_requests(step, now)) {
    const auto it = ids_.find(handle);
    if (it == ids_.end()) continue;
    errors.emplace_back(
        handle, error_event{it->second, error_kind::internal, "the step running this request failed: " + error, ""});
    handles_.erase(it->second);
    ids_.erase(it);
  }
  abandon_in_core(step);  // its result came: the loop no longer counts it in flight
  abandon_from(step);
  if (planning_) abandon_planned_ = true;
  return errors;
}

std::optional<engine_failure> scheduler_loop::on_kv_failed(const std::string& error, double now) {
  kv_failed_ = true;
  return fail("kv manager: " + error, now);
}

// Every live request fails with the reason, and the engine reports itself
// unhealthy and admits nothing more.
std::optional<engine_failure> scheduler_loop::fail(const std::string& reason, double now) {
  if (!healthy_) return std::nullopt;
  healthy_ = false;
  health_detail_ = reason;
  engine_failure out;
  out.reason = reason;
  for (const auto& [handle, id] : ids_)
    out.errors.emplace_back(handle, error_event{id, error_kind::internal, "the engine failed: " + reason, ""});
  abort_live(now);  // their errors say why; no finish event follows
  handles_.clear();
  ids_.clear();
  give_up_drains(out.drains);
  return out;
}

scheduler_events scheduler_loop::abort_live(double now) {
  std::vector<request_handle> live;
  for (const auto& [handle, id] : ids_) live.push_back(handle);
  scheduler_events aborted;
  for (request_handle handle : live) aborted.append(core_.cancel(handle, now));
  return aborted;
}

void scheduler_loop::give_up_drains(std::vector<drain_reply>& answers) {
  for (const pending_drain& drain : drains_) answers.push_back({drain.id, false});
  drains_.clear();
}

}  // namespace troupe

// The scheduler actor: messages in, scheduler_loop calls, messages out.
// Handlers follow a step: submit → plan → KV → (drafts, in
// scheduler_drafts.cpp) → run → result → route; then failures, the admin
// messages and the behavior.

#include <spdlog/spdlog.h>

#include <algorithm>

#include "actors/scheduler_actor_state.hpp"

namespace troupe {

namespace scheduler_flow {

// Defined below in the order a step flows (drafts: scheduler_drafts.cpp).
void send_kv(self_ptr self, kv_request request);
void finish_planning(self_ptr self);
void schedule_tick(self_ptr self, caf::timespan delay);
void arm_hang_check(self_ptr self, caf::timespan delay);
void on_step_done(self_ptr self, const step_result& result);
void route(self_ptr self, loop_events out);
void send_errors(self_ptr self, std::vector<std::pair<request_handle, error_event>> errors);

// ---- submit ---------------------------------------------------------------

void submit(self_ptr self, const admitted_request& admitted) {
  auto& state = self->state;
  loop_submission result = state.loop->submit(admitted.accepted.request_id, admitted.spec, state.now());
  if (result.error) {
    admitted.sink.error(*result.error);
    return;
  }
  state.streams[result.handle] = {admitted.accepted.request_id, admitted.sink};
  auto open = std::make_shared<stream_open>();
  open->handle = result.handle;
  open->output = admitted.output;
  open->sink = admitted.sink;
  open->accepted = admitted.accepted;
  self->send(state.shard_of(result.handle), atom::open_v, stream_open_ptr{std::move(open)});
  route(self, std::move(result.events));
  try_step(self);
}

void cancel(self_ptr self, const std::string& id) {
  if (auto events = self->state.loop->cancel(id, self->state.now())) {
    route(self, std::move(*events));
    try_step(self);
  }
}

// ---- plan -----------------------------------------------------------------

// Every handler that changes the queue ends here, so the intake's bound on
// prompts awaiting preparation reads a current queue length.
void try_step(self_ptr self) {
  if (const auto& gauges = self->state.setup.gauges)
    gauges->scheduler_queued.store(self->state.loop->core().num_queued(), std::memory_order_relaxed);
  if (self->state.drafting) return;  // the step being drafted for goes to the executor first
  if (auto request = self->state.loop->begin_step(self->state.now())) send_kv(self, std::move(*request));
}

// ---- KV -------------------------------------------------------------------

// Its 10 s timeout stays in the actor clock after the answer (reply_timeout.hpp).
void send_kv(self_ptr self, kv_request request) {
  auto& state = self->state;
  self->request(state.setup.kv, state.setup.kv_timeout, std::make_shared<const kv_request>(std::move(request)))
      .then(
          [self](const kv_reply_ptr& reply) {
            if (auto again = self->state.loop->on_kv_reply(*reply)) {
              send_kv(self, std::move(*again));
            } else {
              finish_planning(self);
            }
          },
          [self](const caf::error& error) {
            fail_engine(self, self->state.loop->on_kv_failed(caf::to_string(error), self->state.now()));
          });
}

// ---- run ------------------------------------------------------------------

void finish_planning(self_ptr self) {
  planned_step planned = self->state.loop->take_step(self->state.now());
  route(self, std::move(planned.events));
  switch (planned.next) {
    case after_planning::run:
      fill_drafts(self, std::move(planned.step));
      return;
    case after_planning::plan_again:
      try_step(self);
      return;
    case after_planning::tick_later:
      schedule_tick(self, std::chrono::milliseconds(5));
      return;
    case after_planning::wait:
      return;
  }
}

void dispatch(self_ptr self, scheduled_step step) {
  auto& state = self->state;
  const std::uint64_t id = step.id;
  state.loop->on_dispatched(id, state.now());
  draft_ahead(self, step);  // before the step is moved out: its jobs copy from the step's hooks
  if (state.loop->core().config().drafter_shares_target_kv) {
    std::vector<std::int32_t>& blocks = state.busy_blocks[id];
    for (const scheduled_sequence& seq : step.sequences)
      blocks.insert(blocks.end(), seq.block_table.begin(), seq.block_table.end());
    append_device_blocks(step.copies, blocks);
  }
  auto work = std::make_shared<const scheduled_step>(std::move(step));
  // No CAF timeout (CAF 0.17 would keep it in its clock for step_timeout
  // after the answer): the hang check times the oldest step in flight.
  self->request(state.setup.executor, caf::infinite, atom::run_step_v, work)
      .then([self](const step_result_ptr& result) { on_step_done(self, *result); },
            [self, id](const caf::error& error) {
              self->state.busy_blocks.erase(id);
              fail_engine(self, self->state.loop->on_step_failed(id, caf::to_string(error), self->state.now()));
            });
  if (!state.hang_check_armed) arm_hang_check(self, state.setup.step_timeout);
}

// One timer for every step in flight, not a CAF timeout each: it fires
// step_timeout after the oldest one was sent, fails it if it is still
// unanswered, and otherwise waits for the next oldest.
void arm_hang_check(self_ptr self, caf::timespan delay) {
  self->state.hang_check_armed = true;
  self->delayed_send(self, delay, atom::hang_check_v);
}

void on_hang_check(self_ptr self) {
  auto& state = self->state;
  state.hang_check_armed = false;
  const double timeout_s = std::chrono::duration<double>(state.setup.step_timeout).count();
  // A step still waiting for its drafts has not reached the executor (its
  // round has a timeout of its own).
  const auto waits_for_drafts = [&](std::uint64_t step) { return state.drafting && step == state.drafting_step; };
  if (const auto oldest = state.loop->oldest_step_in_flight();
      oldest && !waits_for_drafts(oldest->first) && oldest->second + timeout_s <= state.now()) {
    state.busy_blocks.erase(oldest->first);
    fail_engine(self,
                state.loop->on_step_failed(
                    oldest->first, fmt::format("the executor did not answer within {} s (step_timeout)", timeout_s),
                    state.now()));
  }
  // The next dispatch arms it when no step is left in flight.
  if (const auto next = state.loop->oldest_step_in_flight()) {
    const double left_s =
        waits_for_drafts(next->first) ? timeout_s : std::max(0.0, next->second + timeout_s - state.now());
    arm_hang_check(self, std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(left_s)));
  }
}

void schedule_tick(self_ptr self, caf::timespan delay) {
  if (self->state.tick_scheduled) return;
  self->state.tick_scheduled = true;
  self->delayed_send(self, delay, atom::tick_v);
}

// ---- result ---------------------------------------------------------------

void on_step_done(self_ptr self, const step_result& result) {
  self->state.busy_blocks.erase(result.step);
  step_outcome outcome = self->state.loop->on_step_result(result, self->state.now());
  if (const auto& switched = outcome.overlap_switched) {
    spdlog::info(
        "scheduler: steps now overlap in {} mode (one-token step {:.3f} ms, gap between serial steps {:.3f} ms)",
        overlap_mode_name(switched->mode), 1e3 * switched->fixed_step_s, 1e3 * switched->serial_gap_s);
  }
  if (outcome.failure) {
    fail_engine(self, std::move(outcome.failure));
    return;
  }
  if (!outcome.failed_requests.empty()) {
    spdlog::warn("scheduler: step {} failed, {} requests in it fail: {}", result.step, outcome.failed_requests.size(),
                 result.failure);
    send_errors(self, std::move(outcome.failed_requests));
  }
  route(self, std::move(outcome.events));
  try_step(self);
}

// ---- route ----------------------------------------------------------------

void deliver_drains(self_ptr self, const std::vector<drain_reply>& replies) {
  for (const drain_reply& reply : replies) {
    const auto it = self->state.drains.find(reply.id);
    if (it == self->state.drains.end()) continue;
    it->second.deliver(reply.drained);
    self->state.drains.erase(it);
  }
}

// An output shard's answer to an events batch: the choices that hit a stop
// string end here; the requests whose output failed to stream (their sinks
// have the error) are aborted, so their blocks come back.
void on_feedback(self_ptr self, const stream_feedback& feedback) {
  auto& state = self->state;
  for (const auto& [handle, choice] : feedback.stops)
    route(self, state.loop->finish_at_stop(handle, choice, state.now()));
  for (const request_handle handle : feedback.failed) {
    const auto it = state.streams.find(handle);
    if (it == state.streams.end()) continue;
    const std::string id = it->second.id;
    state.streams.erase(it);
    if (auto events = state.loop->abort(id, state.now())) route(self, std::move(*events));
  }
  if (!feedback.stops.empty() || !feedback.failed.empty()) try_step(self);
}

// Requests whose last events went to a shard that failed before it
// answered: their end may never have reached their sinks, so each still
// registered gets an error (replace_shard may have failed it already).
void fail_unconfirmed(self_ptr self, const std::vector<request_handle>& handles) {
  auto& state = self->state;
  for (const request_handle handle : handles) {
    const auto it = state.streams.find(handle);
    if (it == state.streams.end()) continue;
    it->second.sink.error({it->second.id, error_kind::internal, "the output shard streaming this request failed", ""});
    state.streams.erase(it);
  }
}

// Sends each output shard its requests' events (the shard answers with
// feedback, above). A finished request stays registered until its shard
// answers for the batch with its end: a shard that dies before that takes
// the finish with it, and the request must still get an answer.
void route(self_ptr self, loop_events out) {
  auto& state = self->state;
  scheduler_events& events = out.events;
  if (!events.error.empty()) spdlog::warn("scheduler: {}", events.error);
  std::vector<stream_batch> batches(state.setup.shards.size());
  std::vector<std::vector<request_handle>> ended(batches.size());
  for (auto& token : events.tokens) batches[token.request % batches.size()].tokens.push_back(std::move(token));
  for (auto& finish : events.finished) {
    const std::size_t shard = finish.request % batches.size();
    if (finish.request_done) ended[shard].push_back(finish.request);
    batches[shard].finished.push_back(std::move(finish));
  }
  for (std::size_t shard = 0; shard < batches.size(); ++shard) {
    if (batches[shard].tokens.empty() && batches[shard].finished.empty()) continue;
    auto batch = std::make_shared<const stream_batch>(std::move(batches[shard]));
    auto done = std::make_shared<const std::vector<request_handle>>(std::move(ended[shard]));
    self->request(state.setup.shards[shard], state.setup.events_timeout, atom::events_v, std::move(batch))
        .then(
            [self, done](const stream_feedback_ptr& feedback) {
              for (const request_handle handle : *done) self->state.streams.erase(handle);
              on_feedback(self, *feedback);
            },
            [self, done](const caf::error& error) {
              spdlog::error("scheduler: output shard failed: {}", caf::to_string(error));
              fail_unconfirmed(self, *done);
            });
  }
  deliver_drains(self, out.drains);
}

// ---- failures -------------------------------------------------------------

// The executor or the KV manager failed: the loop has failed every live
// request; their errors go to the output shards. The step that follows
// only returns the failed requests' blocks to the pool.
void fail_engine(self_ptr self, std::optional<engine_failure> failure) {
  if (!failure) return;
  spdlog::error("scheduler: engine failed: {}", failure->reason);
  send_errors(self, std::move(failure->errors));
  deliver_drains(self, failure->drains);
  try_step(self);
}

// Failed requests: their errors go to their output shards, and they are
// no longer streamed.
void send_errors(self_ptr self, std::vector<std::pair<request_handle, error_event>> errors) {
  auto& state = self->state;
  std::vector<stream_batch> batches(state.setup.shards.size());
  for (auto& [handle, error] : errors) {
    state.streams.erase(handle);
    batches[handle % batches.size()].errors.emplace_back(handle, std::move(error));
  }
  for (std::size_t shard = 0; shard < batches.size(); ++shard) {
    if (batches[shard].errors.empty()) continue;
    caf::anon_send(state.setup.shards[shard], atom::events_v,
                   std::make_shared<const stream_batch>(std::move(batches[shard])));
  }
}

// An output shard died and the intake started `replacement` in its
// place: the streams it held (their detokenizer state) are gone, so those
// requests fail and are aborted; the others never noticed.
void replace_shard(self_ptr self, std::int32_t index, const caf::actor& replacement) {
  auto& state = self->state;
  if (index < 0 || static_cast<std::size_t>(index) >= state.setup.shards.size()) return;
  state.setup.shards[static_cast<std::size_t>(index)] = caf::actor_cast<detokenizer_actor>(replacement);
  std::vector<live_stream> lost;
  for (auto it = state.streams.begin(); it != state.streams.end();) {
    if (it->first % state.setup.shards.size() != static_cast<std::size_t>(index)) {
      ++it;
      continue;
    }
    lost.push_back(std::move(it->second));
    it = state.streams.erase(it);
  }
  if (!lost.empty()) spdlog::warn("scheduler: {} requests lost their output shard {}", lost.size(), index);
  for (const live_stream& stream : lost) {
    stream.sink.error({stream.id, error_kind::internal, "the output shard streaming this request failed", ""});
    if (auto events = state.loop->abort(stream.id, state.now())) route(self, std::move(*events));
  }
  try_step(self);
}

// ---- admin ----------------------------------------------------------------

caf::result<bool> drain(self_ptr self, double seconds) {
  auto& state = self->state;
  const drain_start start = state.loop->drain(seconds, state.now());
  if (start.answer) return *start.answer;
  auto promise = self->make_response_promise<bool>();
  state.drains.emplace(start.id, promise);
  self->delayed_send(self, std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(seconds)),
                     atom::tick_v);
  return promise;
}

bool abort_request(self_ptr self, const std::string& id) {
  std::optional<loop_events> events = self->state.loop->abort(id, self->state.now());
  if (!events) return false;
  route(self, std::move(*events));
  try_step(self);
  return true;
}

void on_tick(self_ptr self) {
  self->state.tick_scheduled = false;
  route(self, self->state.loop->on_tick(self->state.now()));
  try_step(self);
}

scheduler_actor::behavior_type scheduler_behavior(self_ptr self, scheduler_setup setup,
                                                  std::chrono::steady_clock::time_point start) {
  auto& state = self->state;
  state.loop = std::make_unique<scheduler_loop>(setup.loop);
  state.setup = std::move(setup);
  state.start = start;
  return {
      [self](atom::submit, const admitted_request_ptr& admitted) { submit(self, *admitted); },
      [self](atom::cancel, const std::string& id) { cancel(self, id); },
      [self](atom::stats) {
        return engine_stats_ptr{std::make_shared<engine_stats>(self->state.loop->stats(self->state.now()))};
      },
      [self](atom::configure, const config_change_ptr& change) -> std::string {
        // Draft slots nobody fills would only waste budget and blocks.
        if (self->state.setup.speculation == speculative_method::off && change->num_speculative_tokens.value_or(0) > 0)
          return "speculative decoding is off: start the engine with a proposer (--speculative) to use "
                 "num_speculative_tokens";
        std::string problem = self->state.loop->configure(*change, self->state.now());
        try_step(self);
        return problem;
      },
      [self](atom::requests) {
        return request_table_ptr{
            std::make_shared<std::vector<request_info>>(self->state.loop->request_table(self->state.now()))};
      },
      [self](atom::abort, const std::string& id) { return abort_request(self, id); },
      [self](atom::priority, const std::string& id, std::int32_t priority) {
        const bool known = self->state.loop->set_priority(id, priority);
        if (known) try_step(self);
        return known;
      },
      [self](atom::drain, double seconds) { return drain(self, seconds); },
      [self](atom::tick) { on_tick(self); },
      [self](atom::hang_check) { on_hang_check(self); },
      [self](atom::shard, std::int32_t index, const caf::actor& replacement) {
        replace_shard(self, index, replacement);
      },
  };
}

}  // namespace scheduler_flow

scheduler_actor spawn_scheduler(caf::actor_system& system, scheduler_setup setup,
                                std::chrono::steady_clock::time_point clock_start) {
  return system.spawn(scheduler_flow::scheduler_behavior, std::move(setup), clock_start);
}

}  // namespace troupe

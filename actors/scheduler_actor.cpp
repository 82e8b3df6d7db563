#include "actors/scheduler_actor.hpp"

#include <spdlog/spdlog.h>
#include <algorithm>
#include <deque>
#include <unordered_map>
#include <unordered_set>

#include "actors/core/step_cost.hpp"

namespace troupe {

namespace {

struct pending_drain {
  caf::typed_response_promise<bool> promise;
  double deadline_s = 0;
};

struct scheduler_state {
  scheduler_setup setup;
  std::unique_ptr<scheduler> core;
  std::chrono::steady_clock::time_point start;
  std::unordered_map<std::string, request_handle> handles;  ///< request id -> handle, live requests
  std::unordered_map<request_handle, std::string> ids;
  std::deque<std::string> early_cancels;  ///< ids cancelled before they were submitted (bounded)
  std::unordered_set<std::string> early_cancel_set;
  bool planning = false;
  std::map<std::uint64_t, double> in_flight;  ///< step id -> dispatch time
  step_cost_model step_cost;
  overlap_mode overlap = overlap_mode::alternate;
  double result_received_s = -1;  ///< when the last step result arrived, until the next dispatch
  double messaging_s = 0;         ///< the last step's round trip less its executor time
  bool healthy = true;
  std::string health_detail;
  bool draining = false;
  std::vector<pending_drain> drains;
  bool tick_scheduled = false;
  double step_time_ewma_s = 0;
  static inline const char* name = "scheduler";

  double now() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); }
  tokenizer_actor shard_of(request_handle handle) const { return setup.shards[handle % setup.shards.size()]; }
};

using self_ptr = scheduler_actor::stateful_pointer<scheduler_state>;

void try_step(self_ptr self);
void route(self_ptr self, scheduler_events events);

void schedule_tick(self_ptr self, caf::timespan delay) {
  if (self->state.tick_scheduled) return;
  self->state.tick_scheduled = true;
  self->delayed_send(self, delay, atom::tick_v);
}

void forget_request(scheduler_state& state, request_handle handle) {
  const auto it = state.ids.find(handle);
  if (it == state.ids.end()) return;
  state.handles.erase(it->second);
  state.ids.erase(it);
}

void settle_drains(self_ptr self) {
  auto& state = self->state;
  if (state.drains.empty() || state.core->has_unfinished_requests()) return;
  for (auto& drain : state.drains) drain.promise.deliver(true);
  state.drains.clear();
}

// Sends each tokenizer shard its requests' events; the shards answer with
// the choices that hit a stop string, which end here.
void route(self_ptr self, scheduler_events events) {
  auto& state = self->state;
  if (!events.error.empty()) spdlog::warn("scheduler: {}", events.error);
  std::vector<stream_batch> batches(state.setup.shards.size());
  for (auto& token : events.tokens) batches[token.request % batches.size()].tokens.push_back(std::move(token));
  for (auto& finish : events.finished) {
    if (finish.request_done) forget_request(state, finish.request);
    batches[finish.request % batches.size()].finished.push_back(std::move(finish));
  }
  for (std::size_t shard = 0; shard < batches.size(); ++shard) {
    if (batches[shard].tokens.empty() && batches[shard].finished.empty()) continue;
    auto batch = std::make_shared<const stream_batch>(std::move(batches[shard]));
    self->request(state.setup.shards[shard], state.setup.kv_timeout, atom::events_v, std::move(batch))
        .then(
            [self](const stop_matches_ptr& stops) {
              for (const auto& [handle, choice] : stops->choices)
                route(self, self->state.core->finish(handle, choice, finish_reason::stop, self->state.now()));
              if (!stops->choices.empty()) try_step(self);
            },
            [](const caf::error& error) {
              spdlog::error("scheduler: tokenizer shard failed: {}", caf::to_string(error));
            });
  }
  settle_drains(self);
}

// The executor failed: every live request fails with the reason, and the
// engine reports itself unhealthy and admits nothing more.
void fail_engine(self_ptr self, const std::string& reason) {
  auto& state = self->state;
  if (!state.healthy) return;
  spdlog::error("scheduler: engine failed: {}", reason);
  state.healthy = false;
  state.health_detail = reason;
  std::vector<stream_batch> batches(state.setup.shards.size());
  for (const auto& [handle, id] : state.ids) {
    batches[handle % batches.size()].errors.emplace_back(
        handle, error_event{id, error_kind::internal, "the engine failed: " + reason, ""});
  }
  for (std::size_t shard = 0; shard < batches.size(); ++shard) {
    if (batches[shard].errors.empty()) continue;
    caf::anon_send(state.setup.shards[shard], atom::events_v,
                   std::make_shared<const stream_batch>(std::move(batches[shard])));
  }
  std::vector<request_handle> live;
  for (const auto& [handle, id] : state.ids) live.push_back(handle);
  for (request_handle handle : live) state.core->cancel(handle, state.now());
  state.handles.clear();
  state.ids.clear();
  for (auto& drain : state.drains) drain.promise.deliver(false);
  state.drains.clear();
}

void on_step_done(self_ptr self, const step_result& result) {
  auto& state = self->state;
  const auto started = state.in_flight.find(result.step);
  if (started != state.in_flight.end()) {
    const double elapsed = state.now() - started->second;
    state.step_time_ewma_s = state.step_time_ewma_s == 0 ? elapsed : 0.9 * state.step_time_ewma_s + 0.1 * elapsed;
    state.core->set_step_time_estimate(state.step_time_ewma_s);
    state.messaging_s = std::max(0.0, elapsed - result.execute_s);  // to the executor and back
    state.in_flight.erase(started);
  }
  if (const overlap_mode mode = state.step_cost.mode(); mode != state.overlap) {
    spdlog::info(
        "scheduler: steps now overlap in {} mode (one-token step {:.3f} ms, gap between serial steps {:.3f} ms)",
        overlap_mode_name(mode), 1e3 * state.step_cost.fixed_step_s(), 1e3 * state.step_cost.serial_gap_s());
    state.overlap = mode;
    state.core->set_split_decodes(mode == overlap_mode::split);
  }
  state.result_received_s = state.now();
  route(self, state.core->on_step_result(result, state.now()));
  try_step(self);
}

void dispatch(self_ptr self, scheduled_step step) {
  auto& state = self->state;
  const std::uint64_t id = step.id;
  const double now = state.now();
  state.in_flight[id] = now;
  if (state.result_received_s >= 0 && state.overlap == overlap_mode::serial)
    state.step_cost.observe_serial_gap(now - state.result_received_s + state.messaging_s);
  state.result_received_s = -1;
  auto work = std::make_shared<const scheduled_step>(std::move(step));
  self->request(state.setup.executor, state.setup.step_timeout, atom::run_step_v, work)
      .then([self](const step_result_ptr& result) { on_step_done(self, *result); },
            [self, id](const caf::error& error) {
              auto& state = self->state;
              // The step and every later one in flight will never run: their
              // rows are released before the requests are failed.
              if (state.in_flight.count(id) != 0) state.core->abandon_step(id);
              state.in_flight.erase(state.in_flight.find(id), state.in_flight.end());
              fail_engine(self, "step " + std::to_string(id) + ": " + caf::to_string(error));
            });
}

void finish_planning(self_ptr self) {
  auto& state = self->state;
  scheduled_step step = state.core->take_step();
  state.planning = false;
  route(self, std::move(step.events));
  if (step.empty()) {
    state.result_received_s = -1;
    // Frees queued while this step was planned (a cancel) go out at once.
    if (state.core->has_pending_kv_updates()) {
      try_step(self);
      return;
    }
    // Nothing can run now; results in flight or a timer will bring new work.
    if (state.in_flight.empty() && state.core->has_unfinished_requests())
      schedule_tick(self, std::chrono::milliseconds(5));
    return;
  }
  dispatch(self, std::move(step));
  try_step(self);
}

void send_kv(self_ptr self, kv_request request) {
  auto& state = self->state;
  self->request(state.setup.kv, state.setup.kv_timeout, std::make_shared<const kv_request>(std::move(request)))
      .then(
          [self](const kv_reply_ptr& reply) {
            if (auto again = self->state.core->on_kv_reply(*reply)) {
              send_kv(self, std::move(*again));
            } else {
              finish_planning(self);
            }
          },
          [self](const caf::error& error) { fail_engine(self, "kv manager: " + caf::to_string(error)); });
}

void try_step(self_ptr self) {
  auto& state = self->state;
  if (!state.healthy || state.planning) return;
  const int max_in_flight = state.overlap == overlap_mode::serial ? 1 : state.setup.max_steps_in_flight;
  if (static_cast<int>(state.in_flight.size()) >= max_in_flight) return;
  if (!state.core->has_unfinished_requests() && !state.core->has_pending_kv_updates()) {
    state.result_received_s = -1;  // idle: the next dispatch waits for a request, not for planning
    return;
  }
  state.planning = true;
  send_kv(self, state.core->begin_step(state.now()));
}

void submit(self_ptr self, const admitted_request& admitted) {
  auto& state = self->state;
  const std::string& id = admitted.accepted.request_id;
  if (!state.healthy || state.draining) {
    const error_kind kind = state.healthy ? error_kind::shutting_down : error_kind::internal;
    admitted.sink.error(
        {id, kind, state.healthy ? "the engine is shutting down" : "the engine failed: " + state.health_detail, ""});
    return;
  }
  if (state.handles.count(id) != 0) {
    admitted.sink.error(
        {id, error_kind::invalid_request, "a request with id '" + id + "' is already running", "request_id"});
    return;
  }
  const submit_result result = state.core->submit(admitted.spec, state.now());
  if (!result.accepted) {
    admitted.sink.error({id, result.error, result.message, ""});
    return;
  }
  state.handles[id] = result.handle;
  state.ids[result.handle] = id;
  auto open = std::make_shared<stream_open>();
  open->handle = result.handle;
  open->output = admitted.output;
  open->sink = admitted.sink;
  open->accepted = admitted.accepted;
  self->send(state.shard_of(result.handle), atom::open_v, stream_open_ptr{std::move(open)});
  if (state.early_cancel_set.erase(id) != 0) route(self, state.core->cancel(result.handle, state.now()));
  try_step(self);
}

void cancel(self_ptr self, const std::string& id) {
  auto& state = self->state;
  const auto it = state.handles.find(id);
  if (it == state.handles.end()) {
    // Not submitted yet (still being tokenized): remember for a while.
    if (state.early_cancel_set.insert(id).second) state.early_cancels.push_back(id);
    while (state.early_cancels.size() > 4096) {
      state.early_cancel_set.erase(state.early_cancels.front());
      state.early_cancels.pop_front();
    }
    return;
  }
  route(self, state.core->cancel(it->second, state.now()));
  try_step(self);
}

engine_stats_ptr snapshot(const scheduler_state& state) {
  auto stats = std::make_shared<engine_stats>();
  state.core->metrics().fill(*stats);
  const scheduler_config& config = state.core->config();
  stats->settings.policy = state.core->policy().name();
  stats->settings.preemption_mode = preemption_mode_name(config.preemption);
  stats->settings.max_num_batched_tokens = config.max_num_batched_tokens;
  stats->settings.max_num_seqs = config.max_num_seqs;
  stats->settings.max_prefill_chunk = config.max_prefill_chunk;
  stats->settings.max_waiting_requests = config.max_waiting_requests;
  stats->settings.mlfq_quantum = config.policies.mlfq_base_quantum;
  stats->healthy = state.healthy;
  stats->health_detail = state.health_detail;
  const double now = state.now();
  if (state.healthy && !state.in_flight.empty() && now - state.in_flight.begin()->second > state.setup.stuck_after_s) {
    stats->healthy = false;
    stats->health_detail =
        "a step has been running for " + std::to_string(now - state.in_flight.begin()->second) + " s";
  }
  return stats;
}

std::string configure(scheduler_state& state, const config_change& change) {
  scheduler_config config = state.core->config();
  if (change.preemption_mode) {
    auto mode = parse_preemption_mode(*change.preemption_mode);
    if (!mode) return "unknown preemption_mode '" + *change.preemption_mode + "'";
    config.preemption = *mode;
  }
  if (change.max_num_batched_tokens) config.max_num_batched_tokens = *change.max_num_batched_tokens;
  if (change.max_num_seqs) config.max_num_seqs = *change.max_num_seqs;
  if (change.max_prefill_chunk) config.max_prefill_chunk = *change.max_prefill_chunk;
  if (change.max_waiting_requests) config.max_waiting_requests = *change.max_waiting_requests;
  if (change.mlfq_quantum) config.policies.mlfq_base_quantum = *change.mlfq_quantum;
  if (change.policy && !make_policy(*change.policy)) return "unknown policy '" + *change.policy + "'";
  if (std::string problem = state.core->set_config(config); !problem.empty()) return problem;
  if (change.policy) state.core->set_policy(*change.policy, state.now());
  return {};
}

void on_tick(self_ptr self) {
  auto& state = self->state;
  state.tick_scheduled = false;
  const double now = state.now();
  const bool overdue = std::any_of(state.drains.begin(), state.drains.end(),
                                   [now](const pending_drain& d) { return now >= d.deadline_s; });
  if (overdue) {
    std::vector<request_handle> live;
    for (const auto& [handle, id] : state.ids) live.push_back(handle);
    for (request_handle handle : live) route(self, state.core->cancel(handle, now));
    for (auto& drain : state.drains) drain.promise.deliver(false);
    state.drains.clear();
  }
  try_step(self);
}

scheduler_actor::behavior_type scheduler_behavior(self_ptr self, scheduler_setup setup,
                                                  std::chrono::steady_clock::time_point start) {
  auto& state = self->state;
  state.core = std::make_unique<scheduler>(setup.config, make_policy(setup.policy));
  state.step_cost = step_cost_model(setup.one_token_step_s);
  state.overlap = state.step_cost.mode();
  state.setup = std::move(setup);
  state.start = start;
  return {
      [self](atom::submit, const admitted_request_ptr& admitted) { submit(self, *admitted); },
      [self](atom::cancel, const std::string& id) { cancel(self, id); },
      [self](atom::stats) { return snapshot(self->state); },
      [self](atom::configure, const config_change_ptr& change) {
        std::string problem = configure(self->state, *change);
        try_step(self);
        return problem;
      },
      [self](atom::drain, double seconds) -> caf::result<bool> {
        auto& state = self->state;
        state.draining = true;
        if (!state.core->has_unfinished_requests()) return true;
        if (!state.healthy) return false;  // nothing can finish on a failed executor
        auto promise = self->make_response_promise<bool>();
        state.drains.push_back({promise, state.now() + seconds});
        self->delayed_send(self, std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(seconds)),
                           atom::tick_v);
        return promise;
      },
      [self](atom::tick) { on_tick(self); },
  };
}

}  // namespace

scheduler_actor spawn_scheduler(caf::actor_system& system, scheduler_setup setup,
                                std::chrono::steady_clock::time_point clock_start) {
  return system.spawn(scheduler_behavior, std::move(setup), clock_start);
}

}  // namespace troupe

#pragma once
// What the scheduler actor decides around the scheduler core: requests by
// id (duplicates, cancels that arrive before their request), the step loop's
// bookkeeping (steps in flight and their limit, the step-time average, the
// overlap mode), health (a failed executor or KV manager, a stuck step),
// drains with deadlines, live knobs and the stats snapshot. No CAF, no
// clock: every call takes the time `now` in seconds, and the results say
// what to send. Drains are plain ids here; the actor keeps their promises.
//
// The step loop, as the actor drives it:
//   submit(id, spec, now)                      -> open the request's stream, route its events
//   if (auto r = begin_step(now))              -> KV manager
//   while (auto again = on_kv_reply(reply))    -> KV manager again
//   planned_step p = take_step(now)            -> route p.events; set_drafts; run p.step, or p.next
//   settle_drafted(p.step, now)                -> once its drafts are in: run it only if true
//   on_dispatched(p.step.id, now)              -> when it goes to the executor (after its drafts)
//   step_outcome o = on_step_result(r, now)    -> route o.events; begin_step again
// "Route" means: the events to the requests' output shards, then the drain
// answers. Requests whose last choice finished are forgotten by then.

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "actors/core/scheduler.hpp"
#include "actors/core/step_cost.hpp"
#include "troupe/engine.hpp"

namespace troupe {

/// Names one drain request; the actor keeps its promise under it.
using drain_id = std::uint64_t;

/// A drain to answer: true once no request is left, false when it gave up.
struct drain_reply {
  drain_id id = 0;
  bool drained = false;
};

/// What a call leaves to route: events for the output shards, then drain answers.
struct loop_events {
  scheduler_events events;
  std::vector<drain_reply> drains;
};

/// The loop's knobs (the scheduler actor's setup, less the actors).
struct scheduler_loop_config {
  scheduler_config scheduler;
  std::string policy = engine_config{}.policy;  ///< the policy knob's default unless set
  int max_steps_in_flight = 2;                  ///< in alternate and split overlap; serial runs one
  double stuck_after_s = 30.0;                  ///< a step running longer makes the stats report the engine unhealthy
  double one_token_step_s = 0;                  ///< measured executor time of a one-token step (0: unknown)
  double draft_one_token_step_s = 0;            ///< the drafter's, seeding the turn-down's draft costs (0: none)
  workspace_bound workspace;                    ///< live budgets are refused past its limit
};

/// The answer to submit().
struct loop_submission {
  std::optional<error_event> error;  ///< set when refused: send it to the request's sink, nothing else
  request_handle handle = 0;         ///< the request's handle (and output shard) when accepted
  loop_events events;                ///< its abort, when its cancel came before it
};

/// What the actor does once a step is planned.
enum class after_planning {
  run,         ///< send the step to the executor, then try to plan the next
  plan_again,  ///< nothing to run, but frees wait for the KV manager: plan again now
  tick_later,  ///< nothing can run and no step is in flight: look again in a moment
  wait,        ///< a step result (or a new request) brings the next step
};

/// The answer to take_step().
struct planned_step {
  scheduled_step step;  ///< its events moved to `events`; empty unless next is run
  loop_events events;   ///< preemptions, timeouts and length stops decided while planning
  after_planning next = after_planning::wait;
};

/// The overlap mode changed (for the log).
struct overlap_switch {
  overlap_mode mode = overlap_mode::serial;
  double fixed_step_s = 0;  ///< executor seconds of a one-token step
  double serial_gap_s = 0;  ///< smoothed executor idle time between serial steps
};

/// The engine failed: what every live request and every drain is told.
struct engine_failure {
  std::string reason;
  std::vector<std::pair<request_handle, error_event>> errors;  ///< to each request's output shard
  std::vector<drain_reply> drains;
};

/// The answer to on_step_result().
struct step_outcome {
  loop_events events;
  std::optional<overlap_switch> overlap_switched;
  /// The result did not fit its step (a malformed executor answer): the engine failed.
  std::optional<engine_failure> failure;
  /// The step failed on an intact backend (step_result::failure): the
  /// errors of its requests, to their output shards; the engine goes on.
  std::vector<std::pair<request_handle, error_event>> failed_requests;
};

/// The answer to drain().
struct drain_start {
  std::optional<bool> answer;  ///< answered at once; otherwise wait for drain `id` (deadline tick due)
  drain_id id = 0;
};

/// The scheduler actor's logic (see the file comment).
class scheduler_loop {
 public:
  /// Early cancels remembered at most; older ones are forgotten.
  static constexpr std::size_t max_early_cancels = 4096;

  /// Throws std::invalid_argument when `config.scheduler` is inconsistent.
  explicit scheduler_loop(scheduler_loop_config config);

  // ---- submit -------------------------------------------------------------
  /// Admits request `id` unless the engine failed or drains, the id is
  /// running already, or the core refuses it.
  loop_submission submit(const std::string& id, request_spec spec, double now);
  /// Cancels request `id`; nullopt when it is unknown (remembered, in case
  /// its request is still being tokenized).
  std::optional<loop_events> cancel(const std::string& id, double now);
  /// Ends a choice whose text hit a stop string.
  loop_events finish_at_stop(request_handle request, int choice, double now);

  // ---- plan and KV --------------------------------------------------------
  /// Starts planning a step: what to ask the KV manager, or nullopt when no
  /// step is due (planning already, in-flight limit, idle). After a failure
  /// only frees are planned (the failed requests' blocks go back to the
  /// pool), unless the KV manager is what failed.
  std::optional<kv_request> begin_step(double now);
  /// The KV manager's reply: another request for the same step, or nullopt
  /// when take_step() may follow.
  std::optional<kv_request> on_kv_reply(const kv_reply& reply) { return core_.on_kv_reply(reply); }

  // ---- run and result -----------------------------------------------------
  /// The planned step, marked in flight at `now` when it runs.
  planned_step take_step(double now);
  /// A proposer's drafts for one of its sequences, before it is sent (scheduler::set_drafts).
  std::string set_drafts(scheduled_step& step, std::size_t sequence_index, std::vector<std::int32_t> drafts,
                         std::vector<float> draft_probs = {}, std::vector<std::int32_t> parents = {}) {
    return core_.set_drafts(step, sequence_index, std::move(drafts), std::move(draft_probs), std::move(parents));
  }
  /// An ahead round drafted for `drafted` sequences, or a step took `used` sequences' ahead drafts.
  void on_drafts_ahead(std::int32_t drafted, std::int32_t used) { core_.count_drafts_ahead(drafted, used); }
  /// A step's samples; times the step and may switch the overlap mode. A
  /// result with a failure fails the step's requests only: the step and
  /// every later one in flight (and the one being planned) are abandoned,
  /// so that no step reads a block the failed one may have left half
  /// written; their other sequences are recomputed.
  step_outcome on_step_result(const step_result& result, double now);
  /// A taken step whose drafts came in at `now`, made what may still run of
  /// it: false when nothing may (the engine failed meanwhile: the core then
  /// drops it, as take_step does; or nothing is left). A step abandoned
  /// while its drafts were out (one before it failed) keeps its block copies
  /// only, as one planned across the failure does (take_step): a swap-out
  /// among them is its victim's only K/V copy; it counts as in flight again.
  bool settle_drafted(scheduled_step& step, double now);
  /// False once taken step `step` was abandoned (or the engine failed):
  /// drafts for it would be for nothing (settle_drafted then says what runs).
  bool drafting_pays(std::uint64_t step) const { return healthy_ && core_.has_step_in_flight(step); }
  /// Step `step` (taken earlier) went to the executor at `now`: its round
  /// trip is timed from here, so that the wait for its drafts counts as
  /// draft time (on_draft_round), not as messaging between serial steps
  /// (which would make overlap look worth it to a step that waits for drafts).
  void on_dispatched(std::uint64_t step, double now);
  /// A draft round for `sequences` sequences took `seconds` (from the
  /// request to the drafts) over `steps` draft steps: feeds the turn-down.
  void on_draft_round(std::int32_t sequences, std::int32_t steps, double seconds);

  // ---- failures -----------------------------------------------------------
  /// The executor failed step `step` with `error` (or did not answer within
  /// the step timeout): it and every later step in flight are dropped and
  /// the engine fails. Nullopt when it had failed already.
  std::optional<engine_failure> on_step_failed(std::uint64_t step, const std::string& error, double now);
  /// The KV manager did not answer (`error`): the engine fails.
  std::optional<engine_failure> on_kv_failed(const std::string& error, double now);

  // ---- admin --------------------------------------------------------------
  /// Counters, gauges, live settings and health (a step in flight longer
  /// than stuck_after_s reports the engine unhealthy).
  engine_stats stats(double now) const;
  /// Applies a live settings change; "" or what was wrong (then nothing changed).
  std::string configure(const settings_change& change, double now);
  /// The live requests (scheduler::request_table).
  std::vector<request_info> request_table(double now) const { return core_.request_table(now); }
  /// Aborts live request `id` (its choices finish with reason abort); nullopt
  /// when no live request has that id (nothing is remembered, unlike cancel).
  std::optional<loop_events> abort(const std::string& id, double now);
  /// Sets live request `id`'s priority; false when no live request has that id.
  bool set_priority(const std::string& id, int priority);
  /// Stops admitting; answers at once or gives the drain an id whose answer
  /// comes in a later loop_events (after `seconds`, on_tick gives up on it).
  drain_start drain(double seconds, double now);
  /// A timer fired: drains past their deadline abort every live request.
  loop_events on_tick(double now);

  // ---- state --------------------------------------------------------------
  /// The scheduler core.
  const scheduler& core() const { return core_; }
  /// False once the executor or the KV manager failed.
  bool healthy() const { return healthy_; }
  /// The overlap mode steps are planned in.
  overlap_mode overlap() const { return overlap_; }
  /// Steps sent to the executor whose results have not come back.
  std::size_t num_steps_in_flight() const { return in_flight_.size(); }
  /// The step in flight sent earliest and when, seconds (the executor's
  /// hang check: the scheduler actor fails it once step_timeout has passed).
  std::optional<std::pair<std::uint64_t, double>> oldest_step_in_flight() const;
  /// Smoothed executor round trip of a step, seconds (0 before the first).
  double step_time_s() const { return step_time_ewma_s_; }
  /// The live request `id` goes by, if any.
  std::optional<request_handle> handle_of(const std::string& id) const;

 private:
  struct pending_drain {
    drain_id id = 0;
    double deadline_s = 0;
  };

  std::optional<engine_failure> fail(const std::string& reason, double now);
  /// Drops step `step` and every later one in flight (in the core once no
  /// step is being planned).
  void abandon_from(std::uint64_t step);
  /// Drops step `step` in the core, or once the step being planned is taken.
  void abandon_in_core(std::uint64_t step);
  /// The requests of a step that failed on an intact backend (see on_step_result).
  std::vector<std::pair<request_handle, error_event>> fail_step(std::uint64_t step, const std::string& error,
                                                                double now);
  /// Feeds the step's measured cost to the core's speculation cost model.
  void observe_step_cost(const step_result& result);
  /// Cancels every live request in the core; their ids stay until routed or cleared.
  scheduler_events abort_live(double now);
  /// Answers every pending drain false.
  void give_up_drains(std::vector<drain_reply>& answers);
  /// Forgets the requests that are done, answers drains when none is left.
  loop_events routed(scheduler_events events);
  void remember_early_cancel(const std::string& id);
  live_settings settings() const;

  scheduler_loop_config config_;
  scheduler core_;
  std::unordered_map<std::string, request_handle> handles_;  ///< request id -> handle, live requests
  std::unordered_map<request_handle, std::string> ids_;
  std::deque<std::string> early_cancels_;  ///< ids cancelled before they were submitted, oldest first
  std::unordered_set<std::string> early_cancel_set_;
  bool planning_ = false;
  /// A request or a step result came after begin_step: an empty plan is
  /// stale (it saw the sequences before), so take_step plans again rather
  /// than leaving the work to the timer.
  bool changed_while_planning_ = false;
  std::map<std::uint64_t, double> in_flight_;      ///< step id -> when it was sent
  std::vector<std::uint64_t> abandon_when_taken_;  ///< failed steps the core drops once planning ends
  bool abandon_planned_ = false;                   ///< a step failed while this one was planned: it never runs
  std::uint64_t step_failures_ = 0;                ///< steps that failed on an intact backend
  step_cost_model step_cost_;
  overlap_mode overlap_ = overlap_mode::alternate;
  double result_received_s_ = -1;  ///< when the last step result arrived, until the next dispatch
  double messaging_s_ = 0;         ///< the last step's round trip less its executor time
  double step_time_ewma_s_ = 0;
  bool healthy_ = true;
  bool kv_failed_ = false;  ///< the KV manager did not answer: it is not asked again
  std::string health_detail_;
  bool draining_ = false;
  std::vector<pending_drain> drains_;
  drain_id next_drain_ = 1;
};

}  // namespace troupe

#pragma once
// The scheduler actor's state and the handlers its two source files share:
// scheduler_actor.cpp follows a step (submit, plan, KV, run, result, route,
// failures, admin), scheduler_drafts.cpp fills a taken step's draft slots
// and drafts ahead. Internal to actors/ (it holds CAF types).

#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/core/draft_ahead.hpp"
#include "actors/core/scheduler_loop.hpp"
#include "actors/reply_timeout.hpp"
#include "actors/scheduler_actor.hpp"

namespace troupe::scheduler_flow {

/// A live request's id and sink, kept so that its stream can be failed
/// should the output shard that streams it die.
struct live_stream {
  std::string id;
  event_sink sink;
};

struct scheduler_state {
  scheduler_setup setup;
  std::unique_ptr<scheduler_loop> loop;
  /// Every admitted request whose end its output shard has not confirmed yet.
  std::unordered_map<request_handle, live_stream> streams;
  std::chrono::steady_clock::time_point start;
  std::unordered_map<drain_id, caf::typed_response_promise<bool>> drains;  ///< drains the loop has not answered
  bool tick_scheduled = false;
  /// The hang check is armed (step_timeout after the oldest step in flight
  /// was sent): steps go to the executor without a CAF timeout, which CAF
  /// would keep in its clock until due (reply_timeout.hpp).
  bool hang_check_armed = false;
  bool drafting = false;   ///< a taken step waits for its drafts: nothing else may be dispatched before it
  std::uint64_t drafting_step = 0;  ///< that step, while `drafting` (the hang check leaves it to the draft timeout)
  draft_ahead_book ahead;  ///< answers of rounds drafted ahead, until the steps they are for
  bool ahead_in_flight = false;
  /// A taken step whose drafts wait for the ahead round in flight (it may
  /// hold them, and the drafter runs one round at a time anyway).
  std::shared_ptr<scheduled_step> awaiting_ahead;
  double awaiting_since = 0;  ///< when awaiting_ahead began to wait, seconds
  /// Device blocks dispatched steps use (their sequences' tables and their
  /// copies), by step, until the step answers: a drafter sharing the
  /// target's KV writes none of them (draft_request::busy_blocks).
  std::unordered_map<std::uint64_t, std::vector<std::int32_t>> busy_blocks;
  static inline const char* name = "scheduler";

  double now() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); }
  detokenizer_actor shard_of(request_handle handle) const { return setup.shards[handle % setup.shards.size()]; }
};

using self_ptr = scheduler_actor::stateful_pointer<scheduler_state>;

/// Plans the next step, unless a taken one still waits for its drafts.
void try_step(self_ptr self);
/// Sends a step whose drafts are in to the executor.
void dispatch(self_ptr self, scheduled_step step);
/// Streams the errors of a failed engine's requests (nothing when `failure` is empty).
void fail_engine(self_ptr self, std::optional<engine_failure> failure);
/// Fills a taken step's draft slots, then dispatches it (scheduler_drafts.cpp).
void fill_drafts(self_ptr self, scheduled_step step);
/// Where drafting ahead is on, asks for the next round of `step`'s
/// sequences while it is verified (scheduler_drafts.cpp); call before the
/// step is sent, while its hooks are valid.
void draft_ahead(self_ptr self, const scheduled_step& step);

}  // namespace troupe::scheduler_flow

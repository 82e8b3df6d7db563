#pragma once
// The scheduler actor: a shell over scheduler_loop (actors/core), which
// wraps the scheduler core and decides everything else: ids, steps in
// flight, overlap, health, drains, knobs. The actor runs the step loop's
// messages (KV plan → executor → results → events to the tokenizer shards),
// keeps the drain promises and the timers, and answers stats, live
// configuration and drain.

#include <vector>

#include <memory>

#include "actors/core/prepare_queue.hpp"
#include "actors/core/scheduler_loop.hpp"
#include "actors/core/speculation.hpp"
#include "actors/messages.hpp"

namespace troupe {

/// What the scheduler actor starts with.
struct scheduler_setup {
  scheduler_loop_config loop;  ///< the core's knobs
  kv_manager_actor kv;
  executor_actor executor;
  std::vector<detokenizer_actor> shards;  ///< output shard of request h: shards[h % size]
  std::shared_ptr<queue_gauges> gauges;   ///< where its queue length goes (the intake's check); may be null
  caf::timespan kv_timeout = std::chrono::seconds(10);  ///< a KV plan answered later fails the engine
  /// How long an output shard may take to answer an `events` batch. The
  /// shards only stream (prompts are prepared elsewhere), so a late answer
  /// means a stuck shard; it loses that batch's stop-string matches
  /// (logged), never the engine, so this is not the KV timeout.
  caf::timespan events_timeout = std::chrono::seconds(10);
  caf::timespan step_timeout = std::chrono::seconds(600);    ///< a step running longer fails the executor
  speculative_method speculation = speculative_method::off;  ///< who fills a planned step's draft slots
  speculator_actor speculator;                               ///< draft, layerskip: the draft model's actor
  /// A round of drafting slower than this is given up (the step runs without drafts).
  caf::timespan draft_timeout = std::chrono::seconds(60);
  /// The drafter runs on compute the target does not use (speculation.hpp,
  /// drafter_has_own_compute): knob speculative_draft_ahead's auto drafts ahead then.
  bool drafter_own_compute = false;
  std::int32_t block_size = 16;  ///< tokens per KV block (the blocks an ahead round may write through)
};

/// Spawns the scheduler actor. `clock_start` is the engine's time origin.
scheduler_actor spawn_scheduler(caf::actor_system& system, scheduler_setup setup,
                                std::chrono::steady_clock::time_point clock_start);

}  // namespace troupe

#pragma once
// The intake actor: the troupe's front door. It checks a request against the
// admission limits, queues its prompt for preparation (the prepare queue:
// bounded globally, per connection and with the scheduler's queue; served
// in turns across connections), hands each idle tokenizer worker one job,
// checks the prepared prompt against the context, and submits it to the
// scheduler. /tokenize and /detokenize calls share the queue. Every failure
// goes to the request's sink as an error event. A cancel removes a queued
// job (it never runs; its choices finish with reason abort; a /tokenize
// call answers "cancelled") or drops a running one's result; cancels and
// admin aborts of requests it no longer holds go on to the scheduler, in
// order after their submission. A prompt still queued when its request's
// timeout ends (counted from arrival) ends as a timed-out request does,
// with reason abort; the scheduler gets what is left of the timeout.
//
// It also supervises both tokenizer pools: it links to and monitors every
// tokenizer worker and output shard, and one that dies for any reason but a
// shutdown is replaced by a fresh one in the same slot (a worker that
// misses encode_timeout too). The scheduler is told of a new shard, so
// that the requests the dead one streamed fail (their detokenizer state is
// gone) while the others continue.

#include <chrono>
#include <memory>
#include <vector>

#include "actors/core/admission.hpp"
#include "actors/core/prepare_queue.hpp"
#include "actors/detokenizer_actor.hpp"
#include "actors/messages.hpp"
#include "actors/tokenizer_actor.hpp"

namespace troupe {

/// What the intake actor starts with.
struct intake_setup {
  admission_limits limits;
  prepare_limits prepare;                   ///< the prepare queue's bounds
  std::shared_ptr<queue_gauges> gauges;     ///< reads the scheduler's queue, writes its own
  std::vector<tokenizer_actor> tokenizers;  ///< the workers that prepare prompts
  tokenizer_setup worker;                   ///< what a restarted worker starts with
  std::vector<detokenizer_actor> shards;    ///< the output shards (the scheduler's too)
  detokenizer_setup shard;                  ///< what a restarted shard starts with
  scheduler_actor scheduler;
  double default_timeout_s = engine_config{}.request_timeout_s;  ///< for requests without one (knob request_timeout)
  /// The engine clock's zero (troupe_handles::clock_start): submissions'
  /// arrival_s and the timeouts of queued prompts count from it.
  std::chrono::steady_clock::time_point clock_start = std::chrono::steady_clock::now();
  /// A worker that has not answered a job after this long is replaced (the job fails).
  caf::timespan encode_timeout = std::chrono::seconds(60);
};

/// Spawns the intake, which links to and monitors the workers and shards.
intake_actor spawn_intake(caf::actor_system& system, intake_setup setup);

}  // namespace troupe

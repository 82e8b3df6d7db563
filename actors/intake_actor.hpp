#pragma once
// The intake actor: the troupe's front door. It checks a request against the
// admission limits, has a tokenizer worker prepare its prompt (round robin),
// checks the prompt against the context, and submits it to the scheduler.
// Every failure goes to the request's sink as an error event.
//
// It also supervises the tokenizer pool: it links to and monitors every
// worker, and one that dies for any reason but a shutdown is replaced by a
// fresh worker in the same slot; the scheduler is told, so that the
// requests the dead worker streamed fail (their detokenizer state is gone)
// while the others continue.

#include <vector>

#include "actors/core/admission.hpp"
#include "actors/messages.hpp"
#include "actors/tokenizer_actor.hpp"

namespace troupe {

/// What the intake actor starts with.
struct intake_setup {
  admission_limits limits;
  std::vector<tokenizer_actor> tokenizers;
  tokenizer_setup worker;  ///< what a restarted worker starts with
  scheduler_actor scheduler;
  double default_timeout_s = engine_config{}.request_timeout_s;  ///< for requests without one (knob request_timeout)
  caf::timespan encode_timeout = std::chrono::seconds(60);
};

/// Spawns the intake, which links to and monitors `setup.tokenizers`.
intake_actor spawn_intake(caf::actor_system& system, intake_setup setup);

}  // namespace troupe

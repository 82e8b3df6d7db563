#pragma once
// The tokenizer actors: a pool sharing one prompt_preparer. Any worker
// prepares prompts; each also streams the output of the requests sharded
// to it (request handle % workers), keeping their detokenizer state. They
// also compile each request's structured-output constraint (a bad one is
// the request's 400, as a bad prompt is). An exception while preparing a
// prompt fails that request only; a worker that dies anyway is restarted by
// the intake (see intake_actor.hpp).

#include <memory>
#include <string>

#include "actors/core/prompt_preparer.hpp"
#include "actors/messages.hpp"

namespace troupe {

/// What every worker of a pool starts with (a restarted one too).
struct tokenizer_setup {
  std::shared_ptr<const prompt_preparer> preparer;
  /// Compiles structured-output constraints (shared by the pool; null:
  /// constrained requests fail).
  std::shared_ptr<constraints::constraint_compiler> constraints;
  /// Test hook (knob test_tokenizer_fault_marker): a prompt containing this
  /// text makes the worker fail while preparing it; empty: never.
  std::string fault_marker;
  /// Test hook (knob test_tokenizer_fault "exit"): that failure escapes the
  /// handler, so the worker dies, instead of failing the request only.
  bool fault_exits = false;
};

/// Spawns one tokenizer worker.
tokenizer_actor spawn_tokenizer(caf::actor_system& system, tokenizer_setup setup);

}  // namespace troupe

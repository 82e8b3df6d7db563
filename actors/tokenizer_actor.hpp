#pragma once
// The tokenizer workers: a pool sharing one prompt_preparer that prepares
// prompts (render, encode, constraint compile: a bad constraint is the
// request's 400, as a bad prompt is) and runs /tokenize and /detokenize
// calls. Each is a detached actor (a thread of its own: a large prompt
// blocks it for a while) fed one job at a time by the intake's prepare
// queue, so nothing waits in its mailbox where a cancel could not reach it.
// An exception while preparing a prompt fails that request only; a worker
// that dies anyway is restarted by the intake (see intake_actor.hpp).
// Output goes through the detokenizer shards (detokenizer_actor.hpp).

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
  /// Test hook (knob test_tokenizer_fault_marker, fault "throw" or "exit"):
  /// a prompt containing this text makes the worker fail while preparing
  /// it; empty: never.
  std::string fault_marker;
  /// Test hook (knob test_tokenizer_fault "exit"): that failure escapes the
  /// handler, so the worker dies, instead of failing the request only.
  bool fault_exits = false;
};

/// Spawns one tokenizer worker (detached).
tokenizer_actor spawn_tokenizer(caf::actor_system& system, tokenizer_setup setup);

}  // namespace troupe

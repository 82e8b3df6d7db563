#pragma once
// The speculator actor: a shell over draft_proposer. For each planned target
// step the scheduler sends it the sequences to draft for; it runs the draft
// model's steps on its own executor (a second execution stream: own threads
// on the CPU, own stream on CUDA) and answers with the drafts and their q
// rows. Rounds are served one at a time, in the order they arrive.

#include <cstdint>

#include "actors/messages.hpp"

namespace troupe {

/// What the speculator starts with.
struct speculator_setup {
  executor_actor draft_executor;                          ///< runs the draft model's logits_only steps
  std::int32_t block_size = 16;                           ///< of the target's (and so the draft's) KV blocks
  std::int64_t vocab_size = 0;                            ///< of the draft model's logits
  caf::timespan step_timeout = std::chrono::seconds(60);  ///< a draft step slower than this fails the round
};

/// Spawns the speculator.
speculator_actor spawn_speculator(caf::actor_system& system, speculator_setup setup);

}  // namespace troupe

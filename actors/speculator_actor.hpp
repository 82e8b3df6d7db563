#pragma once
// The speculator actor: the scheduler's proposer of draft tokens. For each
// planned target step the scheduler sends it the sequences to draft for; it
// hands the whole round to the draft executor (a second execution stream:
// own threads on the CPU, own stream on CUDA), which runs every draft step
// of the round back to back with its draft_proposer and answers with the
// drafts and their q rows. Rounds are served in the order they arrive.

#include <cstdint>

#include "actors/messages.hpp"

namespace troupe {

/// What the speculator starts with.
struct speculator_setup {
  executor_actor draft_executor;                           ///< spawned with spawn_draft_executor
  caf::timespan round_timeout = std::chrono::seconds(60);  ///< a draft round slower than this fails
};

/// Spawns the speculator.
speculator_actor spawn_speculator(caf::actor_system& system, speculator_setup setup);

}  // namespace troupe

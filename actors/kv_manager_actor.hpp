#pragma once
// The kv_manager actor: a thin shell over memory/block_manager.

#include "actors/messages.hpp"
#include "memory/block_manager.hpp"

namespace troupe {

/// Spawns a KV manager owning a block manager built from `config`.
kv_manager_actor spawn_kv_manager(caf::actor_system& system, const block_manager_config& config);

}  // namespace troupe

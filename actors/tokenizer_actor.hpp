#pragma once
// The tokenizer actors: a pool sharing one prompt_preparer. Any worker
// prepares prompts; each also streams the output of the requests sharded
// to it (request handle % workers), keeping their detokenizer state.

#include <memory>

#include "actors/core/prompt_preparer.hpp"
#include "actors/messages.hpp"

namespace troupe {

/// Spawns one tokenizer worker.
tokenizer_actor spawn_tokenizer(caf::actor_system& system, std::shared_ptr<const prompt_preparer> preparer);

}  // namespace troupe

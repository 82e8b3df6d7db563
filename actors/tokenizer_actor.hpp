#pragma once
// The tokenizer actors: a pool sharing one prompt_preparer. Any worker
// prepares prompts; each also streams the output of the requests sharded
// to it (request handle % workers), keeping their detokenizer state. They
// also compile each request's structured-output constraint (a bad one is
// the request's 400, as a bad prompt is).

#include <memory>

#include "actors/core/prompt_preparer.hpp"
#include "actors/messages.hpp"

namespace troupe {

/// Spawns one tokenizer worker. `constraints` compiles structured-output
/// constraints (shared by the pool; null: constrained requests fail).
tokenizer_actor spawn_tokenizer(caf::actor_system& system, std::shared_ptr<const prompt_preparer> preparer,
                                std::shared_ptr<constraints::constraint_compiler> constraints);

}  // namespace troupe

#pragma once
// Embedding the troupe in a caller's own CAF actor system, and receiving a
// request's events as messages to a caller's actor. Installed as
// <troupe/engine_caf.hpp>.
//
//   caf::actor_system_config cfg;
//   troupe::add_message_types(cfg);          // before the system is built
//   caf::actor_system system{cfg};
//   auto engine = troupe::start_engine_in(system, config);
//   troupe::submit_to_actor(*engine, request, my_actor);
//
// `my_actor` then receives troupe::accepted_event, delta_event,
// finished_event and error_event messages.

#include <caf/fwd.hpp>
#include <memory>
#include <string>

#include "troupe/engine.hpp"

namespace troupe {

/// Adds Troupe's message types to `config` (call before creating the system).
void add_message_types(caf::actor_system_config& config);

/// Loads the model and spawns the troupe inside `system`, which must outlive
/// the engine. Throws std::runtime_error like engine::start.
std::unique_ptr<engine> start_engine_in(caf::actor_system& system, const engine_config& config);

/// Submits a request whose events go as messages to `sink`. `target` must
/// come from engine::start or start_engine_in. Returns the request id.
std::string submit_to_actor(engine& target, generation_request request, const caf::actor& sink);

}  // namespace troupe

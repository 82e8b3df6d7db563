#pragma once
// From the layered knob values (defaults < config file < environment <
// command line) to the engine's and the HTTP server's configuration.

#include "api/http/http_server.hpp"
#include "config/config_store.hpp"
#include "troupe/engine.hpp"

namespace troupe::cli {

/// The engine configuration the engine knobs describe.
engine_config to_engine_config(const config_store& knobs);

/// The server configuration the server knobs describe, with request limits
/// taken from `engine`.
api::server_config to_server_config(const config_store& knobs, const engine_config& engine);

}  // namespace troupe::cli

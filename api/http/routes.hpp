#pragma once
// The route table and the plain (non-streaming) endpoints. Beast-free: the
// session hands over an http_request_view and acts on the routed_request.

#include <atomic>
#include <optional>
#include <string>

#include "api/http/http_types.hpp"
#include "api/http/openai_request.hpp"
#include "troupe/engine.hpp"

namespace troupe::api {

/// What the handlers need; owned by the server, shared by every session.
struct route_context {
  troupe::engine* engine = nullptr;
  request_limits limits;
  model_info model;                             ///< engine.info() at server start
  std::string api_key;                          ///< empty: no authentication
  std::string version;                          ///< reported by /version
  std::int64_t started_at = 0;                  ///< unix seconds, for /v1/models
  const std::atomic<bool>* draining = nullptr;  ///< true once the server stopped accepting
};

/// What the session does next: send `reply`, or run `generation`.
struct routed_request {
  http_reply reply;
  std::optional<parsed_generation> generation;
};

/// Finds the route, checks the API key and runs it (plain endpoints) or
/// validates it (generations). Never throws: every failure is an error
/// reply built by the one exception-to-JSON function. May block on the
/// engine (stats, tokenize), so the session runs it off its I/O threads.
routed_request route_request(const http_request_view& request, const route_context& context);

/// For a WebSocket upgrade of `request`: an error reply when the path, the
/// API key or the server state forbids it, nullopt when it may proceed.
std::optional<http_reply> check_websocket_upgrade(const http_request_view& request, const route_context& context);

}  // namespace troupe::api

#pragma once
// The route table and the plain (non-streaming) endpoints. Beast-free: the
// session hands over an http_request_view and acts on the routed_request.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "api/http/http_types.hpp"
#include "api/http/openai_request.hpp"
#include "troupe/engine.hpp"

namespace troupe::api {

struct admin_context;

/// Which requests share cached prompt prefixes (knob prefix_cache_isolation).
enum class cache_isolation : std::uint8_t {
  none,     ///< every request: a client can tell from `cached_tokens` what others sent
  api_key,  ///< requests authenticated by the same API key
  user,     ///< requests with the same `user` field
};

/// Parses "none", "api_key" or "user"; empty (the knob left at its default)
/// is api_key when the server has an API key, else none. Throws
/// std::invalid_argument for another name.
cache_isolation parse_cache_isolation(std::string_view name, bool has_api_key);

/// The cache salt of `tenant` (an API key or a user name) in `domain`
/// ("api_key", "user"): a 64-bit hash, never 0 (the shared partition), so
/// the tenant itself is never carried with the request.
std::uint64_t cache_salt_of(std::string_view domain, std::string_view tenant);

/// What the handlers need; owned by the server, shared by every session.
struct route_context {
  troupe::engine* engine = nullptr;
  std::shared_ptr<live_request_limits> limits;  ///< read once per request: they change at run time
  model_info model;                             ///< engine.info() at server start
  std::string api_key;                          ///< empty: no authentication
  std::vector<std::string> allowed_origins;     ///< cross-origin pages allowed /v1/ws ("*": any)
  cache_isolation isolation = cache_isolation::none;
  std::uint64_t api_key_salt = 0;               ///< cache_salt_of("api_key", api_key) when a key is set, else 0
  std::string version;                          ///< reported by /version
  std::int64_t started_at = 0;                  ///< unix seconds, for /v1/models
  const std::atomic<bool>* draining = nullptr;  ///< true once the server stopped accepting
  admin_context* admin = nullptr;               ///< the /admin endpoints' state; null: they are 404
  bool separate_admin_port = false;             ///< /admin only on the admin listener, nothing else there
  /// Exceptions that escaped an I/O handler (the server's count), for /metrics; null: not reported.
  const std::atomic<std::uint64_t>* handler_exceptions = nullptr;
};

/// True for /admin and every path under it.
bool is_admin_path(std::string_view path);

/// With a separate admin port: the 404 for a path the listener the request
/// arrived on does not serve (/admin on the main port, anything else on the
/// admin port); nullopt when it does.
std::optional<http_reply> wrong_listener_reply(const http_request_view& request, const route_context& context);

/// What the session does next: send `reply`, run `generation`, or have the
/// engine run `text` (engine::run_text_task) and send text_task_reply().
struct routed_request {
  http_reply reply;
  std::optional<parsed_generation> generation;
  std::optional<text_task> text;  ///< /tokenize, /detokenize: validated, not run (the engine's workers run it)
};

/// Finds the route, checks the API key and runs it (plain endpoints) or
/// validates it (generations, /tokenize and /detokenize). Never throws:
/// every failure is an error reply built by the one exception-to-JSON
/// function. May block on the engine (stats), so the session runs it off
/// its I/O threads.
routed_request route_request(const http_request_view& request, const route_context& context);

/// The /tokenize (vLLM's shape: count, max_model_len, tokens, token_strs)
/// or /detokenize (prompt) reply for `task`'s result, or its error.
http_reply text_task_reply(const text_task& task, const text_task_result& result, const route_context& context);

/// Sets the cache salt of every prompt of `generation` as `context.isolation` says.
void apply_cache_isolation(parsed_generation& generation, const route_context& context);

/// For a WebSocket upgrade of `request`: an error reply when the path, the
/// API key or the server state forbids it, nullopt when it may proceed.
std::optional<http_reply> check_websocket_upgrade(const http_request_view& request, const route_context& context);

}  // namespace troupe::api

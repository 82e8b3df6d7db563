#include "api/http/routes.hpp"

#include <boost/json/serialize.hpp>
#include <functional>
#include <stdexcept>
#include <string>

#include "api/http/admin.hpp"
#include "api/http/admin_access.hpp"
#include "api/http/api_error.hpp"
#include "api/http/json_fields.hpp"
#include "api/http/prometheus.hpp"
#include "api/http/request_fields.hpp"
#include "base/utf8.hpp"

namespace troupe::api {

namespace {

using handler = routed_request (*)(const http_request_view&, const route_context&);

routed_request json_reply(const boost::json::value& body, int status = 200) {
  routed_request routed;
  routed.reply.status = status;
  routed.reply.body = boost::json::serialize(body);
  return routed;
}

api_error shutting_down() {
  api_error error(503, "service_unavailable_error", "the server is shutting down", {}, "shutting_down");
  error.retry_after_s = 5;
  return error;
}

void check_model_field(const json_field& fields, const route_context& context) {
  if (const auto model = fields.get_string("model", 1024);
      model && !context.model.served_model_name.empty() && *model != context.model.served_model_name) {
    throw api_error(404, "invalid_request_error", "The model does not exist on this server", "model",
                    "model_not_found");
  }
}

routed_request handle_completions(const http_request_view& request, const route_context& context) {
  if (context.draining->load()) throw shutting_down();
  routed_request routed;
  routed.generation = parse_completions_request(parse_json_object(request.body), *context.limits->get(), context.model);
  apply_cache_isolation(*routed.generation, context);
  return routed;
}

routed_request handle_chat(const http_request_view& request, const route_context& context) {
  if (context.draining->load()) throw shutting_down();
  routed_request routed;
  routed.generation = parse_chat_request(parse_json_object(request.body), *context.limits->get(), context.model);
  apply_cache_isolation(*routed.generation, context);
  return routed;
}

routed_request handle_models(const http_request_view&, const route_context& context) {
  const model_info& model = context.model;
  boost::json::object entry{{"id", model.served_model_name}, {"object", "model"},
                            {"created", context.started_at}, {"owned_by", "troupe"},
                            {"root", model.model_dir},       {"max_model_len", model.max_model_len}};
  entry["tool_call_parser"] = model.tool_call_parser;  // which tool-call format chat output is read in
  return json_reply(boost::json::object{{"object", "list"}, {"data", boost::json::array{std::move(entry)}}});
}

routed_request handle_tokenize(const http_request_view& request, const route_context& context) {
  const boost::json::value body = parse_json_object(request.body);
  const json_field fields = request_fields(body);
  static constexpr auto known = std::to_array<std::string_view>(
      {"model", "prompt", "messages", "add_special_tokens", "add_generation_prompt", "tools", "chat_template_kwargs"});
  fields.reject_unknown(known);
  check_model_field(fields, context);
  text_task task;
  if (fields.has("messages")) {
    if (fields.has("prompt")) throw invalid_field("prompt", "give either 'prompt' or 'messages'");
    const std::optional<json_field> tools = fields.get_array("tools");
    task.type = text_task::kind::encode_chat;
    task.chat_messages_json = read_chat_messages(fields);
    task.chat_tools_json = tools ? boost::json::serialize(tools->value()) : "";
    task.add_generation_prompt = fields.get_bool("add_generation_prompt").value_or(true);
    task.add_special_tokens = false;  // the template already wrote them
  } else {
    const std::optional<std::string> prompt = fields.get_string("prompt", std::string::npos);
    if (!prompt) throw invalid_field("prompt", "'prompt' or 'messages' is required", "missing_field");
    task.text = *prompt;
  }
  task.add_special_tokens = fields.get_bool("add_special_tokens").value_or(task.add_special_tokens);
  routed_request routed;
  routed.text = std::move(task);
  return routed;
}

routed_request handle_detokenize(const http_request_view& request, const route_context& context) {
  const boost::json::value body = parse_json_object(request.body);
  const json_field fields = request_fields(body);
  static constexpr auto known = std::to_array<std::string_view>({"model", "tokens", "skip_special_tokens"});
  fields.reject_unknown(known);
  check_model_field(fields, context);
  const std::optional<json_field> tokens_field = fields.get_array("tokens");
  if (!tokens_field) throw invalid_field("tokens", "'tokens' is required", "missing_field");
  const boost::json::array& tokens = tokens_field->array();
  std::vector<std::int32_t> ids;
  ids.reserve(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::string param = "tokens[" + std::to_string(i) + "]";
    const std::optional<std::int64_t> id = json_integer(tokens[i], /*integral_doubles=*/true);
    if (!id) throw invalid_field(param, "'" + param + "' must be an integer token id", "invalid_type");
    check_token_id(*id, context.model, param);
    ids.push_back(static_cast<std::int32_t>(*id));
  }
  routed_request routed;
  routed.text.emplace();
  routed.text->type = text_task::kind::decode;
  routed.text->ids = std::move(ids);
  routed.text->skip_special_tokens = fields.get_bool("skip_special_tokens").value_or(false);
  return routed;
}

routed_request handle_health(const http_request_view&, const route_context& context) {
  const engine_stats stats = context.engine->stats();
  if (!stats.healthy) {
    throw api_error(503, "service_unavailable_error",
                    "engine unhealthy: " + (stats.health_detail.empty() ? "no detail" : stats.health_detail), {},
                    "unhealthy");
  }
  return json_reply(boost::json::object{{"status", "ok"}});
}

routed_request handle_ready(const http_request_view& request, const route_context& context) {
  if (context.draining->load()) throw shutting_down();
  handle_health(request, context);
  return json_reply(boost::json::object{{"status", "ready"}});
}

routed_request handle_version(const http_request_view&, const route_context& context) {
  return json_reply(boost::json::object{{"version", context.version}});
}

routed_request handle_metrics(const http_request_view&, const route_context& context) {
  routed_request routed;
  routed.reply.content_type = std::string(prometheus_content_type);
  routed.reply.body = render_prometheus(context.engine->stats(), context.model.served_model_name);
  if (context.handler_exceptions != nullptr)
    routed.reply.body += render_server_metrics(context.handler_exceptions->load(), context.model.served_model_name);
  return routed;
}

routed_request handle_ws_without_upgrade(const http_request_view&, const route_context&) {
  throw api_error(426, "invalid_request_error", "/v1/ws expects a WebSocket upgrade", {}, "upgrade_required");
}

struct route {
  std::string_view method;
  std::string_view path;
  bool needs_api_key;
  handler handle;
};

// clang-format off
constexpr route routes[] = {
    {"POST", "/v1/completions",      true,  handle_completions},
    {"POST", "/v1/chat/completions", true,  handle_chat},
    {"GET",  "/v1/models",           true,  handle_models},
    {"GET",  "/v1/ws",               true,  handle_ws_without_upgrade},
    {"POST", "/tokenize",            true,  handle_tokenize},
    {"POST", "/detokenize",          true,  handle_detokenize},
    {"GET",  "/health",              false, handle_health},
    {"GET",  "/ready",               false, handle_ready},
    {"GET",  "/version",             false, handle_version},
    {"GET",  "/metrics",             false, handle_metrics},
};
// clang-format on

void require_api_key(const http_request_view& request, const route_context& context) {
  if (context.api_key.empty()) return;
  constexpr std::string_view bearer = "Bearer ";
  const std::string_view header = request.authorization;
  if (!header.starts_with(bearer) || !same_secret(header.substr(bearer.size()), context.api_key)) {
    throw api_error(401, "authentication_error", "missing or incorrect API key (send 'Authorization: Bearer <key>')",
                    {}, "invalid_api_key");
  }
}

/// The route for the request's path and method; nullptr when none, with
/// `allowed` listing the methods the path has.
const route* find_route(const http_request_view& request, std::string& allowed) {
  for (const route& candidate : routes) {
    if (candidate.path != request.path) continue;
    if (candidate.method == request.method) return &candidate;
    allowed += allowed.empty() ? "" : ", ";
    allowed += candidate.method;
  }
  return nullptr;
}

routed_request run_route(const http_request_view& request, const route_context& context) {
  if (std::optional<http_reply> refusal = wrong_listener_reply(request, context)) return {std::move(*refusal), {}};
  if (context.admin != nullptr && is_admin_path(request.path)) {
    routed_request routed;
    routed.reply = route_admin(request, *context.engine, *context.admin);  // its own token, never the API key
    return routed;
  }
  std::string allowed;
  const route* target = find_route(request, allowed);
  if (target == nullptr && allowed.empty()) {
    throw api_error(404, "invalid_request_error",
                    "no route for " + truncate_utf8(request.method, 16) + " " + truncate_utf8(request.path, 128), {},
                    "not_found");
  }
  if (target == nullptr) {
    routed_request routed;
    routed.reply = error_reply(
        api_error(405, "invalid_request_error", "method not allowed; use " + allowed, {}, "method_not_allowed"));
    routed.reply.headers.push_back({"Allow", allowed});
    return routed;
  }
  if (target->needs_api_key) require_api_key(request, context);
  return target->handle(request, context);
}

}  // namespace

http_reply text_task_reply(const text_task& task, const text_task_result& result, const route_context& context) {
  if (result.error) return error_reply(api_error_from_engine(*result.error));
  if (task.type == text_task::kind::decode) return json_reply(boost::json::object{{"prompt", result.text}}).reply;
  return json_reply(boost::json::object{{"count", result.ids.size()},
                                        {"max_model_len", context.model.max_model_len},
                                        {"tokens", boost::json::array(result.ids.begin(), result.ids.end())},
                                        {"token_strs", nullptr}})
      .reply;
}

cache_isolation parse_cache_isolation(std::string_view name, bool has_api_key) {
  if (name.empty()) return has_api_key ? cache_isolation::api_key : cache_isolation::none;
  if (name == "none") return cache_isolation::none;
  if (name == "api_key") return cache_isolation::api_key;
  if (name == "user") return cache_isolation::user;
  throw std::invalid_argument("unknown prefix cache isolation '" + std::string(name) + "'");
}

std::uint64_t cache_salt_of(std::string_view domain, std::string_view tenant) {
  std::string named(domain);
  named.push_back('\0');  // "api_key" + "x" and "user" + "x" stay apart
  named.append(tenant);
  const std::uint64_t salt = std::hash<std::string>{}(named);
  return salt == 0 ? 1 : salt;
}

void apply_cache_isolation(parsed_generation& generation, const route_context& context) {
  for (generation_request& prompt : generation.prompts) {
    switch (context.isolation) {
      case cache_isolation::none:
        break;
      case cache_isolation::api_key:
        prompt.cache_salt = context.api_key_salt;
        break;
      case cache_isolation::user:
        prompt.cache_salt = cache_salt_of("user", prompt.user);
        break;
    }
  }
}

bool is_admin_path(std::string_view path) { return path == "/admin" || path.starts_with("/admin/"); }

std::optional<http_reply> wrong_listener_reply(const http_request_view& request, const route_context& context) {
  if (!context.separate_admin_port || is_admin_path(request.path) == request.on_admin_port) return std::nullopt;
  const std::string where = request.on_admin_port ? "the admin port serves /admin only"
                                                  : "the admin endpoints are served on the admin port only";
  return error_reply(api_error(404, "invalid_request_error",
                               "no route for " + truncate_utf8(request.path, 128) + ": " + where, {}, "not_found"));
}

routed_request route_request(const http_request_view& request, const route_context& context) {
  try {
    return run_route(request, context);
  } catch (...) {
    routed_request routed;
    routed.reply = error_reply(current_exception_as_api_error());
    return routed;
  }
}

std::optional<http_reply> check_websocket_upgrade(const http_request_view& request, const route_context& context) {
  try {
    if (request.path != "/v1/ws") {
      throw api_error(404, "invalid_request_error", "WebSocket is served at /v1/ws only", {}, "not_found");
    }
    check_request_origin(request, context.allowed_origins);
    require_api_key(request, context);
    if (context.draining->load()) throw shutting_down();
    return std::nullopt;
  } catch (...) {
    return error_reply(current_exception_as_api_error());
  }
}

}  // namespace troupe::api

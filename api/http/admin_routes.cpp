// The /admin endpoints: access, then one handler per path. Every change is
// recorded in the audit log (and the server log) with who made it.

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "api/http/admin.hpp"
#include "api/http/admin_access.hpp"
#include "api/http/admin_snapshot.hpp"
#include "api/http/api_error.hpp"
#include "api/http/json_fields.hpp"
#include "base/json_field.hpp"

namespace troupe::api {

namespace {

http_reply json_reply(const boost::json::value& body) {
  http_reply reply;
  reply.body = boost::json::serialize(body);
  return reply;
}

api_error method_not_allowed(std::string_view allowed) {
  return api_error(405, "invalid_request_error", "method not allowed; use " + std::string(allowed), {},
                   "method_not_allowed");
}

http_reply config_reply(engine& engine, admin_context& admin) {
  const engine_stats stats = engine.stats();
  const std::lock_guard lock(admin.knobs_mutex);
  boost::json::object body = admin_config_json(stats.settings, admin.knobs);
  body["stats"] = {{"healthy", stats.healthy},
                   {"health_detail", stats.health_detail},
                   {"num_requests_running", stats.num_requests_running},
                   {"num_requests_waiting", stats.num_requests_waiting},
                   {"num_requests_swapped", stats.num_requests_swapped},
                   {"kv_cache_usage", stats.kv_cache_usage},
                   {"host_kv_cache_usage", stats.host_kv_cache_usage},
                   {"kv_blocks_total", stats.kv_blocks_total},
                   {"steps", stats.steps}};
  return json_reply(body);
}

/// Records one knob change in the runtime store and the audit log.
void record_change(admin_context& admin, const std::string& who, const std::string& name, const std::string& from,
                   const std::string& to) {
  admin.knobs.set(name, to, config_source::runtime);
  admin.audit.record(who, "config", name, from, to);
}

http_reply update_config(const http_request_view& request, engine& engine, admin_context& admin,
                         const std::string& who) {
  const admin_change change = parse_settings_change(parse_json_object(request.body));
  const auto before = live_setting_values(engine.stats().settings);
  if (std::string refused = engine.configure(change.engine); !refused.empty()) {
    throw api_error(409, "invalid_request_error", "the engine refused the change: " + refused, {}, "setting_refused");
  }
  {
    const std::lock_guard lock(admin.knobs_mutex);
    for (const auto& [name, value] : changed_values(change.engine)) {
      std::string from;
      for (const auto& [known, text] : before) from = known == name ? text : from;
      record_change(admin, who, name, from, value);
    }
    for (const auto& [name, value] : change.server)
      record_change(admin, who, name, admin.knobs.get_as_text(name), value);
    if (admin.limits)
      admin.limits->set(limits_after(*admin.limits->get(), change.engine, admin.knobs, admin.model_sampling));
  }
  return config_reply(engine, admin);
}

// Writes the live settings into the config file (other entries kept), via a
// temporary file renamed over it so a crash never leaves half a file.
http_reply save_config(engine& engine, admin_context& admin, const std::string& who) {
  if (admin.config_file.empty()) {
    throw api_error(409, "invalid_request_error", "the server was started without --config-file: nowhere to save", {},
                    "no_config_file");
  }
  boost::json::object document;
  if (std::ifstream in(admin.config_file); in) {
    std::stringstream text;
    text << in.rdbuf();
    boost::system::error_code error;
    boost::json::value parsed = boost::json::parse(text.str(), error);
    if (error || !parsed.is_object())
      throw api_error(409, "invalid_request_error", admin.config_file + ": not a JSON object; not overwritten", {},
                      "config_file_invalid");
    document = std::move(parsed.as_object());
  }
  const engine_stats stats = engine.stats();
  boost::json::object settings;
  {
    const std::lock_guard lock(admin.knobs_mutex);
    settings = admin_config_json(stats.settings, admin.knobs).at("settings").as_object();
  }
  for (const auto& [name, value] : settings) document[name] = value;
  const std::string temporary = admin.config_file + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << boost::json::serialize(document) << "\n";
    if (!out) throw api_error(500, "server_error", "cannot write " + temporary, {}, "config_save_failed");
  }
  std::error_code error;
  std::filesystem::rename(temporary, admin.config_file, error);
  if (error) throw api_error(500, "server_error", "cannot replace " + admin.config_file, {}, "config_save_failed");
  admin.audit.record(who, "save", admin.config_file, "", std::to_string(settings.size()) + " live settings");
  return json_reply(boost::json::object{{"saved", admin.config_file}, {"settings", settings}});
}

http_reply list_requests(engine& engine) {
  boost::json::array table;
  for (const request_info& request : engine.list_requests()) table.push_back(request_info_json(request));
  return json_reply(boost::json::object{{"requests", std::move(table)}});
}

/// Percent-decodes a path segment ("a%2Fb" -> "a/b"); malformed escapes stay as they are.
std::string decode_segment(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(std::string(text.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

api_error unknown_request(const std::string& id) {
  return api_error(404, "invalid_request_error", "no live request '" + id + "'", {}, "request_not_found");
}

http_reply abort_request(engine& engine, admin_context& admin, const std::string& id, const std::string& who) {
  if (!engine.abort(id)) throw unknown_request(id);
  admin.audit.record(who, "abort", id, "", "abort");
  return json_reply(boost::json::object{{"id", id}, {"aborted", true}});
}

http_reply reprioritise(const http_request_view& request, engine& engine, admin_context& admin, const std::string& id,
                        const std::string& who) {
  const boost::json::object body = parse_json_object(request.body);
  const boost::json::value* given = body.if_contains("priority");
  const std::optional<std::int64_t> priority = given ? json_integer(*given, /*integral_doubles=*/false) : std::nullopt;
  if (!priority || *priority < INT32_MIN || *priority > INT32_MAX)
    throw invalid_field("priority", "'priority' must be an integer in [-2147483648, 2147483647]", "invalid_type");
  std::string from;
  for (const request_info& info : engine.list_requests()) from = info.id == id ? std::to_string(info.priority) : from;
  if (std::string problem = engine.set_priority(id, static_cast<int>(*priority)); !problem.empty())
    throw unknown_request(id);
  admin.audit.record(who, "priority", id, from, std::to_string(*priority));
  return json_reply(boost::json::object{{"id", id}, {"priority", *priority}});
}

// POST /admin/requests/{id}/abort and /priority.
http_reply request_action(const http_request_view& request, engine& engine, admin_context& admin,
                          const std::string& who) {
  constexpr std::string_view prefix = "/admin/requests/";
  const std::string_view rest = std::string_view(request.path).substr(prefix.size());
  const std::size_t slash = rest.rfind('/');
  if (slash == std::string_view::npos || slash == 0)
    throw api_error(404, "invalid_request_error", "use /admin/requests/{id}/abort or /priority", {}, "not_found");
  const std::string id = decode_segment(rest.substr(0, slash));
  const std::string_view action = rest.substr(slash + 1);
  if (action != "abort" && action != "priority")
    throw api_error(404, "invalid_request_error", "use /admin/requests/{id}/abort or /priority", {}, "not_found");
  if (request.method != "POST") throw method_not_allowed("POST");
  return action == "abort" ? abort_request(engine, admin, id, who) : reprioritise(request, engine, admin, id, who);
}

http_reply snapshot(engine& engine, admin_context& admin) {
  engine_stats stats = engine.stats();
  const auto requests = engine.list_requests();
  const std::lock_guard lock(admin.snapshot_mutex);
  const auto now = std::chrono::steady_clock::now();
  const double interval = admin.last_snapshot ? std::chrono::duration<double>(now - admin.last_snapshot_at).count() : 0;
  http_reply reply =
      json_reply(admin_snapshot_json(stats, admin.last_snapshot ? &*admin.last_snapshot : nullptr, interval, requests));
  admin.last_snapshot = std::move(stats);
  admin.last_snapshot_at = now;
  return reply;
}

http_reply page() {
  http_reply reply;
  reply.content_type = "text/html; charset=utf-8";
  reply.body = std::string(admin_page_html());
  reply.headers.push_back({"Cache-Control", "no-store"});
  return reply;
}

/// GET-only paths and their handlers.
http_reply read_only(const http_request_view& request, engine& engine, admin_context& admin) {
  if (request.path == "/admin/requests") return list_requests(engine);
  if (request.path == "/admin/audit") return json_reply(boost::json::object{{"entries", admin.audit.to_json()}});
  if (request.path == "/admin/snapshot") return snapshot(engine, admin);
  throw api_error(404, "invalid_request_error", "no admin route " + request.path.substr(0, 128), {}, "not_found");
}

}  // namespace

http_reply route_admin(const http_request_view& request, engine& engine, admin_context& admin) {
  if (!admin.enabled)
    throw api_error(404, "invalid_request_error", "the admin endpoints are disabled (--no-admin)", {}, "not_found");
  if (request.path == "/admin" || request.path == "/admin/") {
    // The page holds no data; with a token it must load to ask for it.
    if (admin.token.empty()) authorize_admin(request, admin.token, admin.allowed_origins);
    if (request.method != "GET") throw method_not_allowed("GET");
    return page();
  }
  const std::string who = authorize_admin(request, admin.token, admin.allowed_origins);
  if (request.path == "/admin/config") {
    if (request.method == "GET") return config_reply(engine, admin);
    if (request.method == "PATCH") return update_config(request, engine, admin, who);
    throw method_not_allowed("GET, PATCH");
  }
  if (request.path == "/admin/config/save") {
    if (request.method != "POST") throw method_not_allowed("POST");
    return save_config(engine, admin, who);
  }
  if (request.path.starts_with("/admin/requests/")) return request_action(request, engine, admin, who);
  if (request.path == "/admin/stream")
    throw api_error(426, "invalid_request_error", "/admin/stream expects a WebSocket upgrade", {}, "upgrade_required");
  if (request.method != "GET") throw method_not_allowed("GET");
  return read_only(request, engine, admin);
}

std::variant<double, http_reply> admin_stream_upgrade(const http_request_view& request, admin_context* admin) {
  try {
    if (admin == nullptr)
      throw api_error(404, "invalid_request_error", "the admin endpoints are disabled (--no-admin)", {}, "not_found");
    authorize_admin(request, admin->token, admin->allowed_origins);
    double interval = admin->stream_interval_s;
    for (std::string_view query = request.query; !query.empty();) {
      const std::size_t end = query.find('&');
      const std::string_view pair = query.substr(0, end);
      if (pair.starts_with("interval=")) {
        const std::string text(pair.substr(9));
        char* stop = nullptr;
        const double given = std::strtod(text.c_str(), &stop);
        if (text.empty() || *stop != '\0' || !(given >= 0.05 && given <= 60))
          throw invalid_field("interval", "'interval' must be a number of seconds in [0.05, 60]");
        interval = given;
      }
      if (end == std::string_view::npos) break;
      query.remove_prefix(end + 1);
    }
    return interval;
  } catch (...) {
    return error_reply(current_exception_as_api_error());
  }
}

}  // namespace troupe::api

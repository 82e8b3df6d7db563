#pragma once
// The operator's console: GET /admin (a self-contained page) and the /admin
// API (every knob, live changes, the request table and its actions, the
// audit log, snapshots for the charts, write-back to the config file).
// Beast-free; the WebSocket /admin/stream lives in admin_stream_session.cpp.

#include <boost/json/object.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "api/http/admin_audit.hpp"
#include "api/http/http_server.hpp"
#include "api/http/http_types.hpp"
#include "config/config_store.hpp"
#include "troupe/engine.hpp"

namespace troupe::api {

/// What the admin endpoints need besides the engine; one per server.
struct admin_context {
  /// From the server's knobs (`knobs`: every knob's value at start, with its source).
  admin_context(const config_store& knobs, bool enabled, std::string token, std::string config_file,
                double stream_interval_s, std::size_t audit_entries);

  bool enabled = true;                          ///< false: every /admin path is 404
  std::string token;                            ///< empty: loopback clients only
  std::vector<std::string> allowed_origins;     ///< cross-origin pages allowed here ("*": any)
  std::string config_file;                      ///< where POST /admin/config/save writes (empty: refused)
  double stream_interval_s = 1;                 ///< /admin/stream's default period
  audit_log audit;                              ///< who changed what
  std::mutex knobs_mutex;                       ///< guards `knobs`
  config_store knobs;                           ///< values at start, runtime changes recorded with source runtime
  std::shared_ptr<live_request_limits> limits;  ///< the server's request limits; a PATCH replaces them
  model_sampling_defaults model_sampling;       ///< generation_config.json's, below the default_* knobs
  std::mutex snapshot_mutex;                    ///< guards the last GET /admin/snapshot's stats
  std::optional<engine_stats> last_snapshot;
  std::chrono::steady_clock::time_point last_snapshot_at;
};

/// The admin state for a server with `config` (null when admin is disabled).
/// Throws std::runtime_error when /admin would be open beyond loopback
/// without a token (admin_startup_problem).
std::unique_ptr<admin_context> make_admin_context(const server_config& config);

/// The console page: HTML with inline script and style, no external assets.
std::string_view admin_page_html();
/// The console's script (admin_page_script.cpp), inlined into the page.
std::string_view admin_page_script();

/// The live settings as knob name → value text (the knobs PATCH may change).
std::vector<std::pair<std::string, std::string>> live_setting_values(const live_settings& settings);

/// GET /admin/config: `{"knobs": [{name, value, default, kind, min, max,
/// choices, unit, help, live, group, source, secret}...], "settings": {live
/// knob: value}, "live_settings": [names]}`. Live knobs show the engine's
/// value; secret knobs show only whether they are set.
boost::json::object admin_config_json(const live_settings& settings, const config_store& knobs);

/// A validated PATCH /admin/config body: the engine's live knobs, and the
/// server's (the default_* sampling knobs) as name → value text.
struct admin_change {
  settings_change engine;
  std::vector<std::pair<std::string, std::string>> server;
};

/// Validates a PATCH /admin/config body against the knob registry: every
/// field a known live knob with a value of its type, range and choices.
/// Throws api_error 400 naming the first bad field (restart-only knobs
/// included); an empty body changes nothing.
admin_change parse_settings_change(const boost::json::object& body);

/// The engine knobs a change sets, as name → new value text (for the audit log).
std::vector<std::pair<std::string, std::string>> changed_values(const settings_change& change);

/// True for a live knob the server applies itself (group server: the
/// default_* sampling knobs); the engine's live knobs are live_settings fields.
bool is_server_live_knob(const knob_spec& knob);

/// The request limits after `change`: the engine's limit fields applied to
/// `current`, the sampling defaults resolved anew from `knobs` (holding the
/// changed default_* knobs) over `model`.
request_limits limits_after(const request_limits& current, const settings_change& change, const config_store& knobs,
                            const model_sampling_defaults& model);

/// The admin endpoints (every path under /admin). Throws api_error; never
/// blocks longer than the engine's bounded waits.
http_reply route_admin(const http_request_view& request, engine& engine, admin_context& admin);

/// For a WebSocket upgrade at /admin/stream: the snapshot period in seconds
/// (`?interval=` within [0.05, 60], else the server's default), or the
/// error reply (admin disabled: 404; 401 or 403 as for every admin path).
std::variant<double, http_reply> admin_stream_upgrade(const http_request_view& request, admin_context* admin);

}  // namespace troupe::api

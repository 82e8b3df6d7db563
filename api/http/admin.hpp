#pragma once
// The operator's console: GET /admin (a self-contained page), GET and PATCH
// /admin/config (live settings and the gauges the page charts). Beast-free.

#include <boost/json/object.hpp>
#include <string_view>

#include "troupe/engine.hpp"

namespace troupe::api {

/// The console page: HTML with inline script and style, no external assets.
std::string_view admin_page_html();

/// `{"settings": {...}, "live_settings": [...], "knobs": {...}, "stats": {...}}`
/// for GET /admin/config: the live knobs' values, their names, each one's
/// help, unit, range and choices from the registry, and the gauges.
boost::json::object admin_config_json(const engine_stats& stats);

/// Validates a PATCH /admin/config body against the knob registry (live
/// knobs only, their types, ranges and choices). Throws api_error 400
/// naming the field; an empty body changes nothing.
settings_change parse_settings_change(const boost::json::object& body);

}  // namespace troupe::api

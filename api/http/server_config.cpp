// server_config (http_server.hpp) from the knob registry: the one place the
// server knobs become the server's configuration.

#include "api/http/admin_access.hpp"
#include "api/http/http_server.hpp"
#include "config/config_store.hpp"

namespace troupe::api {

namespace {

/// The knob's value, or empty when it was left at its default (see server_config).
std::string cache_isolation_of(const config_store& knobs) {
  if (knobs.source_of("prefix_cache_isolation") == config_source::defaults) return {};
  return knobs.get_text("prefix_cache_isolation");
}

int as_int(const config_store& knobs, std::string_view name) { return static_cast<int>(knobs.get_int(name)); }

std::chrono::milliseconds as_ms(const config_store& knobs, std::string_view name) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(knobs.get_real(name) * 1000.0));
}

}  // namespace

server_config::server_config() : server_config(knob_defaults(), engine_config{}) {}

server_config::server_config(const config_store& knobs, const engine_config& engine)
    : host(knobs.get_text("host")),
      port(static_cast<std::uint16_t>(knobs.get_int("port"))),
      io_threads(as_int(knobs, "io_threads")),
      worker_threads(as_int(knobs, "worker_threads")),
      max_body_bytes(static_cast<std::size_t>(knobs.get_int("max_body_bytes"))),
      max_header_bytes(static_cast<std::uint32_t>(knobs.get_int("max_header_bytes"))),
      idle_timeout(as_ms(knobs, "idle_timeout")),
      read_timeout(as_ms(knobs, "read_timeout")),
      write_timeout(as_ms(knobs, "write_timeout")),
      max_connections(as_int(knobs, "max_connections")),
      api_key(knobs.get_text("api_key")),
      prefix_cache_isolation(cache_isolation_of(knobs)),
      max_stream_queue_bytes(static_cast<std::size_t>(knobs.get_int("stream_queue_bytes"))),
      max_ws_requests(as_int(knobs, "max_ws_requests")),
      limits(request_limits::from_engine_config(engine)),
      default_sampling(sampling_default_knobs(knobs)),
      admin_enabled(knobs.get_bool("admin")),
      admin_port(as_int(knobs, "admin_port")),
      admin_token(knobs.get_text("admin_token")),
      allowed_origins(parse_origin_list(knobs.get_text("allowed_origins"))),
      config_file(knobs.get_text("config")),
      admin_stream_interval_s(knobs.get_real("admin_stream_interval")),
      admin_audit_entries(as_int(knobs, "admin_audit_entries")),
      knobs(std::make_shared<const config_store>(knobs)),
      test_io_fault_marker(knobs.get_text("test_io_fault_marker")) {}

}  // namespace troupe::api

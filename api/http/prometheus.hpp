#pragma once
// Prometheus text exposition (format 0.0.4) of the engine's statistics, with
// the metric names of issue #5 (vLLM's, under the `troupe:` prefix).

#include <cstdint>
#include <string>
#include <string_view>

#include "troupe/engine.hpp"

namespace troupe::api {

/// The Content-Type of the exposition.
inline constexpr std::string_view prometheus_content_type = "text/plain; version=0.0.4; charset=utf-8";

/// Renders every metric with `# HELP` and `# TYPE` lines; each sample has
/// the label model_name="<model_name>". Histograms render cumulative
/// `_bucket{le=…}` lines ending in le="+Inf", then `_sum` and `_count`.
std::string render_prometheus(const engine_stats& stats, std::string_view model_name);

/// The server's own counters, in the same form: `handler_exceptions` that
/// escaped an I/O handler (each closed its connection).
std::string render_server_metrics(std::uint64_t handler_exceptions, std::string_view model_name);

/// A label value escaped for the exposition (backslash, quote, newline).
std::string escape_label_value(std::string_view value);

/// A sample value: shortest round-trip decimal, or +Inf / -Inf / NaN.
std::string format_metric_value(double value);

}  // namespace troupe::api

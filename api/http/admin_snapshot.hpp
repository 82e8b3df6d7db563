#pragma once
// What the console charts: one snapshot of the engine's gauges, the rates
// and latency quantiles over the interval since the previous snapshot, and
// the request table. Pure: built from two engine_stats and the table.

#include <boost/json/object.hpp>
#include <vector>

#include "troupe/engine.hpp"

namespace troupe::api {

/// The `q` quantile (0..1) of the observations in `now` that are not in
/// `before` (null: all of them), interpolated within its bucket as
/// Prometheus' histogram_quantile does; a value in the +Inf bucket reads as
/// the last finite bound. Negative when there is no observation.
double histogram_quantile(const histogram_snapshot& now, const histogram_snapshot* before, double q);

/// One request as GET /admin/requests and the snapshots list it.
boost::json::object request_info_json(const request_info& request);

/// The snapshot: `{"time", "interval_s", "gauges": {...}, "rates": {...},
/// "latency": {...}, "totals": {...}, "settings": {...}, "requests": [...]}`.
/// Rates and quantiles cover `interval_s` since `before` (null: they are
/// null); quantiles are null when the interval has no observation.
boost::json::object admin_snapshot_json(const engine_stats& now, const engine_stats* before, double interval_s,
                                        const std::vector<request_info>& requests);

}  // namespace troupe::api

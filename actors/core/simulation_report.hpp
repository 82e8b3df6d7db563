#pragma once
// Text, CSV and JSON renderings of simulator results (for `troupe simulate`
// and tools/bench/plot_simulation.py).

#include <string>
#include <vector>

#include "actors/core/simulation.hpp"

namespace troupe {

/// A fixed-width table: one row per run with TTFT / TPOT / JCT percentiles
/// (milliseconds), deadline misses, preemptions and tenant shares.
std::string format_simulation_table(const std::vector<simulation_result>& results);

/// One CSV row per run with the same columns as the table (seconds).
std::string simulation_csv(const std::vector<simulation_result>& results);

/// JSON: {"runs": [{policy, preemption, summaries..., "requests": [{...}]}]}.
std::string simulation_json(const std::vector<simulation_result>& results);

}  // namespace troupe

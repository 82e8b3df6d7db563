#include "api/http/admin_snapshot.hpp"

#include <boost/json/array.hpp>
#include <chrono>

#include "api/http/admin.hpp"

namespace troupe::api {

namespace {

std::uint64_t preemptions_of(const engine_stats& stats) {
  std::uint64_t total = 0;
  for (const auto& [kind, count] : stats.preemptions) total += count;
  return total;
}

/// `after - before` per second, or null without a previous snapshot.
boost::json::value rate(double after, double before, double interval_s, bool have_before) {
  if (!have_before || interval_s <= 0) return nullptr;
  return (after - before) / interval_s;
}

/// `numerator / denominator` of deltas, or null when the denominator did not move.
boost::json::value ratio(double numerator, double denominator) {
  if (denominator <= 0) return nullptr;
  return numerator / denominator;
}

boost::json::value quantile(const histogram_snapshot& now, const histogram_snapshot* before, double q) {
  const double value = histogram_quantile(now, before, q);
  if (value < 0) return nullptr;
  return value;
}

boost::json::object rates_json(const engine_stats& now, const engine_stats* before, double interval_s) {
  const engine_stats zero;
  const engine_stats& b = before ? *before : zero;
  const bool have = before != nullptr;
  const auto delta = [](auto after, auto earlier) { return static_cast<double>(after) - static_cast<double>(earlier); };
  const double steps = delta(now.steps, b.steps);
  const double drafts = delta(now.spec_decode_num_draft_tokens, b.spec_decode_num_draft_tokens);
  return {
      {"prompt_tokens_per_s", rate(now.prompt_tokens, b.prompt_tokens, interval_s, have)},
      {"generation_tokens_per_s", rate(now.generation_tokens, b.generation_tokens, interval_s, have)},
      {"steps_per_s", rate(now.steps, b.steps, interval_s, have)},
      {"preemptions_per_s", rate(preemptions_of(now), preemptions_of(b), interval_s, have)},
      {"tokens_per_step", have ? ratio(delta(now.iteration_tokens.sum, b.iteration_tokens.sum),
                                       delta(now.iteration_tokens.count, b.iteration_tokens.count))
                               : boost::json::value(nullptr)},
      {"batch_size", have ? ratio(delta(now.step_sequences, b.step_sequences), steps) : boost::json::value(nullptr)},
      {"prefix_hit_rate", have ? ratio(delta(now.prefix_cache_hits, b.prefix_cache_hits),
                                       delta(now.prefix_cache_queries, b.prefix_cache_queries))
                               : boost::json::value(nullptr)},
      {"spec_acceptance",
       have ? ratio(delta(now.spec_decode_num_accepted_tokens, b.spec_decode_num_accepted_tokens), drafts)
            : boost::json::value(nullptr)},
  };
}

}  // namespace

double histogram_quantile(const histogram_snapshot& now, const histogram_snapshot* before, double q) {
  const std::size_t buckets = now.bucket_counts.size();
  const auto count_at = [&](std::size_t i) {
    const std::uint64_t earlier = before && i < before->bucket_counts.size() ? before->bucket_counts[i] : 0;
    return static_cast<double>(now.bucket_counts[i] - std::min(now.bucket_counts[i], earlier));
  };
  if (buckets == 0 || now.upper_bounds.empty()) return -1;
  const double total = count_at(buckets - 1);
  if (total <= 0) return -1;
  const double rank = q * total;
  double below = 0;
  for (std::size_t i = 0; i < buckets; ++i) {
    const double cumulative = count_at(i);
    if (cumulative < rank || cumulative <= 0) {
      below = cumulative;
      continue;
    }
    if (i >= now.upper_bounds.size()) return now.upper_bounds.back();
    const double lower = i == 0 ? 0.0 : now.upper_bounds[i - 1];
    const double upper = now.upper_bounds[i];
    const double in_bucket = cumulative - below;
    return lower + (upper - lower) * (in_bucket > 0 ? (rank - below) / in_bucket : 1.0);
  }
  return now.upper_bounds.back();
}

boost::json::object request_info_json(const request_info& r) {
  boost::json::object out{{"id", r.id},
                          {"state", r.state},
                          {"priority", r.priority},
                          {"user", r.user},
                          {"mlfq_level", r.mlfq_level},
                          {"n", r.n},
                          {"prompt_tokens", r.prompt_tokens},
                          {"generated_tokens", r.generated_tokens},
                          {"device_blocks", r.device_blocks},
                          {"host_blocks", r.host_blocks},
                          {"age_s", r.age_s}};
  out["deadline_s"] = r.deadline_s ? boost::json::value(*r.deadline_s) : boost::json::value(nullptr);
  out["ttft_s"] = r.ttft_s ? boost::json::value(*r.ttft_s) : boost::json::value(nullptr);
  return out;
}

boost::json::object admin_snapshot_json(const engine_stats& now, const engine_stats* before, double interval_s,
                                        const std::vector<request_info>& requests) {
  boost::json::array table;
  for (const request_info& request : requests) table.push_back(request_info_json(request));
  boost::json::object preemptions;
  for (const auto& [kind, count] : now.preemptions) preemptions[kind] = count;
  boost::json::object settings;
  for (const auto& [name, value] : live_setting_values(now.settings)) settings[name] = value;
  const histogram_snapshot* ttft_before = before ? &before->time_to_first_token_s : nullptr;
  const histogram_snapshot* itl_before = before ? &before->inter_token_latency_s : nullptr;
  return {
      {"time", std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count()},
      {"interval_s", interval_s},
      {"gauges",
       {{"healthy", now.healthy},
        {"health_detail", now.health_detail},
        {"running", now.num_requests_running},
        {"waiting", now.num_requests_waiting},
        {"swapped", now.num_requests_swapped},
        {"kv_device_usage", now.kv_cache_usage},
        {"kv_host_usage", now.host_kv_cache_usage},
        {"kv_blocks_total", now.kv_blocks_total}}},
      {"rates", rates_json(now, before, interval_s)},
      {"latency",
       {{"ttft_p50_s", quantile(now.time_to_first_token_s, ttft_before, 0.5)},
        {"ttft_p99_s", quantile(now.time_to_first_token_s, ttft_before, 0.99)},
        {"itl_p50_s", quantile(now.inter_token_latency_s, itl_before, 0.5)},
        {"itl_p99_s", quantile(now.inter_token_latency_s, itl_before, 0.99)}}},
      {"totals",
       {{"prompt_tokens", now.prompt_tokens},
        {"generation_tokens", now.generation_tokens},
        {"steps", now.steps},
        {"preemptions", std::move(preemptions)},
        {"spec_draft_tokens", now.spec_decode_num_draft_tokens},
        {"spec_accepted_tokens", now.spec_decode_num_accepted_tokens}}},
      {"settings", std::move(settings)},
      {"requests", std::move(table)},
  };
}

}  // namespace troupe::api

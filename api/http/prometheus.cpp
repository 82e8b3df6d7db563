#include "api/http/prometheus.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace troupe::api {

namespace {

/// Appends one metric family; every sample gets the model_name label first.
class exposition {
 public:
  explicit exposition(std::string_view model_name)
      : model_label_("model_name=\"" + escape_label_value(model_name) + "\"") {}

  void family(std::string_view name, std::string_view type, std::string_view help) {
    text_ += "# HELP ";
    text_ += name;
    text_ += ' ';
    text_ += help;  // our own constant texts: nothing to escape
    text_ += "\n# TYPE ";
    text_ += name;
    text_ += ' ';
    text_ += type;
    text_ += '\n';
  }

  void sample(std::string_view name, double value, std::string_view extra_labels = {}) {
    text_ += name;
    text_ += '{';
    text_ += model_label_;
    if (!extra_labels.empty()) {
      text_ += ',';
      text_ += extra_labels;
    }
    text_ += "} ";
    text_ += format_metric_value(value);
    text_ += '\n';
  }

  void gauge(std::string_view name, std::string_view help, double value) {
    family(name, "gauge", help);
    sample(name, value);
  }

  void counter(std::string_view name, std::string_view help, double value) {
    family(name, "counter", help);
    sample(name, value);
  }

  void labelled_counter(std::string_view name, std::string_view help, std::string_view label,
                        const std::map<std::string, std::uint64_t>& values) {
    family(name, "counter", help);
    for (const auto& [key, value] : values) {
      sample(name, static_cast<double>(value), std::string(label) + "=\"" + escape_label_value(key) + "\"");
    }
  }

  /// One sample per index of `values`, labelled with the index, in index order.
  void indexed_counter(std::string_view name, std::string_view help, std::string_view label,
                       const std::vector<std::uint64_t>& values) {
    family(name, "counter", help);
    for (std::size_t i = 0; i < values.size(); ++i)
      sample(name, static_cast<double>(values[i]), std::string(label) + "=\"" + std::to_string(i) + "\"");
  }

  void histogram(std::string_view name, std::string_view help, const histogram_snapshot& snapshot) {
    family(name, "histogram", help);
    const std::string bucket = std::string(name) + "_bucket";
    // Cumulative counts must not decrease; clamp whatever the snapshot says.
    std::uint64_t running = 0;
    for (std::size_t i = 0; i < snapshot.upper_bounds.size(); ++i) {
      if (i < snapshot.bucket_counts.size()) running = std::max(running, snapshot.bucket_counts[i]);
      running = std::min(running, snapshot.count);
      sample(bucket, static_cast<double>(running), "le=\"" + format_metric_value(snapshot.upper_bounds[i]) + "\"");
    }
    sample(bucket, static_cast<double>(snapshot.count), "le=\"+Inf\"");
    sample(std::string(name) + "_sum", snapshot.sum);
    sample(std::string(name) + "_count", static_cast<double>(snapshot.count));
  }

  std::string take() { return std::move(text_); }

 private:
  std::string model_label_;
  std::string text_;
};

}  // namespace

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string format_metric_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

std::string render_prometheus(const engine_stats& stats, std::string_view model_name) {
  exposition out(model_name);
  out.gauge("troupe:num_requests_running", "Requests running (prefilling or decoding).", stats.num_requests_running);
  out.gauge("troupe:num_requests_waiting", "Requests waiting to be scheduled.", stats.num_requests_waiting);
  out.gauge("troupe:num_requests_swapped", "Requests whose KV blocks are swapped to host memory.",
            stats.num_requests_swapped);
  out.gauge("troupe:num_prompts_pending",
            "Prompts (and /tokenize, /detokenize calls) queued for or in preparation by the tokenizer workers.",
            stats.num_prompts_pending);
  out.gauge("troupe:kv_cache_usage_perc", "Fraction of device KV cache blocks in use (0 to 1).", stats.kv_cache_usage);
  out.family("troupe:kv_pool_bytes", "gauge", "KV pool size in bytes, allocated and resident since start.");
  out.sample("troupe:kv_pool_bytes", static_cast<double>(stats.kv_pool_device_bytes), "pool=\"device\"");
  out.sample("troupe:kv_pool_bytes", static_cast<double>(stats.kv_pool_host_bytes), "pool=\"host\"");
  out.counter("troupe:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
              static_cast<double>(stats.prefix_cache_queries));
  out.counter("troupe:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.",
              static_cast<double>(stats.prefix_cache_hits));
  out.counter("troupe:prompt_tokens_total", "Prompt tokens processed.", static_cast<double>(stats.prompt_tokens));
  out.counter("troupe:generation_tokens_total", "Tokens generated.", static_cast<double>(stats.generation_tokens));
  // Known label values are always present (at 0), so dashboards see every series from the start.
  std::map<std::string, std::uint64_t> preemptions{{"swap", 0}, {"recompute", 0}};
  for (const auto& [kind, count] : stats.preemptions) preemptions[kind] = count;
  std::map<std::string, std::uint64_t> successes{{"stop", 0}, {"length", 0}, {"abort", 0}};
  for (const auto& [reason, count] : stats.request_success) successes[reason] = count;
  out.labelled_counter("troupe:num_preemptions_total", "Preemptions, by kind (swap or recompute).", "kind",
                       preemptions);
  out.labelled_counter("troupe:request_success_total", "Finished requests, by finish reason.", "finished_reason",
                       successes);
  out.counter("troupe:step_failures_total",
              "Engine steps that failed on an intact backend; only the requests in them failed.",
              static_cast<double>(stats.step_failures));
  out.counter("troupe:spec_decode_num_drafts_total",
              "Speculative decoding: draft runs verified (one sequence's drafts in one step).",
              static_cast<double>(stats.spec_decode_num_drafts));
  out.counter("troupe:spec_decode_num_draft_tokens_total", "Speculative decoding: draft tokens verified.",
              static_cast<double>(stats.spec_decode_num_draft_tokens));
  out.counter("troupe:spec_decode_num_accepted_tokens_total", "Speculative decoding: draft tokens accepted.",
              static_cast<double>(stats.spec_decode_num_accepted_tokens));
  out.indexed_counter("troupe:spec_decode_num_accepted_tokens_per_pos_total",
                      "Speculative decoding: draft runs that accepted the draft at each position (from 0).", "position",
                      stats.spec_decode_num_accepted_tokens_per_pos);
  out.counter("troupe:spec_decode_num_ahead_drafts_total",
              "Speculative decoding: sequences the drafter drafted for while their drafts were being verified.",
              static_cast<double>(stats.spec_decode_num_ahead_drafts));
  out.counter("troupe:spec_decode_num_ahead_used_total",
              "Speculative decoding: of those, sequences whose next step took the drafts (every draft and the "
              "guessed bonus token were right).",
              static_cast<double>(stats.spec_decode_num_ahead_used));
  out.histogram("troupe:time_to_first_token_seconds", "Time to the first generated token, seconds.",
                stats.time_to_first_token_s);
  out.histogram("troupe:inter_token_latency_seconds", "Time between consecutive generated tokens, seconds.",
                stats.inter_token_latency_s);
  out.histogram("troupe:e2e_request_latency_seconds", "Request latency from arrival to finish, seconds.",
                stats.e2e_request_latency_s);
  out.histogram("troupe:request_queue_time_seconds", "Time requests waited before their first step, seconds.",
                stats.request_queue_time_s);
  out.histogram("troupe:iteration_tokens_total", "Tokens scheduled per engine step.", stats.iteration_tokens);
  out.histogram("troupe:model_execute_time_seconds",
                "Executor wall time per engine step (forward pass and sampling), seconds.", stats.model_execute_time_s);
  return out.take();
}

std::string render_server_metrics(std::uint64_t handler_exceptions, std::string_view model_name) {
  exposition out(model_name);
  out.counter("troupe:http_handler_exceptions_total",
              "Exceptions that escaped an HTTP or WebSocket handler on an I/O thread; each closed its connection.",
              static_cast<double>(handler_exceptions));
  return out.take();
}

}  // namespace troupe::api

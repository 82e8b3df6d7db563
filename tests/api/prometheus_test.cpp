// /metrics text, checked with a parser written here from the Prometheus
// text exposition format 0.0.4 specification.

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "api/http/prometheus.hpp"

namespace troupe::api {
namespace {

struct metric_sample {
  std::string name;
  std::map<std::string, std::string> labels;  ///< unescaped values
  double value = 0.0;
};

struct exposition_text {
  std::map<std::string, std::string> types;  ///< family → type
  std::set<std::string> helps;
  std::vector<metric_sample> samples;
};

/// Parses the format strictly enough to catch malformed lines.
exposition_text parse_exposition(const std::string& text) {
  exposition_text out;
  std::istringstream lines(text);
  std::string line;
  const std::regex name_re("^[a-zA-Z_:][a-zA-Z0-9_:]*");
  while (std::getline(lines, line)) {
    if (line.rfind("# HELP ", 0) == 0) {
      out.helps.insert(line.substr(7, line.find(' ', 7) - 7));
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream fields(line.substr(7));
      std::string family, type;
      fields >> family >> type;
      EXPECT_TRUE(type == "counter" || type == "gauge" || type == "histogram") << line;
      EXPECT_EQ(out.types.count(family), 0u) << "TYPE twice: " << line;
      out.types[family] = type;
      continue;
    }
    std::smatch match;
    EXPECT_TRUE(std::regex_search(line, match, name_re)) << line;
    metric_sample sample;
    sample.name = match.str();
    std::size_t at = sample.name.size();
    if (line[at] == '{') {
      ++at;
      while (line[at] != '}') {
        const std::size_t equals = line.find('=', at);
        const std::string label = line.substr(at, equals - at);
        EXPECT_TRUE(std::regex_match(label, std::regex("[a-zA-Z_][a-zA-Z0-9_]*"))) << line;
        at = equals + 2;  // past ="
        std::string value;
        for (; line[at] != '"'; ++at) {
          if (line[at] == '\\') {
            ++at;
            value += line[at] == 'n' ? '\n' : line[at];
          } else {
            value += line[at];
          }
        }
        sample.labels[label] = value;
        ++at;
        if (line[at] == ',') ++at;
      }
      ++at;
    }
    EXPECT_EQ(line[at], ' ') << line;
    const std::string value = line.substr(at + 1);
    sample.value = value == "+Inf" ? INFINITY : value == "-Inf" ? -INFINITY : std::stod(value);
    out.samples.push_back(sample);
  }
  return out;
}

engine_stats sample_stats() {
  engine_stats stats;
  stats.num_requests_running = 3;
  stats.num_requests_waiting = 4;
  stats.num_requests_swapped = 1;
  stats.num_prompts_pending = 6;
  stats.kv_cache_usage = 0.25;
  stats.prefix_cache_queries = 100;
  stats.prefix_cache_hits = 40;
  stats.prompt_tokens = 1000;
  stats.generation_tokens = 2000;
  stats.preemptions = {{"swap", 2}, {"recompute", 5}};
  stats.request_success = {{"stop", 9}, {"abort", 1}};
  stats.time_to_first_token_s = {{0.001, 0.01, 0.1}, {0, 2, 7, 8}, 0.42, 8};
  stats.iteration_tokens = {{1, 8, 64}, {1, 5, 9, 9}, 120, 9};
  stats.spec_decode_num_drafts = 10;
  stats.spec_decode_num_draft_tokens = 30;
  stats.spec_decode_num_accepted_tokens = 17;
  stats.spec_decode_num_ahead_drafts = 8;
  stats.spec_decode_num_ahead_used = 3;
  stats.spec_decode_num_accepted_tokens_per_pos = {8, 6, 3};
  stats.step_failures = 2;
  return stats;
}

TEST(Prometheus, EveryRequiredNameWithHelpAndType) {
  const exposition_text parsed = parse_exposition(render_prometheus(sample_stats(), "m"));
  const std::map<std::string, std::string> required = {
      {"troupe:num_requests_running", "gauge"},
      {"troupe:num_requests_waiting", "gauge"},
      {"troupe:num_requests_swapped", "gauge"},
      {"troupe:num_prompts_pending", "gauge"},
      {"troupe:kv_cache_usage_perc", "gauge"},
      {"troupe:prefix_cache_queries_total", "counter"},
      {"troupe:prefix_cache_hits_total", "counter"},
      {"troupe:prompt_tokens_total", "counter"},
      {"troupe:generation_tokens_total", "counter"},
      {"troupe:num_preemptions_total", "counter"},
      {"troupe:request_success_total", "counter"},
      {"troupe:time_to_first_token_seconds", "histogram"},
      {"troupe:inter_token_latency_seconds", "histogram"},
      {"troupe:e2e_request_latency_seconds", "histogram"},
      {"troupe:request_queue_time_seconds", "histogram"},
      {"troupe:iteration_tokens_total", "histogram"},
      {"troupe:model_execute_time_seconds", "histogram"},
      {"troupe:step_failures_total", "counter"},
      {"troupe:spec_decode_num_drafts_total", "counter"},
      {"troupe:spec_decode_num_draft_tokens_total", "counter"},
      {"troupe:spec_decode_num_accepted_tokens_total", "counter"},
      {"troupe:spec_decode_num_accepted_tokens_per_pos_total", "counter"},
      {"troupe:spec_decode_num_ahead_drafts_total", "counter"},
      {"troupe:spec_decode_num_ahead_used_total", "counter"}};
  for (const auto& [name, type] : required) {
    EXPECT_EQ(parsed.types.count(name) ? parsed.types.at(name) : "", type) << name;
    EXPECT_EQ(parsed.helps.count(name), 1u) << name;
  }
  std::map<std::string, double> plain;
  for (const metric_sample& sample : parsed.samples) {
    EXPECT_EQ(sample.labels.at("model_name"), "m");
    if (sample.labels.size() == 1) plain[sample.name] = sample.value;
  }
  EXPECT_EQ(plain.at("troupe:num_requests_waiting"), 4);
  EXPECT_EQ(plain.at("troupe:num_prompts_pending"), 6);
  EXPECT_EQ(plain.at("troupe:kv_cache_usage_perc"), 0.25);
  EXPECT_EQ(plain.at("troupe:prefix_cache_hits_total"), 40);
  EXPECT_EQ(plain.at("troupe:generation_tokens_total"), 2000);
  EXPECT_EQ(plain.at("troupe:spec_decode_num_drafts_total"), 10);
  EXPECT_EQ(plain.at("troupe:spec_decode_num_draft_tokens_total"), 30);
  EXPECT_EQ(plain.at("troupe:spec_decode_num_accepted_tokens_total"), 17);
  EXPECT_EQ(plain.at("troupe:spec_decode_num_ahead_drafts_total"), 8);
  EXPECT_EQ(plain.at("troupe:spec_decode_num_ahead_used_total"), 3);
  EXPECT_EQ(plain.at("troupe:step_failures_total"), 2);
}

TEST(Prometheus, TheServersHandlerExceptionsAreACounter) {
  const exposition_text parsed = parse_exposition(render_server_metrics(3, "m"));
  EXPECT_EQ(parsed.types.at("troupe:http_handler_exceptions_total"), "counter");
  EXPECT_EQ(parsed.helps.count("troupe:http_handler_exceptions_total"), 1u);
  ASSERT_EQ(parsed.samples.size(), 1u);
  EXPECT_EQ(parsed.samples[0].labels.at("model_name"), "m");
  EXPECT_EQ(parsed.samples[0].value, 3);
}

TEST(Prometheus, AcceptedDraftsPerPositionInPositionOrder) {
  engine_stats stats = sample_stats();
  stats.spec_decode_num_accepted_tokens_per_pos.assign(12, 1);
  stats.spec_decode_num_accepted_tokens_per_pos[10] = 5;
  const exposition_text parsed = parse_exposition(render_prometheus(stats, "m"));
  std::vector<std::pair<std::string, double>> positions;
  for (const metric_sample& sample : parsed.samples) {
    if (sample.name == "troupe:spec_decode_num_accepted_tokens_per_pos_total")
      positions.emplace_back(sample.labels.at("position"), sample.value);
  }
  ASSERT_EQ(positions.size(), 12u);
  for (std::size_t i = 0; i < positions.size(); ++i) EXPECT_EQ(positions[i].first, std::to_string(i));
  EXPECT_EQ(positions[10].second, 5);
}

TEST(Prometheus, LabelledCountersListKnownValues) {
  const exposition_text parsed = parse_exposition(render_prometheus(sample_stats(), "m"));
  std::map<std::string, double> by_reason, by_kind;
  for (const metric_sample& sample : parsed.samples) {
    if (sample.name == "troupe:request_success_total") by_reason[sample.labels.at("finished_reason")] = sample.value;
    if (sample.name == "troupe:num_preemptions_total") by_kind[sample.labels.at("kind")] = sample.value;
  }
  EXPECT_EQ(by_reason, (std::map<std::string, double>{{"abort", 1}, {"length", 0}, {"stop", 9}}));
  EXPECT_EQ(by_kind, (std::map<std::string, double>{{"recompute", 5}, {"swap", 2}}));
}

TEST(Prometheus, HistogramsAreCumulativeAndEndWithInf) {
  const exposition_text parsed = parse_exposition(render_prometheus(sample_stats(), "m"));
  std::vector<std::pair<std::string, double>> buckets;
  double sum = -1, count = -1;
  for (const metric_sample& sample : parsed.samples) {
    if (sample.name == "troupe:time_to_first_token_seconds_bucket")
      buckets.emplace_back(sample.labels.at("le"), sample.value);
    if (sample.name == "troupe:time_to_first_token_seconds_sum") sum = sample.value;
    if (sample.name == "troupe:time_to_first_token_seconds_count") count = sample.value;
  }
  const std::vector<std::pair<std::string, double>> expected = {{"0.001", 0}, {"0.01", 2}, {"0.1", 7}, {"+Inf", 8}};
  EXPECT_EQ(buckets, expected);
  EXPECT_DOUBLE_EQ(sum, 0.42);
  EXPECT_EQ(count, 8);
  // An empty histogram still renders its +Inf bucket, sum and count.
  std::size_t empty_lines = 0;
  for (const metric_sample& sample : parsed.samples) {
    if (sample.name.rfind("troupe:inter_token_latency_seconds", 0) == 0) ++empty_lines;
  }
  EXPECT_EQ(empty_lines, 3u);
}

TEST(Prometheus, LabelValuesAreEscaped) {
  const std::string model = "we\"ird\\name\nx";
  const exposition_text parsed = parse_exposition(render_prometheus(sample_stats(), model));
  ASSERT_FALSE(parsed.samples.empty());
  EXPECT_EQ(parsed.samples[0].labels.at("model_name"), model);
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(format_metric_value(INFINITY), "+Inf");
  EXPECT_EQ(format_metric_value(0.1), "0.1");
  EXPECT_EQ(format_metric_value(3), "3");
}

TEST(Prometheus, KvPoolBytesPerPool) {
  engine_stats stats = sample_stats();
  stats.kv_pool_device_bytes = 64 << 20;
  stats.kv_pool_host_bytes = 32 << 20;
  const exposition_text parsed = parse_exposition(render_prometheus(stats, "m"));
  EXPECT_EQ(parsed.types.at("troupe:kv_pool_bytes"), "gauge");
  std::map<std::string, double> by_pool;
  for (const metric_sample& sample : parsed.samples) {
    if (sample.name == "troupe:kv_pool_bytes") by_pool[sample.labels.at("pool")] = sample.value;
  }
  EXPECT_EQ(by_pool, (std::map<std::string, double>{{"device", 64 << 20}, {"host", 32 << 20}}));
}

}  // namespace
}  // namespace troupe::api

// `troupe bench-ws`: a fixed number of generations in flight over one
// multiplexed WebSocket, from a single C++ thread. It exists beside the
// Python tools/bench-serve for overhead measurements on small machines: a
// client costing ~1 µs per token leaves the cores to the server, so the
// engine counters it reads from /metrics (executor time against wall time)
// describe the server, not the load generator.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <random>
#include <sstream>

#include "config/config_store.hpp"
#include "tools/cli/command_registry.hpp"

namespace troupe::cli {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using clock_type = std::chrono::steady_clock;

struct bench_ws_flags {
  std::string host = knob_defaults().get_text("host");  ///< a `troupe serve` with default knobs
  std::string port = knob_defaults().get_as_text("port");
  int concurrency = 256;
  int requests = 2048;
  int prompt_len = 16;
  int output_len = 64;
  std::uint64_t seed = 0;
};

struct request_timing {
  clock_type::time_point start, first, end;
  std::vector<clock_type::time_point> chunks;
  std::int64_t output_tokens = 0;
  bool ok = false;
};

/// Sums of the engine's step counters from GET /metrics, by metric name.
std::map<std::string, double> engine_counters(const bench_ws_flags& flags) {
  net::io_context io;
  beast::tcp_stream stream(io);
  stream.connect(net::ip::tcp::resolver(io).resolve(flags.host, flags.port));
  http::request<http::empty_body> request(http::verb::get, "/metrics", 11);
  request.set(http::field::host, flags.host);
  http::write(stream, request);
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  http::read(stream, buffer, response);
  std::map<std::string, double> sums;
  std::istringstream lines(response.body());
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const std::string name = line.substr(0, line.find_first_of("{ "));
    sums[name] += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sums;
}

std::string generate_frame(int id, const bench_ws_flags& flags, std::mt19937_64& rng) {
  boost::json::array prompt;
  // Ids below 256 exist in every vocabulary Troupe loads (byte-level tokens).
  for (int i = 0; i < flags.prompt_len; ++i) prompt.push_back(static_cast<std::int64_t>(rng() % 256));
  return boost::json::serialize(boost::json::object{{"type", "generate"},
                                                    {"id", id},
                                                    {"endpoint", "completions"},
                                                    {"prompt", std::move(prompt)},
                                                    {"max_tokens", flags.output_len},
                                                    {"ignore_eos", true},
                                                    {"temperature", 0}});
}

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::max(1.0, std::ceil(q * static_cast<double>(values.size()))));
  return values[std::min(values.size(), rank) - 1];
}

double ms(clock_type::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

void print_latency_row(const char* name, const std::vector<double>& values) {
  std::printf("%-6s %10.2f %10.2f %10.2f\n", name, percentile(values, 0.5), percentile(values, 0.9),
              percentile(values, 0.99));
}

/// Engine counters over the steady middle of the run (from the 20% to the
/// 80% mark of finished requests), when every slot is in flight: the ramp-up
/// and the draining tail, with few requests per step, are left out.
struct steady_window {
  std::map<std::string, double> before, after;
  clock_type::time_point start, end;
};

void report(const std::vector<request_timing>& timings, double wall_s, const steady_window& window) {
  std::vector<double> ttft, tpot, itl;
  std::int64_t tokens = 0, completed = 0;
  for (const request_timing& t : timings) {
    if (!t.ok) continue;
    ++completed;
    tokens += t.output_tokens;
    if (t.chunks.empty()) continue;
    ttft.push_back(ms(t.first - t.start));
    if (t.output_tokens > 1) tpot.push_back(ms(t.end - t.first) / static_cast<double>(t.output_tokens - 1));
    for (std::size_t i = 1; i < t.chunks.size(); ++i) itl.push_back(ms(t.chunks[i] - t.chunks[i - 1]));
  }
  std::printf("requests: %lld completed, %lld failed in %.2f s\n", static_cast<long long>(completed),
              static_cast<long long>(timings.size()) - static_cast<long long>(completed), wall_s);
  std::printf("throughput: %.2f req/s, %.1f output tok/s\n", static_cast<double>(completed) / wall_s,
              static_cast<double>(tokens) / wall_s);
  std::printf("%-6s %10s %10s %10s\n", "ms", "p50", "p90", "p99");
  print_latency_row("TTFT", ttft);
  print_latency_row("TPOT", tpot);
  print_latency_row("ITL", itl);
  const auto delta = [&](const std::string& name) {
    const auto a = window.after.find(name);
    const auto b = window.before.find(name);
    return (a == window.after.end() ? 0.0 : a->second) - (b == window.before.end() ? 0.0 : b->second);
  };
  const double steps = delta("troupe:model_execute_time_seconds_count");
  if (steps <= 0) return;
  const double execute_s = delta("troupe:model_execute_time_seconds_sum");
  const double window_s = std::chrono::duration<double>(window.end - window.start).count();
  std::printf(
      "engine, steady 20%%-80%% window of %.2f s: %.0f steps, %.1f tokens/step, %.3f ms wall/step, %.3f ms "
      "executor/step, executor busy %.1f%% (not "
      "computing: %.1f%%)\n",
      window_s, steps,
      delta("troupe:iteration_tokens_total_sum") / std::max(1.0, delta("troupe:iteration_tokens_total_count")),
      window_s * 1e3 / steps, execute_s * 1e3 / steps, 100 * execute_s / window_s, 100 * (1 - execute_s / window_s));
}

void record_delta(const boost::json::object& frame, request_timing& timing, clock_type::time_point now) {
  for (const auto& choice : frame.at("chunk").at("choices").as_array()) {
    const auto* text = choice.as_object().if_contains("text");
    if (text == nullptr || text->as_string().empty()) continue;
    if (timing.chunks.empty()) timing.first = now;
    timing.chunks.push_back(now);
  }
}

void run(const bench_ws_flags& flags) {
  net::io_context io;
  websocket::stream<beast::tcp_stream> ws(io);
  beast::get_lowest_layer(ws).connect(net::ip::tcp::resolver(io).resolve(flags.host, flags.port));
  ws.read_message_max(64u << 20);
  ws.handshake(flags.host + ":" + flags.port, "/v1/ws");
  std::mt19937_64 rng(flags.seed);
  std::vector<request_timing> timings(static_cast<std::size_t>(flags.requests));
  int sent = 0, finished = 0;
  const auto send_next = [&] {
    const std::string frame = generate_frame(sent, flags, rng);
    timings[static_cast<std::size_t>(sent++)].start = clock_type::now();
    ws.write(net::buffer(frame));
  };
  steady_window window;
  const auto started = clock_type::now();
  while (sent < std::min(flags.concurrency, flags.requests)) send_next();
  beast::flat_buffer buffer;
  while (finished < flags.requests) {
    buffer.clear();
    ws.read(buffer);
    const auto now = clock_type::now();
    const boost::json::object frame = boost::json::parse(beast::buffers_to_string(buffer.data())).as_object();
    const auto* id = frame.if_contains("id");
    if (id == nullptr || !id->is_int64() || id->as_int64() < 0 || id->as_int64() >= flags.requests) continue;
    request_timing& timing = timings[static_cast<std::size_t>(id->as_int64())];
    const std::string_view type = frame.at("type").as_string();
    if (type == "delta") {
      record_delta(frame, timing, now);
      continue;
    }
    if (type == "done") {
      timing.ok = true;
      timing.end = now;
      timing.output_tokens = frame.at("usage").at("completion_tokens").to_number<std::int64_t>();
    } else {
      std::cerr << "bench-ws: request " << id->as_int64() << ": " << boost::json::serialize(frame) << "\n";
    }
    ++finished;
    if (finished == flags.requests / 5 || finished == flags.requests * 4 / 5) {
      const bool first = finished == flags.requests / 5;
      (first ? window.before : window.after) = engine_counters(flags);
      (first ? window.start : window.end) = clock_type::now();
    }
    if (sent < flags.requests) send_next();
  }
  const double wall_s = std::chrono::duration<double>(clock_type::now() - started).count();
  report(timings, wall_s, window);
  ws.close(websocket::close_code::normal);
}

const bool registered = register_command("bench-ws", [](CLI::App& root) {
  auto flags = std::make_shared<bench_ws_flags>();
  CLI::App* cmd = root.add_subcommand(
      "bench-ws", "fixed-concurrency load over one WebSocket from C++; reports latency and executor busy time");
  cmd->add_option("--host", flags->host, "server host")->capture_default_str();
  cmd->add_option("--port", flags->port, "server port")->capture_default_str();
  cmd->add_option("--concurrency", flags->concurrency, "generations in flight")->check(CLI::Range(1, 65536));
  cmd->add_option("--num-requests", flags->requests, "generations in all")->check(CLI::Range(1, 10000000));
  cmd->add_option("--prompt-len", flags->prompt_len, "prompt tokens of each")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--output-len", flags->output_len, "tokens generated by each")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--seed", flags->seed, "seed of the random prompts");
  cmd->callback([flags] { run(*flags); });
});

}  // namespace
}  // namespace troupe::cli

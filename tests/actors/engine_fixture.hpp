#pragma once
// A tiny random model (made once per test binary with make_model) and an
// engine on it, plus a sink that records a request's events and lets the
// test wait for the end.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "model/make_model.hpp"
#include "tests/temp_dir.hpp"
#include "troupe/engine.hpp"

namespace troupe::testing {

/// Polls the engine's stats until `condition` holds or `timeout` passed; returns the last.
template <class Condition>
engine_stats wait_for_stats(engine& running, Condition condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  engine_stats stats = running.stats();
  while (!condition(stats) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    stats = running.stats();
  }
  return stats;
}

/// The directory of a tiny llama (f32, built-in tokenizer), created on first use.
inline const std::filesystem::path& tiny_model_dir() {
  static const std::filesystem::path dir = [] {
    const auto path = process_scratch_dir() / "tiny";
    make_model_options options;
    options.output_dir = path;
    options.seed = 7;
    options.show_progress = false;
    make_model(options);
    return path;
  }();
  return dir;
}

/// How much longer than in a release build the engine may take here:
/// TROUPE_TEST_TIME_SCALE (at least 1; the sanitizer test presets set it, as
/// a TSan build steps the tiny model about 100 times slower), else 1.
inline double test_time_scale() {
  static const double scale = [] {
    const char* text = std::getenv("TROUPE_TEST_TIME_SCALE");
    return text == nullptr ? 1.0 : std::max(1.0, std::strtod(text, nullptr));
  }();
  return scale;
}

/// `timeout` stretched by test_time_scale().
inline std::chrono::milliseconds scaled(std::chrono::milliseconds timeout) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(static_cast<double>(timeout.count()) * test_time_scale()));
}

/// Records one request's events; wait() blocks until it ended.
class recording_sink final : public request_sink {
 public:
  void on_accepted(const accepted_event& e) override {
    std::lock_guard lock(mutex_);
    accepted = e;
  }
  void on_delta(const delta_event& e) override {
    std::lock_guard lock(mutex_);
    auto& c = choice(e.choice);
    c.text += e.text;
    c.tokens.insert(c.tokens.end(), e.token_ids.begin(), e.token_ids.end());
    c.logprobs.insert(c.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
    ++deltas;
    cv_.notify_all();
  }
  void on_finished(const finished_event& e) override {
    std::lock_guard lock(mutex_);
    choice(e.choice).finish = e;
    if (e.request_done) {
      done = true;
      usage = e.usage;
      cv_.notify_all();
    }
  }
  void on_error(const error_event& e) override {
    std::lock_guard lock(mutex_);
    error = e;
    done = true;
    cv_.notify_all();
  }
  /// Waits for the end (true) or `timeout`, scaled(), (false).
  bool wait(std::chrono::seconds timeout = std::chrono::seconds(60)) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, scaled(timeout), [this] { return done; });
  }
  /// Waits until `count` deltas arrived while the request is still running
  /// (true), or it ended or `timeout`, scaled(), passed first (false).
  bool wait_for_deltas(int count, std::chrono::seconds timeout = std::chrono::seconds(60)) {
    std::unique_lock lock(mutex_);
    cv_.wait_for(lock, scaled(timeout), [&] { return deltas >= count || done; });
    return deltas >= count && !done;
  }

  struct choice_output {
    std::string text;
    std::vector<std::int32_t> tokens;
    std::vector<token_logprobs> logprobs;
    std::optional<finished_event> finish;
  };
  std::optional<accepted_event> accepted;
  std::vector<choice_output> choices;
  std::optional<error_event> error;
  usage_info usage;
  int deltas = 0;
  bool done = false;

 private:
  choice_output& choice(int index) {
    if (static_cast<int>(choices.size()) <= index) choices.resize(static_cast<std::size_t>(index) + 1);
    return choices[static_cast<std::size_t>(index)];
  }
  std::mutex mutex_;
  std::condition_variable cv_;
};

/// A greedy text request that generates exactly `max_tokens` tokens.
inline generation_request text_request(std::string prompt, int max_tokens) {
  generation_request r;
  r.kind = prompt_kind::text;
  r.prompt_text = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0.0f;
  r.ignore_eos = true;
  return r;
}

/// An engine config for the tiny model on the CPU backend.
inline engine_config tiny_engine_config() {
  engine_config config;
  config.model_dir = tiny_model_dir().string();
  config.device = "cpu";
  config.threads = 2;
  config.kv_cache_bytes = 64 << 20;
  config.swap_space_bytes = 64 << 20;
  return config;
}

/// A copy of the tiny model in which `file` has its first `from` replaced
/// by `to` (the test fails when `from` is missing); `tag` names the copy.
inline std::filesystem::path edited_model(const std::string& tag, const std::string& file, const std::string& from,
                                          const std::string& to) {
  const auto dir = process_scratch_dir() / ("edited" + tag);
  std::filesystem::remove_all(dir);
  std::filesystem::copy(tiny_model_dir(), dir);
  std::ifstream in(dir / file);
  std::stringstream text;
  text << in.rdbuf();
  std::string content = text.str();
  const auto at = content.find(from);
  EXPECT_NE(at, std::string::npos) << from << " not in " << file;
  if (at != std::string::npos) content.replace(at, from.size(), to);
  std::ofstream(dir / file, std::ios::trunc) << content;
  return dir;
}

}  // namespace troupe::testing

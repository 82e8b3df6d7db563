#pragma once
// A scripted troupe::engine for the API tests: each request runs on its own
// thread and emits events chosen by a keyword in its prompt (see
// fake_engine.cpp). Records submissions and cancels for assertions.

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actors/core/admission.hpp"
#include "troupe/engine.hpp"

namespace troupe::testing {

/// See the file comment. Token i of choice c has text " t<i>" (" c<c>t<i>"
/// when n > 1), id 100 + i and logprob -(i + 1) / 4 - c / 10.
class fake_engine final : public engine {
 public:
  fake_engine();
  ~fake_engine() override;

  std::string submit(generation_request request, std::shared_ptr<request_sink> sink) override;
  void cancel(const std::string& request_id) override;
  engine_stats stats() override;
  const model_info& info() const override { return info_; }
  /// Applies the change to the settings stats() reports; refuses a
  /// max_num_seqs above 1000 (as a real engine refuses what it cannot do).
  std::string configure(const settings_change& change) override;
  /// The scripts still running (state "decoding", their priority).
  std::vector<request_info> list_requests() override;
  /// Cancels a running script; false for an unknown or ended one.
  bool abort(const std::string& request_id) override;
  /// Records the priority list_requests reports.
  std::string set_priority(const std::string& request_id, int priority) override;
  /// One id per byte (byte value + 3); BOS is id 1 when `add_special_tokens`.
  std::vector<std::int32_t> tokenize(const std::string& text, bool add_special_tokens) override;
  std::string detokenize(const std::vector<std::int32_t>& ids, bool skip_special_tokens) override;
  /// "<role>content</role>" per message, then "<assistant>" when asked.
  std::string apply_chat_template(const std::string& messages_json, const std::string& tools_json,
                                  bool add_generation_prompt) override;
  /// As the default, except: text "hold" waits for release_text_tasks()
  /// (or a cancel of its id, which answers it cancelled), text
  /// "queue-full" is refused as the engine's full prepare queue is.
  void run_text_task(const text_task& task, std::function<void(text_task_result)> done) override;
  /// Text tasks waiting for release_text_tasks().
  int held_text_tasks() const;
  /// Runs the held text tasks (on the calling thread).
  void release_text_tasks();
  void shutdown(std::chrono::milliseconds drain) override;

  void set_healthy(bool healthy, std::string detail = {});
  /// While set, stats() throws std::bad_alloc (what a route worker meets
  /// when the engine call it makes fails).
  void set_stats_throws(bool throws) { stats_throws_ = throws; }
  void set_kv_usage(double usage);
  std::vector<generation_request> submitted() const;
  std::vector<std::string> cancelled() const;
  std::vector<settings_change> configured() const;
  /// Requests whose script has not ended yet.
  int running() const { return running_.load(); }
  /// Polls `condition` every few ms up to `timeout`; returns its last value.
  static bool eventually(const std::function<bool()>& condition,
                         std::chrono::milliseconds timeout = std::chrono::seconds(10));

 private:
  struct live_request {
    std::atomic<bool> cancelled{false};
    std::atomic<bool> done{false};  ///< its script ended
    int priority = 0;
  };
  void run_script(generation_request request, std::shared_ptr<request_sink> sink, std::shared_ptr<live_request> live);
  /// The live settings of an engine started with a default engine_config.
  static live_settings default_settings();

  model_info info_;
  mutable std::mutex mutex_;
  std::vector<generation_request> submitted_;
  std::vector<std::string> cancelled_;
  std::map<std::string, std::shared_ptr<live_request>> live_;
  std::vector<std::thread> threads_;
  std::atomic<int> running_{0};
  std::atomic<int> next_id_{0};
  std::atomic<bool> stats_throws_{false};
  bool healthy_ = true;
  std::string health_detail_;
  double kv_usage_ = 0.0;
  live_settings settings_ = default_settings();
  admission_limits limits_;  ///< the request limits configure() has set
  std::vector<settings_change> configured_;
  std::vector<std::pair<text_task, std::function<void(text_task_result)>>> held_;  ///< run_text_task "hold"
};

}  // namespace troupe::testing

// Scripts, chosen by a keyword in the prompt text (or chat messages):
//   (none)        every choice emits max_tokens tokens (8 when unlimited), one
//                 token per delta, choices interleaved; finish "length"
//                 ("stop" when unlimited)
//   stop-early    every choice stops after 2 tokens: reason stop, stop_reason "\n"
//   endless       a token every 2 ms until cancelled; then finish "abort"
//   slow          as (none), a token every 10 ms
//   flood         16 KiB deltas every millisecond until cancelled
//   fail-midway   2 deltas, then an internal error
//   overloaded    error overloaded before anything else
//   connection-limit  error overloaded, code connection_prompt_limit, before anything else
//   too-long      error too_long before anything else
//   utf8-split    "€" split over two tokens: the first delta holds its text back
//   tool-calls    text, then two Hermes-format tool calls, in 3-byte deltas; finish "stop"
//   tool-call-only  one Hermes-format call and nothing else
//   tool-call-broken  a Hermes call whose JSON is malformed

#include "fake_engine.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <new>

namespace troupe::testing {

namespace {

std::string prompt_of(const generation_request& request) {
  if (request.kind == prompt_kind::chat) return request.chat_messages_json;
  return request.prompt_text;
}

bool has(const std::string& text, const char* keyword) { return text.find(keyword) != std::string::npos; }

token_logprobs logprob_entry(const std::string& text, int token, float logprob, int top) {
  token_logprobs entry{token, text, logprob, {}, {}};
  for (int k = 0; k < top; ++k) {
    entry.top.emplace_back(" alt" + std::to_string(k), logprob - 0.5f * static_cast<float>(k + 1));
    entry.top_ids.push_back(900 + k);
  }
  return entry;
}

/// The scripted output of the tool-call scripts ("" for other prompts).
std::string tool_call_script(const std::string& prompt) {
  const std::string weather =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  if (has(prompt, "tool-call-only")) return weather;
  if (has(prompt, "tool-call-broken"))
    return "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {]}\n</tool_call>";
  if (has(prompt, "tool-calls")) {
    return "Checking.\n" + weather +
           "\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}\n</tool_call>";
  }
  return {};
}

}  // namespace

fake_engine::fake_engine() {
  info_.served_model_name = "fake-model";
  info_.model_dir = "/models/fake";
  info_.vocab_size = 1000;
  info_.max_model_len = 4096;
  info_.device = "cpu";
  info_.tool_call_parser = "hermes";
}

fake_engine::~fake_engine() { shutdown(std::chrono::milliseconds(0)); }

std::string fake_engine::submit(generation_request request, std::shared_ptr<request_sink> sink) {
  if (request.request_id.empty()) request.request_id = "fake-" + std::to_string(next_id_++);
  const std::string id = request.request_id;
  auto live = std::make_shared<live_request>();
  std::lock_guard lock(mutex_);
  submitted_.push_back(request);
  live_[id] = live;
  ++running_;
  threads_.emplace_back([this, request = std::move(request), sink = std::move(sink), live]() mutable {
    run_script(std::move(request), std::move(sink), live);
    live->done = true;
    --running_;
  });
  return id;
}

void fake_engine::run_script(generation_request request, std::shared_ptr<request_sink> sink,
                             std::shared_ptr<live_request> live) {
  const std::string prompt = prompt_of(request);
  const std::string& id = request.request_id;
  if (has(prompt, "overloaded")) return sink->on_error({id, error_kind::overloaded, "queue is full", {}});
  if (has(prompt, "connection-limit")) {
    return sink->on_error(
        {id, error_kind::overloaded, "too many prompts on this connection", {}, "connection_prompt_limit"});
  }
  if (has(prompt, "too-long")) return sink->on_error({id, error_kind::too_long, "prompt is too long", "prompt"});
  const int prompt_tokens = request.kind == prompt_kind::token_ids ? static_cast<int>(request.prompt_token_ids.size())
                                                                   : static_cast<int>(prompt.size());
  const std::string prompt_text =
      request.kind == prompt_kind::token_ids ? detokenize(request.prompt_token_ids, false) : prompt;
  sink->on_accepted({id, prompt_tokens, prompt_text});

  if (const std::string script = tool_call_script(prompt); !script.empty()) {
    usage_info usage{prompt_tokens, 0, 0};
    for (std::size_t at = 0; at < script.size() && !live->cancelled; at += 3, ++usage.completion_tokens) {
      sink->on_delta({id, 0, script.substr(at, 3), {static_cast<std::int32_t>(100 + at)}, {}});
    }
    return sink->on_finished({id, 0, finish_reason::stop, {}, usage, true});
  }
  const bool endless = has(prompt, "endless") || has(prompt, "flood");
  const int tokens = has(prompt, "stop-early")   ? 2
                     : endless                   ? 1'000'000
                     : has(prompt, "utf8-split") ? 2
                     : request.max_tokens > 0    ? request.max_tokens
                                                 : 8;
  const int top = request.sampling.top_logprobs;
  usage_info usage{prompt_tokens, 2, 0};
  for (int i = 0; i < tokens && !live->cancelled; ++i) {
    if (has(prompt, "fail-midway") && i == 2) {
      return sink->on_error({id, error_kind::internal, "scripted failure", {}});
    }
    for (int c = 0; c < request.n; ++c) {
      delta_event delta{id, c, {}, {100 + i}, {}};
      std::string text = request.n > 1 ? " c" + std::to_string(c) + "t" + std::to_string(i) : " t" + std::to_string(i);
      if (has(prompt, "flood")) text = std::string(16 * 1024, 'x');
      if (has(prompt, "utf8-split")) text = i == 0 ? "\xE2\x82" : "\xAC";
      delta.text = has(prompt, "utf8-split") ? (i == 0 ? "" : "\xE2\x82\xAC") : text;
      if (request.sampling.logprobs) {
        delta.logprobs.push_back(logprob_entry(text, 100 + i, -0.25f * static_cast<float>(i + 1) - 0.1f * c, top));
      }
      sink->on_delta(delta);
      ++usage.completion_tokens;
    }
    if (has(prompt, "endless")) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (has(prompt, "flood")) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (has(prompt, "slow")) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const finish_reason reason = live->cancelled             ? finish_reason::abort
                               : has(prompt, "stop-early") ? finish_reason::stop
                               : request.max_tokens > 0    ? finish_reason::length
                                                           : finish_reason::stop;
  for (int c = 0; c < request.n; ++c) {
    finished_event done{id, c, reason, {}, usage, c == request.n - 1};
    if (has(prompt, "stop-early")) done.stop_reason = "\n";
    sink->on_finished(done);
  }
}

void fake_engine::cancel(const std::string& request_id) {
  std::vector<std::function<void(text_task_result)>> dropped;
  {
    std::lock_guard lock(mutex_);
    cancelled_.push_back(request_id);
    if (const auto found = live_.find(request_id); found != live_.end()) found->second->cancelled = true;
    const auto named = [&](const auto& held) { return !request_id.empty() && held.first.id == request_id; };
    for (auto& held : held_) {
      if (named(held)) dropped.push_back(std::move(held.second));
    }
    std::erase_if(held_, named);
  }
  // As the engine answers a text task cancelled before it ran (outside the lock: `done` may call back).
  for (auto& done : dropped)
    done({{}, {}, error_event{request_id, error_kind::cancelled, "cancelled before it ran", {}, "cancelled"}});
}

std::string fake_engine::configure(const settings_change& change) {
  std::lock_guard lock(mutex_);
  if (change.max_num_seqs && *change.max_num_seqs > 1000) return "max_num_seqs above what the fake engine allows";
  if (std::string problem = apply_limit_change(change, limits_); !problem.empty()) return problem;
  configured_.push_back(change);
  if (change.policy) settings_.policy = *change.policy;
  if (change.preemption_mode) settings_.preemption_mode = *change.preemption_mode;
  if (change.max_num_batched_tokens) settings_.max_num_batched_tokens = *change.max_num_batched_tokens;
  if (change.max_num_seqs) settings_.max_num_seqs = *change.max_num_seqs;
  if (change.max_prefill_chunk) settings_.max_prefill_chunk = *change.max_prefill_chunk;
  if (change.max_waiting_requests) settings_.max_waiting_requests = *change.max_waiting_requests;
  if (change.mlfq_quantum) settings_.mlfq_quantum = *change.mlfq_quantum;
  if (change.mlfq_levels) settings_.mlfq_levels = *change.mlfq_levels;
  if (change.fair_output_weight) settings_.fair_output_weight = *change.fair_output_weight;
  if (change.swap_min_tokens) settings_.swap_min_tokens = *change.swap_min_tokens;
  if (change.admission_watermark) settings_.admission_watermark = *change.admission_watermark;
  if (change.num_speculative_tokens) settings_.num_speculative_tokens = *change.num_speculative_tokens;
  if (change.speculative_adaptive) settings_.speculative_adaptive = *change.speculative_adaptive;
  if (change.speculative_turn_down) settings_.speculative_turn_down = *change.speculative_turn_down;
  if (change.speculative_max_batch) settings_.speculative_max_batch = *change.speculative_max_batch;
  if (change.speculative_tree_width) settings_.speculative_tree_width = *change.speculative_tree_width;
  if (change.speculative_draft_ahead) settings_.speculative_draft_ahead = *change.speculative_draft_ahead;
  report_limits(limits_, settings_);
  return {};
}

live_settings fake_engine::default_settings() {
  const engine_config d;
  live_settings s;
  s.policy = d.policy;
  s.preemption_mode = d.preemption_mode;
  s.max_num_batched_tokens = d.max_num_batched_tokens;
  s.max_num_seqs = d.max_num_seqs;
  s.max_prefill_chunk = d.max_prefill_chunk;
  s.max_waiting_requests = d.max_waiting_requests;
  s.mlfq_quantum = d.mlfq_quantum;
  s.mlfq_levels = d.mlfq_levels;
  s.mlfq_quantum_growth = d.mlfq_quantum_growth;
  s.mlfq_entry_prompt_tokens = d.mlfq_entry_prompt_tokens;
  s.mlfq_promote_after = d.mlfq_promote_after_s;
  s.fair_prompt_weight = d.fair_prompt_weight;
  s.fair_output_weight = d.fair_output_weight;
  s.fair_idle_tenants = d.fair_idle_tenants;
  s.swap_min_tokens = d.swap_min_tokens;
  s.preemption_grace_steps = d.preemption_grace_steps;
  s.admission_watermark = d.admission_watermark;
  s.num_speculative_tokens = d.num_speculative_tokens;
  s.speculative_adaptive = d.speculative_adaptive;
  s.speculative_turn_down = d.speculative_turn_down;
  s.speculative_max_batch = d.speculative_max_batch;
  s.speculative_tree_width = d.speculative_tree_width;
  s.speculative_draft_ahead = d.speculative_draft_ahead;
  report_limits(admission_limits(d), s);
  return s;
}

std::vector<request_info> fake_engine::list_requests() {
  std::lock_guard lock(mutex_);
  std::vector<request_info> table;
  for (const auto& [id, live] : live_) {
    if (live->cancelled || live->done) continue;
    request_info info;
    info.id = id;
    info.state = "decoding";
    info.priority = live->priority;
    table.push_back(info);
  }
  return table;
}

bool fake_engine::abort(const std::string& request_id) {
  std::lock_guard lock(mutex_);
  const auto found = live_.find(request_id);
  if (found == live_.end() || found->second->cancelled || found->second->done) return false;
  cancelled_.push_back(request_id);
  found->second->cancelled = true;
  return true;
}

std::string fake_engine::set_priority(const std::string& request_id, int priority) {
  std::lock_guard lock(mutex_);
  const auto found = live_.find(request_id);
  if (found == live_.end() || found->second->cancelled || found->second->done) return "unknown request";
  found->second->priority = priority;
  return {};
}

std::vector<settings_change> fake_engine::configured() const {
  std::lock_guard lock(mutex_);
  return configured_;
}

engine_stats fake_engine::stats() {
  if (stats_throws_) throw std::bad_alloc();
  std::lock_guard lock(mutex_);
  engine_stats stats;
  stats.num_requests_running = running_.load();
  stats.kv_cache_usage = kv_usage_;
  stats.healthy = healthy_;
  stats.health_detail = health_detail_;
  stats.settings = settings_;
  stats.preemptions = {{"swap", 3}};
  stats.request_success = {{"stop", 5}, {"length", 2}};
  stats.time_to_first_token_s = {{0.01, 0.1, 1.0}, {1, 3, 4, 5}, 2.5, 5};
  return stats;
}

std::vector<std::int32_t> fake_engine::tokenize(const std::string& text, bool add_special_tokens) {
  std::vector<std::int32_t> ids;
  if (add_special_tokens) ids.push_back(1);
  for (const unsigned char c : text) ids.push_back(static_cast<std::int32_t>(c) + 3);
  return ids;
}

std::string fake_engine::detokenize(const std::vector<std::int32_t>& ids, bool skip_special_tokens) {
  std::string text;
  for (const std::int32_t id : ids) {
    if (id < 3) {
      if (!skip_special_tokens) text += "<s>";
    } else if (id < 259) {
      text += static_cast<char>(id - 3);
    }
  }
  return text;
}

std::string fake_engine::apply_chat_template(const std::string& messages_json, const std::string&,
                                             bool add_generation_prompt) {
  std::string text;
  const boost::json::value messages = boost::json::parse(messages_json);
  for (const auto& message : messages.as_array()) {
    const std::string role(message.at("role").as_string());
    const auto& content = message.at("content");
    text += "<" + role + ">" + (content.is_string() ? std::string(content.as_string()) : "") + "</" + role + ">";
  }
  return add_generation_prompt ? text + "<assistant>" : text;
}

void fake_engine::run_text_task(const text_task& task, std::function<void(text_task_result)> done) {
  if (task.text == "queue-full") {
    text_task_result refused;
    refused.error =
        error_event{{}, error_kind::overloaded, "too many prompts awaiting preparation", {}, "prompt_queue_full"};
    return done(std::move(refused));
  }
  if (task.text != "hold") return engine::run_text_task(task, std::move(done));
  std::lock_guard lock(mutex_);
  held_.emplace_back(task, std::move(done));
}

int fake_engine::held_text_tasks() const {
  std::lock_guard lock(mutex_);
  return static_cast<int>(held_.size());
}

void fake_engine::release_text_tasks() {
  std::vector<std::pair<text_task, std::function<void(text_task_result)>>> held;
  {
    std::lock_guard lock(mutex_);
    held = std::move(held_);
    held_.clear();
  }
  for (auto& [task, done] : held) engine::run_text_task(task, std::move(done));
}

void fake_engine::shutdown(std::chrono::milliseconds) {
  release_text_tasks();
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mutex_);
    for (auto& [id, live] : live_) live->cancelled = true;
    threads = std::move(threads_);
  }
  for (std::thread& thread : threads) thread.join();
}

void fake_engine::set_healthy(bool healthy, std::string detail) {
  std::lock_guard lock(mutex_);
  healthy_ = healthy;
  health_detail_ = std::move(detail);
}

void fake_engine::set_kv_usage(double usage) {
  std::lock_guard lock(mutex_);
  kv_usage_ = usage;
}

std::vector<generation_request> fake_engine::submitted() const {
  std::lock_guard lock(mutex_);
  return submitted_;
}

std::vector<std::string> fake_engine::cancelled() const {
  std::lock_guard lock(mutex_);
  return cancelled_;
}

bool fake_engine::eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return condition();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace troupe::testing

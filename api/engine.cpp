// The engine facade: the troupe behind the plain C++ interface of
// <troupe/engine.hpp>, in an actor system of its own or a caller's.

#include <spdlog/spdlog.h>
#include <atomic>
#include <caf/all.hpp>
#include <mutex>

#include "actors/core/admission.hpp"
#include "actors/troupe.hpp"
#include "troupe/engine_caf.hpp"

namespace troupe {

namespace {

class troupe_engine final : public engine {
 public:
  // Runs the troupe in `system`; `owned` is set when the engine made the system itself.
  troupe_engine(const engine_config& config, std::unique_ptr<caf::actor_system_config> owned_config,
                std::unique_ptr<caf::actor_system> owned, caf::actor_system* system)
      : owned_config_(std::move(owned_config)),
        owned_system_(std::move(owned)),
        system_(*system),
        model_(load_engine_model(config)),
        handles_(spawn_troupe(system_, config, model_)),
        limits_(config) {}

  ~troupe_engine() override { shutdown(std::chrono::milliseconds(0)); }

  std::string submit(generation_request request, std::shared_ptr<request_sink> sink) override {
    return submit_with(std::move(request), event_sink::from_callbacks(std::move(sink)));
  }

  std::string submit_with(generation_request request, event_sink sink) {
    if (request.request_id.empty()) request.request_id = "troupe-" + std::to_string(++next_id_);
    std::string id = request.request_id;
    if (stopped_) {
      sink.error({id, error_kind::shutting_down, "the engine has shut down", ""});
      return id;
    }
    auto job = std::make_shared<const submission>(submission{std::move(request), std::move(sink), handles_.now()});
    caf::anon_send(handles_.intake, atom::generate_v, std::move(job));
    return id;
  }

  // Through the intake, which may still hold the request's prompt (then it
  // never runs) and sends the cancel on in order after the submission otherwise.
  void cancel(const std::string& request_id) override {
    if (!stopped_) caf::anon_send(handles_.intake, atom::cancel_v, request_id);
  }

  engine_stats stats() override {
    engine_stats result;
    result.healthy = false;
    if (stopped_) {
      result.health_detail = "the engine has shut down";
      return result;
    }
    caf::scoped_actor self{system_};
    self->request(handles_.scheduler, std::chrono::seconds(2), atom::stats_v)
        .receive([&](const engine_stats_ptr& stats) { result = *stats; },
                 [&](const caf::error& error) {
                   result.health_detail = "the scheduler did not answer: " + caf::to_string(error);
                 });
    // Fixed at start: the facade reports them, not the scheduler.
    result.kv_pool_device_bytes = model_.info.kv_pool_device_bytes;
    result.kv_pool_host_bytes = model_.info.kv_pool_host_bytes;
    result.num_prompts_pending = handles_.gauges->prompts_pending.load(std::memory_order_relaxed);
    if (const auto aborted = handles_.gauges->requests_aborted_unprepared.load(std::memory_order_relaxed))
      result.request_success["abort"] += aborted;
    const std::lock_guard lock(configure_mutex_);
    report_limits(limits_, result.settings);
    return result;
  }

  const model_info& info() const override { return model_.info; }

  // The request limits are validated first, so the scheduler's change and the
  // intake's either both happen or neither does.
  std::string configure(const settings_change& change) override {
    if (stopped_) return "the engine has shut down";
    const std::lock_guard lock(configure_mutex_);
    admission_limits limits = limits_;
    if (std::string problem = apply_limit_change(change, limits); !problem.empty()) return problem;
    auto message = config_change_ptr{std::make_shared<const config_change>(change)};
    if (std::string problem = ask_for_text(handles_.scheduler, message, "scheduler"); !problem.empty()) return problem;
    if (std::string problem = ask_for_text(handles_.intake, message, "intake"); !problem.empty()) return problem;
    limits_ = limits;
    return {};
  }

  std::vector<request_info> list_requests() override {
    std::vector<request_info> table;
    if (stopped_) return table;
    caf::scoped_actor self{system_};
    self->request(handles_.scheduler, std::chrono::seconds(2), atom::requests_v)
        .receive([&](const request_table_ptr& answer) { table = *answer; },
                 [](const caf::error& error) {
                   spdlog::warn("engine: the scheduler did not list its requests: {}", caf::to_string(error));
                 });
    return table;
  }

  // Through the intake, as cancel(): a request whose prompt awaits
  // preparation is aborted there; the scheduler answers for the rest.
  bool abort(const std::string& request_id) override {
    return !stopped_ && ask_for_bool(handles_.intake, "intake", atom::abort_v, request_id);
  }

  std::string set_priority(const std::string& request_id, int priority) override {
    if (stopped_) return "the engine has shut down";
    if (!ask_for_bool(handles_.scheduler, "scheduler", atom::priority_v, request_id, std::int32_t{priority}))
      return "no live request '" + request_id + "'";
    return {};
  }

  std::vector<std::int32_t> tokenize(const std::string& text, bool add_special_tokens) override {
    return model_.preparer->tokenizer()->encode(text, add_special_tokens);
  }

  std::string detokenize(const std::vector<std::int32_t>& ids, bool skip_special_tokens) override {
    return model_.preparer->tokenizer()->decode(ids, skip_special_tokens);
  }

  std::string apply_chat_template(const std::string& messages_json, const std::string& tools_json,
                                  bool add_generation_prompt) override {
    return model_.preparer->render_chat(messages_json, tools_json, "", add_generation_prompt);
  }

  void run_text_task(const text_task& task, std::function<void(text_task_result)> done) override {
    if (stopped_) {
      text_task_result result;
      result.error = error_event{{}, error_kind::shutting_down, "the engine has shut down", {}, {}};
      return done(std::move(result));
    }
    auto job = std::make_shared<const text_job>(std::make_shared<const text_task>(task), std::move(done));
    caf::anon_send(handles_.intake, atom::tokenize_v, std::move(job));
  }

  void shutdown(std::chrono::milliseconds drain) override {
    if (stopped_.exchange(true)) return;
    caf::scoped_actor self{system_};
    const double seconds = std::chrono::duration<double>(drain).count();
    self->request(handles_.scheduler, drain + std::chrono::seconds(5), atom::drain_v, seconds)
        .receive([](bool) {},
                 [](const caf::error& error) {
                   spdlog::warn("engine shutdown: drain did not finish: {}", caf::to_string(error));
                 });
    for (const auto& tokenizer : handles_.tokenizers) self->send_exit(tokenizer, caf::exit_reason::user_shutdown);
    for (const auto& shard : handles_.detokenizers) self->send_exit(shard, caf::exit_reason::user_shutdown);
    self->send_exit(handles_.intake, caf::exit_reason::user_shutdown);
    self->send_exit(handles_.scheduler, caf::exit_reason::user_shutdown);
    self->send_exit(handles_.kv, caf::exit_reason::user_shutdown);
    self->send_exit(handles_.executor, caf::exit_reason::user_shutdown);
    self->wait_for(handles_.executor);
    if (handles_.speculator) {
      self->send_exit(handles_.speculator, caf::exit_reason::user_shutdown);
      self->send_exit(handles_.draft_executor, caf::exit_reason::user_shutdown);
      self->wait_for(handles_.draft_executor);
    }
  }

 private:
  /// Sends `actor` a configure request; its answer, or that `name` did not answer.
  template <typename Actor>
  std::string ask_for_text(const Actor& actor, const config_change_ptr& change, std::string_view name) {
    std::string problem;
    caf::scoped_actor self{system_};
    self->request(actor, std::chrono::seconds(2), atom::configure_v, change)
        .receive([&](const std::string& answer) { problem = answer; },
                 [&](const caf::error& error) {
                   problem = "the " + std::string(name) + " did not answer: " + caf::to_string(error);
                 });
    return problem;
  }

  /// Sends `actor` (called `name` in the log) a request answered with a
  /// bool; false when it did not answer.
  template <typename Actor, typename... Args>
  bool ask_for_bool(const Actor& actor, std::string_view name, Args&&... args) {
    bool answer = false;
    caf::scoped_actor self{system_};
    self->request(actor, std::chrono::seconds(2), std::forward<Args>(args)...)
        .receive([&](bool reply) { answer = reply; },
                 [&](const caf::error& error) {
                   spdlog::warn("engine: the {} did not answer: {}", name, caf::to_string(error));
                 });
    return answer;
  }

  std::unique_ptr<caf::actor_system_config> owned_config_;
  std::unique_ptr<caf::actor_system> owned_system_;
  caf::actor_system& system_;
  loaded_engine_model model_;
  troupe_handles handles_;
  std::atomic<std::uint64_t> next_id_{0};
  std::atomic<bool> stopped_{false};
  std::mutex configure_mutex_;  ///< one configure at a time; guards limits_
  admission_limits limits_;     ///< the request limits in force (the intake's copy)
};

}  // namespace

void engine::run_text_task(const text_task& task, std::function<void(text_task_result)> done) {
  text_task_result result;
  try {
    switch (task.type) {
      case text_task::kind::encode:
        result.ids = tokenize(task.text, task.add_special_tokens);
        break;
      case text_task::kind::encode_chat: {
        std::string text;
        try {
          text = apply_chat_template(task.chat_messages_json, task.chat_tools_json, task.add_generation_prompt);
        } catch (const std::exception& e) {
          // As the tokenizer workers answer (prompt_preparer::run): the client's to fix.
          result.error = error_event{{},
                                     error_kind::invalid_request,
                                     std::string("the chat template failed: ") + e.what(),
                                     "messages",
                                     "template_error"};
          break;
        }
        result.ids = tokenize(text, task.add_special_tokens);
        break;
      }
      case text_task::kind::decode:
        result.text = detokenize(task.ids, task.skip_special_tokens);
        break;
    }
  } catch (const std::exception& e) {
    result.error = error_event{{}, error_kind::internal, std::string("tokenizing failed: ") + e.what(), {}, {}};
  }
  done(std::move(result));
}

std::unique_ptr<engine> engine::start(const engine_config& config) {
  auto system_config = std::make_unique<caf::actor_system_config>();
  add_troupe_message_types(*system_config);
  // Idle CAF workers sleep instead of spinning: the engine shares cores with the backend.
  system_config->set("scheduler.policy", caf::atom("sharing"));
  auto system = std::make_unique<caf::actor_system>(*system_config);
  caf::actor_system* raw = system.get();
  return std::make_unique<troupe_engine>(config, std::move(system_config), std::move(system), raw);
}

void add_message_types(caf::actor_system_config& config) { add_troupe_message_types(config); }

std::unique_ptr<engine> start_engine_in(caf::actor_system& system, const engine_config& config) {
  return std::make_unique<troupe_engine>(config, nullptr, nullptr, &system);
}

std::string submit_to_actor(engine& target, generation_request request, const caf::actor& sink) {
  auto* engine = dynamic_cast<troupe_engine*>(&target);
  if (engine == nullptr) throw std::invalid_argument("submit_to_actor: the engine was not started by Troupe");
  return engine->submit_with(std::move(request), event_sink::from_actor(sink));
}

}  // namespace troupe

#include "actors/intake_actor.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <variant>

namespace troupe {

namespace {

/// A queued or running job: a prompt to prepare or a /tokenize call.
struct intake_job {
  submission_ptr submission;  ///< set for a prompt
  text_job_ptr text;          ///< set for a /tokenize or /detokenize call
};

/// A tokenizer worker and whether it runs a job (it gets one at a time).
struct worker_slot {
  tokenizer_actor actor;
  bool busy = false;
};

struct intake_state {
  intake_state() = default;
  intake_state(const intake_state&) = delete;
  intake_state& operator=(const intake_state&) = delete;
  /// Requests still queued when the intake stops (shutdown) end with an
  /// error rather than never; text jobs answer by themselves (text_job).
  ~intake_state() {
    for (const auto& [ticket, job] : jobs) {
      if (job.submission)
        job.submission->sink.error(
            {job.submission->request.request_id, error_kind::shutting_down, "the engine has shut down", ""});
    }
  }

  intake_setup setup;
  prepare_queue queue{prepare_limits{}};
  std::unordered_map<prepare_ticket, intake_job> jobs;
  std::vector<worker_slot> workers;
  static inline const char* name = "intake";
};

using self_ptr = intake_actor::stateful_pointer<intake_state>;

admitted_request_ptr admit(const intake_setup& setup, const submission& job, const prepared_prompt& prompt) {
  const generation_request& request = job.request;
  auto admitted = std::make_shared<admitted_request>();
  admitted->spec = make_request_spec(request, prompt.ids);
  admitted->spec.constraint = prompt.constraint;
  admitted->spec.constraint_vocab = prompt.constraint_vocab;
  if (!admitted->spec.timeout_s) admitted->spec.timeout_s = setup.default_timeout_s;
  admitted->output.n = request.n;
  admitted->output.skip_special_tokens = request.skip_special_tokens;
  admitted->output.stop = request.stop;
  admitted->output.logprobs = request.sampling.logprobs || request.sampling.top_logprobs > 0;
  admitted->sink = job.sink;
  admitted->accepted.request_id = request.request_id;
  admitted->accepted.prompt_tokens = static_cast<int>(prompt.ids.size());
  admitted->accepted.prompt_text = prompt.text;
  admitted->arrival_s = job.arrival_s;
  return admitted;
}

// The error for a job a bound of the prepare queue refused, naming the bound.
error_event refusal_error(const std::string& id, prepare_refusal refusal, const prepare_limits& limits) {
  switch (refusal) {
    case prepare_refusal::origin_full:
      return {id, error_kind::overloaded,
              "too many prompts awaiting preparation on this connection (at most " +
                  std::to_string(limits.max_pending_per_origin) + ", max_pending_prompts_per_connection)",
              "", "connection_prompt_limit"};
    case prepare_refusal::pending_full:
      return {id, error_kind::overloaded,
              "too many prompts awaiting preparation (at most " + std::to_string(limits.max_pending) +
                  ", max_pending_prompts)",
              "", "prompt_queue_full"};
    case prepare_refusal::waiting_full:
      break;
  }
  return {id, error_kind::overloaded,
          "the waiting queue is full (" + std::to_string(limits.max_waiting) +
              " requests, prompts awaiting preparation included)",
          "", ""};
}

// A request cancelled before its prompt was prepared ends as a cancelled
// request does: each choice finishes with reason abort.
void finish_unprepared(const submission& job) {
  const int choices = std::max(1, job.request.n);
  for (int c = 0; c < choices; ++c)
    job.sink.finished({job.request.request_id, c, finish_reason::abort, std::nullopt, {}, c == choices - 1});
}

void publish(intake_state& state) {
  state.setup.gauges->prompts_pending.store(static_cast<std::int32_t>(state.queue.pending()),
                                            std::memory_order_relaxed);
}

// Queues a job unless a bound refuses it; its ticket, or the refusal as the request's error.
std::variant<prepare_ticket, error_event> enqueue(intake_state& state, const std::string& id, std::uint64_t origin,
                                                  intake_job job) {
  const int scheduler_queued = state.setup.gauges->scheduler_queued.load(std::memory_order_relaxed);
  const prepare_push pushed = state.queue.push(id, origin, scheduler_queued);
  if (pushed.refusal) return refusal_error(id, *pushed.refusal, state.queue.limits());
  state.jobs.emplace(pushed.ticket, std::move(job));
  publish(state);
  return pushed.ticket;
}

// A running job ended: its payload, or nullopt when it was cancelled
// meanwhile (then its request has finished as aborted).
std::optional<intake_job> take(intake_state& state, prepare_ticket ticket) {
  const bool cancelled = state.queue.finish(ticket);
  auto node = state.jobs.extract(ticket);
  publish(state);
  if (node.empty()) return std::nullopt;
  if (!cancelled) return std::move(node.mapped());
  if (node.mapped().submission) finish_unprepared(*node.mapped().submission);
  return std::nullopt;
}

// ---- workers ----------------------------------------------------------------

void dispatch(self_ptr self);

void supervise(self_ptr self, const caf::actor& actor) {
  self->monitor(actor);
  self->link_to(actor);
}

// Puts a fresh worker in slot `i`. The old one (dead, or stuck past
// encode_timeout) is let go first: unlinked and unmonitored, so its end
// neither stops the intake nor starts another replacement.
void replace_worker(self_ptr self, std::size_t i) {
  auto& state = self->state;
  const caf::actor old = caf::actor_cast<caf::actor>(state.workers[i].actor);
  self->demonitor(old);
  self->unlink_from(old);
  self->send_exit(old, caf::exit_reason::kill);
  tokenizer_actor fresh = spawn_tokenizer(self->system(), state.setup.worker);
  supervise(self, caf::actor_cast<caf::actor>(fresh));
  state.workers[i] = {fresh, false};
}

// The job on slot `i` (worker `worker`) ended; a worker that failed it
// (died, or did not answer in time) is replaced.
void job_done(self_ptr self, std::size_t i, const caf::actor_addr& worker, bool failed) {
  auto& slot = self->state.workers[i];
  if (slot.actor.address() == worker) {
    if (failed) {
      spdlog::error("tokenizer worker {} failed a job: restarting it", i);
      replace_worker(self, i);
    } else {
      slot.busy = false;
    }
  }
  dispatch(self);
}

void on_prepared(self_ptr self, prepare_ticket ticket, const prepared_prompt& prompt) {
  std::optional<intake_job> job = take(self->state, ticket);
  if (!job) return;
  const submission& request = *job->submission;
  const intake_setup& setup = self->state.setup;
  if (prompt.error) return request.sink.error(*prompt.error);
  if (auto problem = check_prompt_length(prompt.ids.size(), request.request, setup.limits)) {
    return request.sink.error({request.request.request_id, problem->kind, problem->message, problem->param});
  }
  self->send(setup.scheduler, atom::submit_v, admit(setup, request, prompt));
}

void run_prompt(self_ptr self, std::size_t i, prepare_ticket ticket, const submission_ptr& job) {
  const auto worker = self->state.workers[i].actor;
  self->request(worker, self->state.setup.encode_timeout, atom::encode_v, job)
      .then(
          [self, i, ticket, address = worker.address()](const prepared_prompt_ptr& prompt) {
            on_prepared(self, ticket, *prompt);
            job_done(self, i, address, false);
          },
          [self, i, ticket, address = worker.address()](const caf::error& error) {
            if (std::optional<intake_job> job = take(self->state, ticket)) {
              const submission& request = *job->submission;
              request.sink.error({request.request.request_id, error_kind::internal,
                                  "preparing the prompt failed: " + caf::to_string(error), ""});
            }
            job_done(self, i, address, true);
          });
}

void run_text(self_ptr self, std::size_t i, prepare_ticket ticket, const text_job_ptr& job) {
  const auto worker = self->state.workers[i].actor;
  self->request(worker, self->state.setup.encode_timeout, atom::tokenize_v, job->task())
      .then(
          [self, i, ticket, address = worker.address()](const text_task_result_ptr& result) {
            if (std::optional<intake_job> done = take(self->state, ticket)) done->text->answer(*result);
            job_done(self, i, address, false);
          },
          [self, i, ticket, address = worker.address()](const caf::error& error) {
            if (std::optional<intake_job> done = take(self->state, ticket)) {
              text_task_result failed;
              failed.error = error_event{{}, error_kind::internal, "tokenizing failed: " + caf::to_string(error)};
              done->text->answer(std::move(failed));
            }
            job_done(self, i, address, true);
          });
}

// Hands each idle worker the next job, in turns across origins.
void dispatch(self_ptr self) {
  auto& state = self->state;
  for (std::size_t i = 0; i < state.workers.size(); ++i) {
    if (state.workers[i].busy) continue;
    const std::optional<prepare_ticket> ticket = state.queue.pop();
    if (!ticket) return;
    state.workers[i].busy = true;
    const intake_job& job = state.jobs.at(*ticket);
    if (job.submission) {
      run_prompt(self, i, *ticket, job.submission);
    } else {
      run_text(self, i, *ticket, job.text);
    }
  }
}

// ---- handlers -----------------------------------------------------------------

void on_generate(self_ptr self, const submission_ptr& job) {
  auto& state = self->state;
  const generation_request& request = job->request;
  if (auto problem = check_request(request, state.setup.limits)) {
    job->sink.error({request.request_id, problem->kind, problem->message, problem->param});
    return;
  }
  auto queued = enqueue(state, request.request_id, request.origin, {job, nullptr});
  if (auto* refused = std::get_if<error_event>(&queued)) return job->sink.error(*refused);
  dispatch(self);
}

void on_tokenize(self_ptr self, const text_job_ptr& job) {
  auto queued = enqueue(self->state, "", job->task()->origin, {nullptr, job});
  if (auto* refused = std::get_if<error_event>(&queued)) {
    text_task_result result;
    result.error = std::move(*refused);
    return job->answer(std::move(result));
  }
  dispatch(self);
}

void on_cancel(self_ptr self, const std::string& id) {
  auto& state = self->state;
  const prepare_cancel cancelled = state.queue.cancel(id);
  for (const prepare_ticket ticket : cancelled.removed) {
    auto node = state.jobs.extract(ticket);
    if (!node.empty() && node.mapped().submission) finish_unprepared(*node.mapped().submission);
  }
  publish(state);
  // Not held here: submitted already (this message follows the submission), or unknown.
  if (cancelled.removed.empty() && !cancelled.running) self->send(state.setup.scheduler, atom::cancel_v, id);
}

// ---- supervision ----------------------------------------------------------------

// A worker or shard died: a fresh one takes its slot. A shutdown stops the
// pools for good.
void on_down(self_ptr self, const caf::down_msg& down) {
  if (down.reason == caf::exit_reason::user_shutdown) return;
  auto& state = self->state;
  for (std::size_t i = 0; i < state.workers.size(); ++i) {
    if (state.workers[i].actor.address() != down.source) continue;
    spdlog::error("tokenizer worker {} died ({}): restarting it", i, caf::to_string(down.reason));
    replace_worker(self, i);
    return dispatch(self);
  }
  auto& shards = state.setup.shards;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    if (shards[i].address() != down.source) continue;
    spdlog::error("output shard {} died ({}): restarting it", i, caf::to_string(down.reason));
    shards[i] = spawn_detokenizer(self->system(), state.setup.shard);
    supervise(self, caf::actor_cast<caf::actor>(shards[i]));
    self->send(state.setup.scheduler, atom::shard_v, static_cast<std::int32_t>(i),
               caf::actor_cast<caf::actor>(shards[i]));
    return;
  }
}

std::string on_configure(intake_state& state, const config_change& change) {
  std::string problem = apply_limit_change(change, state.setup.limits);
  if (!problem.empty()) return problem;
  if (change.max_waiting_requests) {
    prepare_limits limits = state.queue.limits();
    limits.max_waiting = *change.max_waiting_requests;
    state.queue.set_limits(limits);
  }
  return {};
}

intake_actor::behavior_type intake_behavior(self_ptr self, intake_setup setup) {
  auto& state = self->state;
  state.setup = std::move(setup);
  state.queue.set_limits(state.setup.prepare);
  for (const tokenizer_actor& worker : state.setup.tokenizers) {
    state.workers.push_back({worker, false});
    supervise(self, caf::actor_cast<caf::actor>(worker));
  }
  state.setup.tokenizers.clear();  // the slots hold them now, and their replacements
  for (const detokenizer_actor& shard : state.setup.shards) supervise(self, caf::actor_cast<caf::actor>(shard));
  self->set_down_handler([self](caf::down_msg& down) { on_down(self, down); });
  // A failed worker's exit arrives here through its link and as a down
  // message (which restarts it); only a shutdown ends the intake and,
  // through the links, the pools.
  self->set_exit_handler([self](caf::exit_msg& exit) {
    if (exit.reason == caf::exit_reason::user_shutdown || exit.reason == caf::exit_reason::kill)
      self->quit(exit.reason);
  });
  return {
      [self](atom::generate, const submission_ptr& job) { on_generate(self, job); },
      [self](atom::cancel, const std::string& id) { on_cancel(self, id); },
      [self](atom::tokenize, const text_job_ptr& job) { on_tokenize(self, job); },
      [self](atom::configure, const config_change_ptr& change) -> std::string {
        return on_configure(self->state, *change);
      },
  };
}

}  // namespace

intake_actor spawn_intake(caf::actor_system& system, intake_setup setup) {
  return system.spawn(intake_behavior, std::move(setup));
}

}  // namespace troupe

#include "actors/intake_actor.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <unordered_map>
#include <variant>

#include "actors/reply_timeout.hpp"

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
  std::optional<double> expiry_at;  ///< when the live deadline tick fires (seconds, the engine clock)
  std::uint64_t expiry_tick = 0;    ///< the live deadline tick's number; older ones are superseded
  static inline const char* name = "intake";
};

using self_ptr = intake_actor::stateful_pointer<intake_state>;

/// Seconds on the engine clock (the one submissions' arrival_s is on).
double now_s(const intake_setup& setup) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - setup.clock_start).count();
}

/// When a request's timeout ends (seconds, the engine clock): counted from
/// its arrival, so that time spent awaiting preparation is part of it.
double deadline_of(const intake_setup& setup, const submission& job) {
  return job.arrival_s + job.request.timeout_s.value_or(setup.default_timeout_s);
}

// `timeout_s`: what is left of the request's timeout.
admitted_request_ptr admit(const submission& job, const prepared_prompt& prompt, double timeout_s) {
  const generation_request& request = job.request;
  auto admitted = std::make_shared<admitted_request>();
  admitted->spec = make_request_spec(request, prompt.ids);
  admitted->spec.constraint = prompt.constraint;
  admitted->spec.constraint_vocab = prompt.constraint_vocab;
  admitted->spec.timeout_s = timeout_s;
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

// A request cancelled or timed out before its prompt was prepared ends as
// a cancelled or timed-out running request does: each choice finishes with
// reason abort, and counts as a request finished as aborted.
void finish_unprepared(queue_gauges& gauges, const submission& job) {
  gauges.requests_aborted_unprepared.fetch_add(1, std::memory_order_relaxed);
  const int choices = std::max(1, job.request.n);
  for (int c = 0; c < choices; ++c)
    job.sink.finished({job.request.request_id, c, finish_reason::abort, std::nullopt, {}, c == choices - 1});
}

// A job cancelled before its result was used: a prompt's request finishes
// as aborted, a text task answers that it was cancelled.
void end_cancelled(queue_gauges& gauges, const intake_job& job) {
  if (job.submission) return finish_unprepared(gauges, *job.submission);
  job.text->answer(
      {{}, {}, error_event{job.text->task()->id, error_kind::cancelled, "cancelled before it ran", {}, "cancelled"}});
}

void publish(intake_state& state) {
  state.setup.gauges->prompts_pending.store(static_cast<std::int32_t>(state.queue.pending()),
                                            std::memory_order_relaxed);
}

// Queues a job unless a bound refuses it; its ticket, or the refusal as
// the request's error. `deadline_s`: when it expires if still queued.
std::variant<prepare_ticket, error_event> enqueue(intake_state& state, const std::string& id, std::uint64_t origin,
                                                  double deadline_s, intake_job job) {
  const int scheduler_queued = state.setup.gauges->scheduler_queued.load(std::memory_order_relaxed);
  const prepare_push pushed = state.queue.push(id, origin, scheduler_queued, deadline_s);
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
  end_cancelled(*state.setup.gauges, node.mapped());
  return std::nullopt;
}

// Cancels what the prepare queue holds of request `id`: queued jobs end
// now, a running one when it does. False when it holds nothing of `id`.
bool cancel_held(intake_state& state, const std::string& id) {
  const prepare_cancel cancelled = state.queue.cancel(id);
  publish(state);  // before the requests hear of their end, as in end_expired
  for (const prepare_ticket ticket : cancelled.removed) {
    auto node = state.jobs.extract(ticket);
    if (!node.empty()) end_cancelled(*state.setup.gauges, node.mapped());
  }
  return !cancelled.removed.empty() || cancelled.running;
}

// ---- deadlines ----------------------------------------------------------------

// Has a tick sent for the earliest deadline of a queued prompt, unless the
// live tick comes by then. One tick is live at a time: it supersedes the rest.
void arm_expiry(self_ptr self) {
  auto& state = self->state;
  const std::optional<double> next = state.queue.next_deadline();
  if (!next || (state.expiry_at && *state.expiry_at <= *next)) return;
  state.expiry_at = next;
  const std::chrono::duration<double> delay(std::max(0.0, *next - now_s(state.setup)));
  self->delayed_send(self, std::chrono::ceil<caf::timespan>(delay), atom::tick_v, ++state.expiry_tick);
}

// Queued prompts past their request's timeout end as a timed-out running
// request does (reason abort), never prepared.
// The queue length is published before the requests hear of their end, so
// a client that reads the engine's stats then sees them gone.
void end_expired(intake_state& state) {
  const std::vector<prepare_ticket> expired = state.queue.expire(now_s(state.setup));
  if (expired.empty()) return;
  publish(state);
  for (const prepare_ticket ticket : expired) {
    auto node = state.jobs.extract(ticket);
    if (!node.empty() && node.mapped().submission) finish_unprepared(*state.setup.gauges, *node.mapped().submission);
  }
}

void on_expiry_tick(self_ptr self, std::uint64_t tick) {
  auto& state = self->state;
  if (tick != state.expiry_tick) return;
  state.expiry_at.reset();
  end_expired(state);
  arm_expiry(self);
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
  const double timeout_left_s = deadline_of(setup, request) - now_s(setup);
  if (timeout_left_s <= 0)
    return finish_unprepared(*self->state.setup.gauges, request);  // timed out while being prepared
  self->send(setup.scheduler, atom::submit_v, admit(request, prompt, timeout_left_s));
}

void run_prompt(self_ptr self, std::size_t i, prepare_ticket ticket, const submission_ptr& job) {
  const auto worker = self->state.workers[i].actor;
  const auto encoding = self->request(worker, self->state.setup.encode_timeout, atom::encode_v, job);
  encoding
      .then(
          [self, i, ticket, address = worker.address(), reply_id = encoding.id()](const prepared_prompt_ptr& prompt) {
            release_reply_timeout(self, reply_id);
            on_prepared(self, ticket, *prompt);
            job_done(self, i, address, false);
          },
          [self, i, ticket, address = worker.address(), reply_id = encoding.id()](const caf::error& error) {
            release_reply_timeout(self, reply_id);
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
  const auto tokenizing = self->request(worker, self->state.setup.encode_timeout, atom::tokenize_v, job->task());
  tokenizing.then(
      [self, i, ticket, address = worker.address(), reply_id = tokenizing.id()](const text_task_result_ptr& result) {
        release_reply_timeout(self, reply_id);
        if (std::optional<intake_job> done = take(self->state, ticket)) done->text->answer(*result);
        job_done(self, i, address, false);
      },
      [self, i, ticket, address = worker.address(), reply_id = tokenizing.id()](const caf::error& error) {
        release_reply_timeout(self, reply_id);
        if (std::optional<intake_job> done = take(self->state, ticket)) {
          text_task_result failed;
          failed.error = error_event{{}, error_kind::internal, "tokenizing failed: " + caf::to_string(error)};
          done->text->answer(std::move(failed));
        }
        job_done(self, i, address, true);
      });
}

// Hands each idle worker the next job, in turns across origins; none past
// its deadline, should the tick for it come late.
void dispatch(self_ptr self) {
  auto& state = self->state;
  end_expired(state);
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
  auto queued = enqueue(state, request.request_id, request.origin, deadline_of(state.setup, *job), {job, nullptr});
  if (auto* refused = std::get_if<error_event>(&queued)) return job->sink.error(*refused);
  dispatch(self);
  arm_expiry(self);
}

void on_tokenize(self_ptr self, const text_job_ptr& job) {
  const text_task& task = *job->task();
  auto queued = enqueue(self->state, task.id, task.origin, std::numeric_limits<double>::infinity(), {nullptr, job});
  if (auto* refused = std::get_if<error_event>(&queued)) {
    text_task_result result;
    result.error = std::move(*refused);
    return job->answer(std::move(result));
  }
  dispatch(self);
}

// Not held here: submitted already (this message follows the submission),
// or unknown; the scheduler handles both.
void on_cancel(self_ptr self, const std::string& id) {
  if (!cancel_held(self->state, id)) self->send(self->state.setup.scheduler, atom::cancel_v, id);
}

caf::result<bool> on_abort(self_ptr self, const std::string& id) {
  if (cancel_held(self->state, id)) return true;
  return self->delegate(self->state.setup.scheduler, atom::abort_v, id);
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
      [self](atom::abort, const std::string& id) { return on_abort(self, id); },
      [self](atom::tick, std::uint64_t tick) { on_expiry_tick(self, tick); },
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

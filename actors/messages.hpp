#pragma once
// Every actor interface of the troupe and every message they exchange, with
// the single CAF type-ID block. Payloads that never leave the process travel
// as shared pointers to immutable values (CAF_ALLOW_UNSAFE_MESSAGE_TYPE):
// a step or a KV plan is handed over, never serialised or copied.
//
// Who talks to whom (see ARCHITECTURE.md, "The life of a request"):
//   engine ── generate / tokenize / cancel / abort ──> intake (the prepare queue)
//   intake ── encode / tokenize (one job per idle worker) ──> tokenizer ── prompt ──> intake
//   intake ── submit, cancel, abort (of what it no longer holds) ──> scheduler
//   scheduler ── kv plan ──> kv_manager ── reply ──> scheduler
//   scheduler ── run step ──> executor ── samples ──> scheduler
//   scheduler ── open / events ──> detokenizer (the request's output shard) ── events ──> sink
//   detokenizer ── reply: stop-string hits, failed streams ──> scheduler
//   scheduler ── propose (draft jobs) ──> speculator ── propose (one round) ──> draft executor
//   speculator ── drafts (and their q rows) ──> scheduler

#include <caf/all.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "actors/core/draft_proposer.hpp"
#include "actors/core/output_stream.hpp"
#include "actors/core/scheduler_types.hpp"
#include "actors/event_sink.hpp"
#include "memory/kv_protocol.hpp"
#include "troupe/engine.hpp"

namespace troupe {

/// A request as the engine received it, with where its events go.
struct submission {
  generation_request request;
  event_sink sink;
  double arrival_s = 0;  ///< engine clock (seconds since start)
};

/// A prompt made ready by a tokenizer actor: rendered (chat) and encoded.
struct prepared_prompt {
  std::vector<std::int32_t> ids;
  std::string text;                                                    ///< the prompt as text (for echo)
  std::optional<error_event> error;                                    ///< set when the prompt could not be prepared
  std::shared_ptr<const constraints::compiled_constraint> constraint;  ///< structured output; null: none
  std::int32_t constraint_vocab = 0;                                   ///< ids the constraint's masks cover
};

/// A request that passed admission and tokenization, on its way to the scheduler.
struct admitted_request {
  request_spec spec;
  output_settings output;
  event_sink sink;
  accepted_event accepted;
  double arrival_s = 0;
};

/// Opens a request's output stream on its tokenizer shard.
struct stream_open {
  request_handle handle = 0;
  output_settings output;
  event_sink sink;
  accepted_event accepted;
};

/// Scheduler events for the requests of one tokenizer shard; tokens of a
/// choice come before its finish.
struct stream_batch {
  std::vector<token_event> tokens;
  std::vector<finish_event> finished;
  std::vector<std::pair<request_handle, error_event>> errors;  ///< requests that failed after admission
};

/// An output shard's answer to a batch of events, for the scheduler to act on.
struct stream_feedback {
  std::vector<std::pair<request_handle, int>> stops;  ///< (request, choice) whose output hit a stop string
  std::vector<request_handle> failed;  ///< requests whose output failed to stream (their sink has the error)
};

using text_task_ptr = std::shared_ptr<const text_task>;

/// A /tokenize or /detokenize call and who waits for its result.
class text_job {
 public:
  text_job(text_task_ptr task, std::function<void(text_task_result)> done)
      : task_(std::move(task)), done_(std::move(done)) {}
  text_job(const text_job&) = delete;
  text_job& operator=(const text_job&) = delete;
  /// A job dropped unanswered (its actor stopped) still answers, so no
  /// caller waits forever.
  ~text_job() {
    if (done_) done_({{}, {}, error_event{{}, error_kind::shutting_down, "the engine has shut down", {}, {}}});
  }

  const text_task_ptr& task() const { return task_; }
  /// Hands `result` to the caller; only the first call does. The intake
  /// alone calls it (jobs are shared as const, so the callback is mutable).
  void answer(text_task_result result) const {
    if (auto done = std::exchange(done_, nullptr)) done(std::move(result));
  }

 private:
  text_task_ptr task_;
  mutable std::function<void(text_task_result)> done_;
};

/// Live changes to scheduling knobs: the public settings_change, as sent to the scheduler.
using config_change = settings_change;

using submission_ptr = std::shared_ptr<const submission>;
using prepared_prompt_ptr = std::shared_ptr<const prepared_prompt>;
using admitted_request_ptr = std::shared_ptr<const admitted_request>;
using stream_open_ptr = std::shared_ptr<const stream_open>;
using stream_batch_ptr = std::shared_ptr<const stream_batch>;
using step_work_ptr = std::shared_ptr<const scheduled_step>;
using step_result_ptr = std::shared_ptr<const step_result>;
using kv_request_ptr = std::shared_ptr<const kv_request>;
using kv_reply_ptr = std::shared_ptr<const kv_reply>;
using stream_feedback_ptr = std::shared_ptr<const stream_feedback>;
using text_job_ptr = std::shared_ptr<const text_job>;
using text_task_result_ptr = std::shared_ptr<const text_task_result>;
using engine_stats_ptr = std::shared_ptr<const engine_stats>;
using config_change_ptr = std::shared_ptr<const config_change>;
using draft_request_ptr = std::shared_ptr<const draft_request>;
using draft_reply_ptr = std::shared_ptr<const draft_reply>;
/// The live requests as the operator sees them, oldest first.
using request_table_ptr = std::shared_ptr<const std::vector<request_info>>;

}  // namespace troupe

CAF_BEGIN_TYPE_ID_BLOCK(troupe, caf::first_custom_type_id)
CAF_ADD_TYPE_ID(troupe, (troupe::submission_ptr))
CAF_ADD_TYPE_ID(troupe, (troupe::prepared_prompt_ptr))
CAF_ADD_TYPE_ID(troupe, (troupe::admitted_request_ptr))
CAF_ADD_TYPE_ID(troupe, (troupe::stream_open_ptr))
CAF_ADD_TYPE_ID(troupe, (troupe::stream_batch_ptr))
CAF_ADD_TYPE_ID(troupe, (troupe::step_work_ptr))
CAF_ADD_TYPE_ID(troupe, (troupe::step_result_ptr))
CAF_ADD_TYPE_ID(troupe, (troupe::kv_request_ptr))
CAF_ADD_TYPE_ID(troupe, (troupe::kv_reply_ptr))
CAF_ADD_TYPE_ID(troupe, (troupe::stream_feedback_ptr))
CAF_ADD_TYPE_ID(troupe, (troupe::text_task_ptr))
CAF_ADD_TYPE_ID(troupe, (troupe::text_job_ptr))
CAF_ADD_TYPE_ID(troupe, (troupe::text_task_result_ptr))
CAF_ADD_TYPE_ID(troupe, (troupe::engine_stats_ptr))
CAF_ADD_TYPE_ID(troupe, (troupe::config_change_ptr))
CAF_ADD_TYPE_ID(troupe, (troupe::draft_request_ptr))
CAF_ADD_TYPE_ID(troupe, (troupe::draft_reply_ptr))
CAF_ADD_TYPE_ID(troupe, (troupe::request_table_ptr))
CAF_ADD_TYPE_ID(troupe, (troupe::accepted_event))
CAF_ADD_TYPE_ID(troupe, (troupe::delta_event))
CAF_ADD_TYPE_ID(troupe, (troupe::finished_event))
CAF_ADD_TYPE_ID(troupe, (troupe::error_event))
CAF_ADD_ATOM(troupe, troupe::atom, generate, "generate")
CAF_ADD_ATOM(troupe, troupe::atom, encode, "encode")
CAF_ADD_ATOM(troupe, troupe::atom, submit, "submit")
CAF_ADD_ATOM(troupe, troupe::atom, cancel, "cancel")
CAF_ADD_ATOM(troupe, troupe::atom, run_step, "runstep")
CAF_ADD_ATOM(troupe, troupe::atom, open, "open")
CAF_ADD_ATOM(troupe, troupe::atom, events, "events")
CAF_ADD_ATOM(troupe, troupe::atom, stats, "stats")
CAF_ADD_ATOM(troupe, troupe::atom, configure, "configure")
CAF_ADD_ATOM(troupe, troupe::atom, drain, "drain")
CAF_ADD_ATOM(troupe, troupe::atom, tick, "tick")
CAF_ADD_ATOM(troupe, troupe::atom, fail, "fail")
CAF_ADD_ATOM(troupe, troupe::atom, propose, "propose")
CAF_ADD_ATOM(troupe, troupe::atom, requests, "requests")
CAF_ADD_ATOM(troupe, troupe::atom, abort, "abort")
CAF_ADD_ATOM(troupe, troupe::atom, priority, "priority")
CAF_ADD_ATOM(troupe, troupe::atom, shard, "shard")
CAF_ADD_ATOM(troupe, troupe::atom, tokenize, "tokenize")
CAF_ADD_ATOM(troupe, troupe::atom, hang_check, "hangcheck")
CAF_END_TYPE_ID_BLOCK(troupe)

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::submission_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::prepared_prompt_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::admitted_request_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::stream_open_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::stream_batch_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::step_work_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::step_result_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::kv_request_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::kv_reply_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::stream_feedback_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::text_task_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::text_job_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::text_task_result_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::engine_stats_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::config_change_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::draft_request_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::draft_reply_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::request_table_ptr)
// The four sink events go to caller-provided actors as plain values; they
// stay in the process, so they need no serialisation either.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::accepted_event)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::delta_event)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::finished_event)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::error_event)

namespace troupe {

/// Runs steps on one execution stream (a detached actor: its work blocks).
using executor_actor = caf::typed_actor<
    /// Runs the step's block copies, forward pass and sampling; replies one
    /// sample per logits row, or an error when the backend failed.
    caf::replies_to<atom::run_step, step_work_ptr>::with<step_result_ptr>,
    /// A drafter's executor only: runs a whole draft round (every draft step
    /// of it, back to back) and replies the drafts; an error elsewhere.
    caf::replies_to<atom::propose, draft_request_ptr>::with<draft_reply_ptr>,
    /// Test hook: every later step fails, as if the device died.
    caf::reacts_to<atom::fail>>;

/// Owns the block manager: one request per step, one reply.
using kv_manager_actor = caf::typed_actor<
    /// Applies what fits of a step's KV needs; the reply lists what did not.
    caf::replies_to<kv_request_ptr>::with<kv_reply_ptr>>;

/// Text in: prepares prompts and runs /tokenize calls, one job at a time
/// from the intake's prepare queue (a detached actor: its work blocks).
using tokenizer_actor = caf::typed_actor<
    /// Renders (chat), encodes and compiles the constraint of a prompt;
    /// errors travel inside the reply.
    caf::replies_to<atom::encode, submission_ptr>::with<prepared_prompt_ptr>,
    /// Runs a /tokenize or /detokenize call; errors travel inside the reply.
    caf::replies_to<atom::tokenize, text_task_ptr>::with<text_task_result_ptr>>;

/// Text out: the output shard of the requests with handle % shards, so
/// event delivery never queues behind prompt preparation.
using detokenizer_actor = caf::typed_actor<
    /// Starts a request's output stream and sends `accepted` to its sink.
    caf::reacts_to<atom::open, stream_open_ptr>,
    /// Tokens, finishes and failures of this shard's requests; replies the
    /// choices that hit a stop string and the requests whose stream failed.
    caf::replies_to<atom::events, stream_batch_ptr>::with<stream_feedback_ptr>>;

/// Plans steps; owns the scheduler core and every request's progress.
using scheduler_actor = caf::typed_actor<
    /// Admits a prepared request (or sends its sink an error).
    caf::reacts_to<atom::submit, admitted_request_ptr>,
    /// Cancels a request by id (also one not yet submitted).
    caf::reacts_to<atom::cancel, std::string>,
    /// A consistent snapshot of counters and gauges.
    caf::replies_to<atom::stats>::with<engine_stats_ptr>,
    /// Applies live knob changes at the next step; replies "" or what was wrong.
    caf::replies_to<atom::configure, config_change_ptr>::with<std::string>,
    /// The live requests for the operator (id, state, policy class, tokens, blocks, age, TTFT).
    caf::replies_to<atom::requests>::with<request_table_ptr>,
    /// Aborts a live request by id (finish reason abort); replies false when no live request has it.
    caf::replies_to<atom::abort, std::string>::with<bool>,
    /// Sets a live request's policy priority; replies false when no live request has that id.
    caf::replies_to<atom::priority, std::string, std::int32_t>::with<bool>,
    /// Stops admitting; replies true once no request is left or `seconds` passed (then aborts the rest).
    caf::replies_to<atom::drain, double>::with<bool>,
    /// Internal: re-check timeouts and idle work.
    caf::reacts_to<atom::tick>,
    /// Internal: the executor's hang check, due when the oldest step in
    /// flight has run step_timeout.
    caf::reacts_to<atom::hang_check>,
    /// The intake restarted output shard `index` as this actor (a
    /// detokenizer_actor): the requests streamed by the dead one fail.
    caf::reacts_to<atom::shard, std::int32_t, caf::actor>>;

/// Proposes draft tokens with a draft model (a smaller checkpoint, or the
/// target with layers skipped) running on its own executor (stream).
using speculator_actor = caf::typed_actor<
    /// Drafts for the jobs' sequences of one planned target step, in job
    /// order; an error when the draft executor failed (the step then runs
    /// without drafts).
    caf::replies_to<atom::propose, draft_request_ptr>::with<draft_reply_ptr>>;

/// Front door: validates, bounds and queues prompt preparation, submits.
using intake_actor = caf::typed_actor<
    /// A new request from the engine facade or an embedder.
    caf::reacts_to<atom::generate, submission_ptr>,
    /// Cancels a request (or a text task) by id: removed from the prepare
    /// queue (it never runs; its choices finish with reason abort), else
    /// sent on to the scheduler.
    caf::reacts_to<atom::cancel, std::string>,
    /// Aborts a request by id as cancel does (the admin's abort): true when
    /// the prepare queue held it, else the scheduler's answer (false: no
    /// live request has that id).
    caf::replies_to<atom::abort, std::string>::with<bool>,
    /// Internal: the tick for the earliest deadline of a queued prompt (its
    /// number: a tick superseded by a later-armed one does nothing).
    caf::reacts_to<atom::tick, std::uint64_t>,
    /// A /tokenize or /detokenize call, queued as a prompt is; answered through the job.
    caf::reacts_to<atom::tokenize, text_job_ptr>,
    /// New request limits (the change's limit fields, already validated):
    /// "" or why not; requests read after the answer are held to them.
    caf::replies_to<atom::configure, config_change_ptr>::with<std::string>>;

}  // namespace troupe

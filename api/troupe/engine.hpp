#pragma once
// The embeddable engine: start the troupe in-process from a config, submit
// requests with a sink for their events, cancel, read statistics, shut down.
// Installed as <troupe/engine.hpp>. No CAF, Beast or JSON types here: a
// caller that wants to use its own caf::actor_system includes
// <troupe/engine_caf.hpp> instead.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "troupe/request.hpp"

namespace troupe {

class config_store;

/// Everything an engine needs to start. Field names follow the knobs and
/// their CLI flags (`--max-num-batched-tokens` is max_num_batched_tokens);
/// defaults, ranges and units are the registry's (config/knobs.cpp,
/// `troupe knobs`, docs/operations.md), which this struct does not restate.
struct engine_config {
  /// Every field at its registry default.
  engine_config();
  /// The values of the engine knobs in `knobs` (a store of engine_knobs() or
  /// all_knobs(), layered from file, environment and flags).
  explicit engine_config(const config_store& knobs);

  /// Empty when every field is a valid value of its knob (range, choices),
  /// else why not, naming the knob. engine::start refuses such a config.
  std::string problem() const;
  bool operator==(const engine_config&) const = default;

  std::string model_dir;                   ///< HF directory; empty: the built-in demo model
  std::string served_model_name;           ///< name clients use; empty: the directory's name
  std::string device;                      ///< "cpu", "cuda" or "auto"
  int threads;                             ///< cpu backend threads (0: all cores)
  int max_num_batched_tokens;              ///< token budget per step
  int max_num_seqs;                        ///< running sequences at most
  int max_prefill_chunk;                   ///< tokens of one prompt per step at most
  std::int64_t max_step_workspace_bytes;   ///< one step's activations and logits at most (0: automatic)
  int block_size;                          ///< KV tokens per block
  std::int64_t kv_cache_bytes;             ///< device KV pool size (0: derived from free memory)
  double kv_cache_memory_fraction;         ///< device KV pool as a fraction of device memory (0: use the bytes)
  std::int64_t swap_space_bytes;           ///< host swap pool size
  double swap_space_memory_fraction;       ///< host swap pool as a fraction of host memory (0: use the bytes)
  int max_model_len;                       ///< context length limit (0: the model's)
  std::string policy;                      ///< fcfs | priority | mlfq | deadline | fair
  int mlfq_quantum;                        ///< mlfq: decode steps at the top level before demotion
  int mlfq_levels;                         ///< mlfq: number of queues
  int mlfq_quantum_growth;                 ///< mlfq: factor between one level's quantum (and prompt limit) and the next
  int mlfq_entry_prompt_tokens;            ///< mlfq: longest prompt that joins the top level
  double mlfq_promote_after_s;             ///< mlfq: unserved this long, seconds: back to the top level
  double fair_prompt_weight;               ///< fair: service per computed prompt token
  double fair_output_weight;               ///< fair: service per generated token
  int fair_idle_tenants;                   ///< fair: idle tenants whose counters are remembered
  int swap_min_tokens;                     ///< auto preemption: recompute sequences shorter than this
  int preemption_grace_steps;              ///< steps before a resumed sequence may be preempted for urgency
  double admission_watermark;              ///< fraction of device blocks kept free when admitting
  std::string preemption_mode;             ///< swap | recompute | auto
  bool enable_prefix_caching;              ///< reuse KV blocks of identical prompt prefixes
  int max_waiting_requests;                ///< queue bound; more is rejected as overloaded
  int max_pending_prompts;                 ///< prompts (and /tokenize calls) queued for or in preparation at most
  int max_pending_prompts_per_connection;  ///< as max_pending_prompts, per origin (HTTP connection or WebSocket)
  int max_n;                               ///< limit on `n`
  int max_stop_strings;                    ///< limit on `stop` entries
  int max_stop_string_bytes;               ///< limit on each stop string
  int max_logit_bias;                      ///< limit on `logit_bias` entries
  int max_top_logprobs;                    ///< limit on `top_logprobs`
  std::int64_t max_request_output_tokens;  ///< limit on tokens one request may generate (all prompts × n)
  int min_request_priority;                ///< most urgent `priority` a request may ask for
  double min_request_deadline_ms;          ///< shortest `deadline_ms` a request may ask for
  int tokenizer_workers;                   ///< prompt-preparation workers, and output shards, each
  double request_timeout_s;                ///< default per-request timeout, seconds
  double step_timeout_s;                   ///< a step unanswered this long fails the engine, seconds
  bool batch_invariant;              ///< bitwise batch-independent numerics (slower prefill; see docs/operations.md)
  std::string tool_call_parser;      ///< tool-call format: auto (from the chat template), none or a family
  std::string quantization;  ///< weight-only quantisation at load: auto | none | int8 | int4 | int4_asym | int5_asym |
                             ///< int4_nl | int6 | int4_g16
  std::string lm_head_quantization;  ///< the LM head's format at load: auto | none | int8 | int4 | int4_asym |
                                     ///< int5_asym | int4_nl | int6 | int4_g16
  std::string speculative;           ///< speculative decoding proposer: off | ngram | draft | layerskip
  std::string draft_model;           ///< draft: HF directory (empty: the demo draft with the demo model)
  std::string draft_quantization;    ///< draft: its weights' format at load: auto (quantization's) | none | int8 | ...
  std::int64_t draft_vocab_size;     ///< draft: its LM head scores ids [0, this) only (0: every id)
  std::string speculative_skip_layers;  ///< layerskip: layers skipped ("4-7", "1,3,5"; empty: the upper half)
  int draft_threads;                    ///< draft, layerskip: the drafter's CPU threads (0: as many as threads)
  std::string speculative_draft_ahead;  ///< draft, layerskip: draft the next round during verification: auto|on|off
  int prompt_lookup_max;                ///< ngram: longest suffix matched
  int prompt_lookup_min;                ///< ngram: shortest suffix matched
  int num_speculative_tokens;           ///< speculative decoding: draft tokens per sequence and step at most (0: off)
  bool speculative_adaptive;            ///< speculative decoding: per-sequence draft length follows acceptance
  bool speculative_turn_down;           ///< speculative decoding: only where measured costs say it pays
  int speculative_max_batch;            ///< speculative decoding: off in steps with more decoding sequences
  int speculative_tree_width;           ///< speculative decoding: draft tree branches (1: chains)
  int test_fail_executor_after_steps;   ///< testing hook: the executor fails after this many steps (-1: never)
  std::string test_executor_fault;      ///< testing hook: "error", "throw", "malformed" or "hang" (how it fails)
  std::string test_tokenizer_fault_marker;  ///< testing hook: prompts containing it make a tokenizer actor fail
  /// Testing hook: "throw" or "exit" (preparing the prompt throws: the
  /// request fails, or the worker dies), "output" or "output_exit" (its
  /// output shard throws streaming it: the request fails, or the shard dies).
  std::string test_tokenizer_fault;
};

/// Receives one request's events. Called from engine threads: return quickly
/// (post to your own executor). Events of one request arrive in order.
class request_sink {
 public:
  virtual ~request_sink() = default;
  virtual void on_accepted(const accepted_event& event) = 0;
  virtual void on_delta(const delta_event& event) = 0;
  virtual void on_finished(const finished_event& event) = 0;
  virtual void on_error(const error_event& event) = 0;
};

/// A histogram snapshot: cumulative counts per upper bound, Prometheus style.
struct histogram_snapshot {
  std::vector<double> upper_bounds;          ///< ascending; +Inf is implicit
  std::vector<std::uint64_t> bucket_counts;  ///< cumulative, one per bound, then +Inf
  double sum = 0.0;
  std::uint64_t count = 0;
};

/// The scheduler settings that may change while the engine runs (the knobs
/// marked live in `troupe knobs`; each field is named after its knob, units
/// as there).
struct live_settings {
  std::string policy;           ///< fcfs, priority, mlfq, deadline, fair
  std::string preemption_mode;  ///< auto, swap, recompute
  int max_num_batched_tokens = 0;
  int max_num_seqs = 0;
  int max_prefill_chunk = 0;
  int max_waiting_requests = 0;
  int mlfq_quantum = 0;
  int mlfq_levels = 0;
  int mlfq_quantum_growth = 0;
  int mlfq_entry_prompt_tokens = 0;
  double mlfq_promote_after = 0;  ///< seconds
  double fair_prompt_weight = 0;
  double fair_output_weight = 0;
  int fair_idle_tenants = 0;
  int swap_min_tokens = 0;
  int preemption_grace_steps = 0;
  double admission_watermark = 0;  ///< fraction of device blocks
  int num_speculative_tokens = 0;
  bool speculative_adaptive = true;
  bool speculative_turn_down = true;
  int speculative_max_batch = 0;
  int speculative_tree_width = 1;
  std::string speculative_draft_ahead = "auto";  ///< auto, on, off
  // Request limits, checked at intake (and by the API before it).
  int max_n = 0;
  int max_stop_strings = 0;
  int max_stop_string_bytes = 0;
  int max_logit_bias = 0;
  int max_top_logprobs = 0;
  std::int64_t max_request_output_tokens = 0;
  int min_request_priority = 0;
  double min_request_deadline_ms = 0;
};

/// A change to some live settings; unset fields stay as they are.
struct settings_change {
  std::optional<std::string> policy;
  std::optional<std::string> preemption_mode;
  std::optional<int> max_num_batched_tokens;
  std::optional<int> max_num_seqs;
  std::optional<int> max_prefill_chunk;
  std::optional<int> max_waiting_requests;
  std::optional<int> mlfq_quantum;
  std::optional<int> mlfq_levels;
  std::optional<int> mlfq_quantum_growth;
  std::optional<int> mlfq_entry_prompt_tokens;
  std::optional<double> mlfq_promote_after;
  std::optional<double> fair_prompt_weight;
  std::optional<double> fair_output_weight;
  std::optional<int> fair_idle_tenants;
  std::optional<int> swap_min_tokens;
  std::optional<int> preemption_grace_steps;
  std::optional<double> admission_watermark;
  std::optional<int> num_speculative_tokens;
  std::optional<bool> speculative_adaptive;
  std::optional<bool> speculative_turn_down;
  std::optional<int> speculative_max_batch;
  std::optional<int> speculative_tree_width;
  std::optional<std::string> speculative_draft_ahead;
  std::optional<int> max_n;
  std::optional<int> max_stop_strings;
  std::optional<int> max_stop_string_bytes;
  std::optional<int> max_logit_bias;
  std::optional<int> max_top_logprobs;
  std::optional<std::int64_t> max_request_output_tokens;
  std::optional<int> min_request_priority;
  std::optional<double> min_request_deadline_ms;
};

/// One live request as the operator sees it (GET /admin/requests).
struct request_info {
  std::string id;
  std::string state;                 ///< queued, prefilling, decoding, swapped, preempted, finishing
  int priority = 0;                  ///< policy priority (lower runs first)
  std::string user;                  ///< tenant (policy fair)
  std::optional<double> deadline_s;  ///< seconds after arrival (policy deadline)
  int mlfq_level = 0;                ///< the level the mlfq policy keeps it at (0 under other policies)
  int n = 1;                         ///< choices
  std::int64_t prompt_tokens = 0;
  std::int64_t generated_tokens = 0;  ///< all choices
  std::int64_t device_blocks = 0;     ///< KV blocks on the device, all choices
  std::int64_t host_blocks = 0;       ///< KV blocks swapped to the host
  double age_s = 0;                   ///< since arrival
  std::optional<double> ttft_s;       ///< time to first token, once there is one
};

/// A consistent snapshot of the engine's counters and gauges.
struct engine_stats {
  int num_requests_running = 0;
  int num_requests_waiting = 0;
  int num_requests_swapped = 0;
  int num_prompts_pending = 0;            ///< prompts and /tokenize calls queued for or in preparation
  double kv_cache_usage = 0.0;            ///< device pool, fraction in [0, 1]
  double host_kv_cache_usage = 0.0;       ///< swap pool, fraction in [0, 1]
  std::int64_t kv_pool_device_bytes = 0;  ///< device KV pool, allocated and resident since start
  std::int64_t kv_pool_host_bytes = 0;    ///< host swap pool, allocated and resident since start
  std::int64_t kv_blocks_total = 0;
  std::int64_t kv_blocks_free = 0;
  std::uint64_t prefix_cache_queries = 0;  ///< prompt tokens looked up
  std::uint64_t prefix_cache_hits = 0;     ///< prompt tokens found
  std::uint64_t prompt_tokens = 0;
  std::uint64_t generation_tokens = 0;
  std::map<std::string, std::uint64_t> preemptions;      ///< by kind: swap, recompute
  std::map<std::string, std::uint64_t> request_success;  ///< by finish reason
  std::uint64_t steps = 0;
  std::uint64_t step_failures = 0;                    ///< steps failed on an intact backend (their requests only)
  std::uint64_t step_sequences = 0;                   ///< sequences over all steps (divided by steps: mean batch size)
  std::uint64_t spec_decode_num_drafts = 0;           ///< verified draft runs (a sequence's drafts in one step)
  std::uint64_t spec_decode_num_draft_tokens = 0;     ///< draft tokens verified
  std::uint64_t spec_decode_num_accepted_tokens = 0;  ///< of those, accepted
  std::vector<std::uint64_t> spec_decode_num_accepted_tokens_per_pos;  ///< [k_max] accepted at draft position i
  std::uint64_t spec_decode_num_ahead_drafts = 0;  ///< sequences drafted for while their drafts were being verified
  std::uint64_t spec_decode_num_ahead_used = 0;    ///< of those, whose next step took the drafts (the guess held)
  histogram_snapshot time_to_first_token_s;
  histogram_snapshot inter_token_latency_s;
  histogram_snapshot e2e_request_latency_s;
  histogram_snapshot request_queue_time_s;
  histogram_snapshot iteration_tokens;
  histogram_snapshot model_execute_time_s;  ///< executor wall time per step, seconds
  live_settings settings;                   ///< current live settings
  bool healthy = true;                      ///< false when an executor died or is stuck
  std::string health_detail;
};

/// The model's own sampling defaults (its generation_config.json); unset:
/// the model has none. Requests and the default_* knobs override them.
struct model_sampling_defaults {
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int> top_k;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
  std::optional<int> max_tokens;  ///< `max_new_tokens`
};

/// Static facts about the loaded model, for /v1/models and validation.
struct model_info {
  std::string served_model_name;
  std::string model_dir;
  int vocab_size = 0;
  int max_model_len = 0;
  std::string device;
  /// The tool-call format read out of chat output ("none", "llama3_json",
  /// "hermes", "mistral", "deepseek_v3"): the tool_call_parser knob, or
  /// what the chat template shows when it is "auto".
  std::string tool_call_parser = "none";
  std::int64_t kv_pool_device_bytes = 0;      ///< device KV pool size, fixed at start
  std::int64_t kv_pool_host_bytes = 0;        ///< host swap pool size, fixed at start
  model_sampling_defaults sampling_defaults;  ///< from generation_config.json
};

/// An in-process engine. Thread-safe: submit/cancel/stats from any thread.
class engine {
 public:
  /// Loads the model and spawns the troupe in an actor system of its own.
  /// Throws std::runtime_error naming the file or field that is wrong.
  static std::unique_ptr<engine> start(const engine_config& config);

  virtual ~engine() = default;

  /// Submits a request; every event goes to `sink`. Returns the request id
  /// (the caller's, or one assigned). Validation errors arrive as on_error.
  virtual std::string submit(generation_request request, std::shared_ptr<request_sink> sink) = 0;
  /// Cancels a request (or a text task by its id); its choices finish with
  /// reason `abort` and its KV blocks are free within one step; a prompt
  /// still awaiting preparation is never prepared. Unknown ids are ignored.
  virtual void cancel(const std::string& request_id) = 0;
  /// A snapshot of counters and gauges (waits for the scheduler, bounded).
  virtual engine_stats stats() = 0;
  virtual const model_info& info() const = 0;
  /// Applies `change` at the next step boundary, all or nothing. Returns an
  /// empty string, or why the change was refused (nothing changed then).
  virtual std::string configure(const settings_change& change) = 0;
  /// The live requests, oldest first (waits for the scheduler, bounded).
  virtual std::vector<request_info> list_requests() { return {}; }
  /// Aborts a live request as cancel() does, one whose prompt awaits
  /// preparation too; false when no live request has that id. The default
  /// looks the id up in list_requests().
  virtual bool abort(const std::string& request_id) {
    const std::vector<request_info> live = list_requests();
    const bool found = std::any_of(live.begin(), live.end(), [&](const request_info& r) { return r.id == request_id; });
    cancel(request_id);
    return found;
  }
  /// Sets a live request's policy priority (lower runs first) from the next
  /// step on. Returns "" or why not (unknown id).
  virtual std::string set_priority(const std::string& request_id, int /*priority*/) {
    return "no live request '" + request_id + "'";
  }

  /// Text ↔ ids with the model's tokenizer (for /tokenize and /detokenize).
  virtual std::vector<std::int32_t> tokenize(const std::string& text, bool add_special_tokens) = 0;
  virtual std::string detokenize(const std::vector<std::int32_t>& ids, bool skip_special_tokens) = 0;
  /// Renders chat messages (JSON) through the model's template.
  virtual std::string apply_chat_template(const std::string& messages_json, const std::string& tools_json,
                                          bool add_generation_prompt) = 0;
  /// Runs `task` off the caller's thread where the engine can: Troupe's
  /// engine queues it for a tokenizer worker under the bounds of prompt
  /// preparation (max_pending_prompts, per connection too), where
  /// cancel(task.id) drops it until it runs. Calls `done` exactly once,
  /// possibly from an engine thread: return quickly. The
  /// default runs it at once, on the calling thread, with tokenize(),
  /// detokenize() and apply_chat_template().
  virtual void run_text_task(const text_task& task, std::function<void(text_task_result)> done);

  /// Stops admitting, lets running requests finish for up to `drain`, aborts
  /// the rest, and stops every actor. Idempotent.
  virtual void shutdown(std::chrono::milliseconds drain) = 0;
};

/// A sink built from lambdas (any may be empty).
struct callback_sink final : request_sink {
  std::function<void(const accepted_event&)> accepted;
  std::function<void(const delta_event&)> delta;
  std::function<void(const finished_event&)> finished;
  std::function<void(const error_event&)> error;

  void on_accepted(const accepted_event& e) override {
    if (accepted) accepted(e);
  }
  void on_delta(const delta_event& e) override {
    if (delta) delta(e);
  }
  void on_finished(const finished_event& e) override {
    if (finished) finished(e);
  }
  void on_error(const error_event& e) override {
    if (error) error(e);
  }
};

}  // namespace troupe

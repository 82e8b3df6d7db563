#pragma once
// The scheduler core's vocabulary: its configuration, what a request brings,
// the events it reports, and the step it plans. Plain values, so the actor
// layer can turn each into a message.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "actors/core/ngram_proposer.hpp"
#include "kernels/sampling.hpp"
#include "kernels/step_batch.hpp"
#include "memory/block_manager.hpp"
#include "memory/kv_protocol.hpp"
#include "troupe/engine.hpp"
#include "troupe/request.hpp"

namespace troupe {

struct request_state;

/// The scheduler's name for an admitted request.
using request_handle = std::uint64_t;

/// How sequences are preempted when blocks run out or urgent work arrives.
enum class preemption_mode : std::uint8_t {
  swap,       ///< blocks copied to the host pool (recompute when the host pool is full)
  recompute,  ///< blocks dropped; prompt + outputs are prefilled again later
  automatic,  ///< swap long sequences when the host has room, recompute short ones
};

/// What one preemption did.
enum class preemption_kind : std::uint8_t { swap, recompute };

/// "swap", "recompute", "auto".
const char* preemption_mode_name(preemption_mode mode);
/// Parses a preemption_mode_name; nullopt when unknown.
std::optional<preemption_mode> parse_preemption_mode(std::string_view name);
/// "swap" or "recompute".
const char* preemption_kind_name(preemption_kind kind);

/// Whether the next draft round is drafted while the target verifies
/// (knob speculative_draft_ahead; actors/core/draft_ahead.hpp).
enum class draft_ahead_mode : std::uint8_t {
  automatic,  ///< where the drafter has compute of its own (speculation.hpp, drafts_ahead)
  on,
  off,
};

/// "auto", "on", "off".
const char* draft_ahead_mode_name(draft_ahead_mode mode);
/// Parses a draft_ahead_mode_name; nullopt when unknown.
std::optional<draft_ahead_mode> parse_draft_ahead_mode(std::string_view name);

/// Tunables of every policy (each reads its own part). Those that are knobs
/// come from the engine configuration; the others are fixed here.
struct policy_config {
  /// The knob-backed tunables at their registry defaults.
  policy_config();
  /// The knob-backed tunables `engine` sets (every field, knobs mlfq_* and fair_*).
  explicit policy_config(const engine_config& engine);

  // mlfq (FastServe skip-join multi-level feedback queue)
  int mlfq_levels;               ///< number of queues
  int mlfq_base_quantum;         ///< decode iterations a request gets at level 0 (knob mlfq_quantum)
  int mlfq_quantum_growth;       ///< level i's quantum is base * growth^i
  int mlfq_entry_prompt_tokens;  ///< level i admits prompts up to this * growth^i tokens
  double mlfq_promote_after_s;   ///< unserved this long: back to level 0 (knob mlfq_promote_after)
  // fair (virtual token counters per tenant)
  double fair_prompt_weight;      ///< service per computed prompt token
  double fair_output_weight;      ///< service per generated token
  std::size_t fair_idle_tenants;  ///< tenants without live requests whose counters are kept at most
};

/// Knobs of the scheduler. All but the pool sizes may change between steps.
/// The fields that are knobs come from the engine configuration; the model's
/// facts (context length, pool sizes, eos ids) are set by whoever loads it.
struct scheduler_config {
  /// The knob-backed fields at their registry defaults.
  scheduler_config();
  /// The knob-backed fields `engine` sets. Throws std::runtime_error naming
  /// the knob when its preemption_mode is unknown.
  explicit scheduler_config(const engine_config& engine);

  int max_num_batched_tokens;                ///< token budget per step
  int max_num_seqs;                          ///< device-resident sequences at most
  int max_prefill_chunk;                     ///< tokens of one sequence's prefill per step at most
  int block_size;                            ///< KV tokens per block (must match the KV manager)
  int max_model_len = 4096;                  ///< context length: prompt + outputs (the model's, or the knob when set)
  int max_waiting_requests;                  ///< queued (never started) requests at most; more are rejected
  std::int32_t num_device_blocks = 0;        ///< device pool size, the estimate until the KV manager first replies
  std::int32_t num_host_blocks = 0;          ///< host pool size, likewise
  preemption_mode preemption;                ///< how sequences give up KV (knob preemption_mode)
  policy_config policies;                    ///< tunables of the policies
  int swap_min_tokens;                       ///< automatic mode: recompute sequences shorter than this
  /// The drafter works in the target's KV (executor_resources::
  /// shares_target_kv): it has no context to catch up on, so near a
  /// sequence's end it may speculate as prompt lookup does; the scheduler
  /// actor keeps it off busy blocks and never drafts ahead with it.
  bool drafter_shares_target_kv = false;
  int preemption_grace_steps;                ///< steps a sequence runs after admission or resumption before a more
                                             ///< urgent request may preempt it (running out of blocks ignores this)
  double admission_watermark;                ///< fraction of device blocks kept free when admitting new work
  std::vector<std::int32_t> eos_token_ids;   ///< the model's end-of-sequence ids
  bool enable_prefix_caching;                ///< reuse cached KV blocks of identical prefixes
  std::uint64_t seed = 0x7472'6f75'7065ull;  ///< source of seeds for requests that bring none
  int num_speculative_tokens;                ///< k_max: draft slots per decoding sequence and step (0: off)
  bool speculative_adaptive;                 ///< each sequence's k follows its acceptance rate
  bool speculative_turn_down;                ///< speculate only where the cost model says it pays (else every eligible)
  int speculative_max_batch;                 ///< no speculation in a step with more decoding sequences than this
  int speculative_tree_width;                ///< draft tree branches (1: chains); draft slots = k * width
  draft_ahead_mode speculative_draft_ahead;  ///< read by the scheduler actor as it dispatches a step
  /// Prompt lookup (knob speculative = ngram; max_ngram 0 otherwise): the
  /// core looks each decode's match up as it plans, grants draft slots only
  /// where there is one and no more than it offers, and measures acceptance
  /// per match length.
  ngram_settings prompt_lookup{.max_ngram = 0, .min_ngram = 1};
};

/// What one step's workspace (the model's activations and logits) costs,
/// and the limit fixed at start that live budget changes must stay under.
struct workspace_bound {
  std::size_t per_token = 0;  ///< bytes per token of a step
  std::size_t per_row = 0;    ///< bytes per logits row
  std::size_t limit = 0;      ///< bytes at most (0: unchecked)

  /// Bytes a step at these budgets takes: `max_num_batched_tokens` tokens,
  /// and a logits row for each of up to `max_num_seqs` sequences (a fork
  /// or a verify group takes more; the model refuses a step past the limit).
  std::size_t bytes(int max_num_batched_tokens, int max_num_seqs) const;
  /// "" when steps at these budgets fit under the limit; otherwise why not,
  /// naming both knobs and max_step_workspace_bytes.
  std::string problem(int max_num_batched_tokens, int max_num_seqs) const;
};

/// The KV manager's configuration that matches `config`: its block size,
/// pool sizes and prefix caching (no hash key: the manager draws a random one).
block_manager_config kv_manager_config(const scheduler_config& config);

/// What the scheduler needs of one request (make_request_spec builds it
/// from the public generation_request and its prompt ids).
struct request_spec {
  std::string request_id;
  std::vector<std::int32_t> prompt;  ///< prompt token ids, not empty
  sampling_params sampling;
  std::optional<std::uint64_t> seed;  ///< none: drawn from scheduler_config::seed
  int max_tokens = 16;                ///< < 0: up to the context length
  int min_tokens = 0;
  bool ignore_eos = false;
  std::vector<std::int32_t> stop_token_ids;
  int n = 1;                         ///< choices sharing the prompt, >= 1
  int priority = 0;                  ///< lower is more urgent (policy priority)
  std::optional<double> deadline_s;  ///< finish within this many seconds of arrival (policy deadline)
  std::string user;                  ///< tenant (policy fair)
  std::optional<double> timeout_s;   ///< abort this many seconds after arrival
  std::int32_t adapter_id = 0;       ///< LoRA adapter slot (0: none)
  std::uint64_t cache_salt = 0;      ///< prefix-cache partition (generation_request::cache_salt)
  bool speculate = true;             ///< false: never speculative decoding for this request
  /// Structured output compiled against the vocabulary (the tokenizer
  /// actor compiles it); null: unconstrained.
  std::shared_ptr<const constraints::compiled_constraint> constraint;
  std::int32_t constraint_vocab = 0;  ///< ids the constraint's masks cover (the tokenizer's vocabulary)
};

/// The scheduler's view of a public request (deadline_ms becomes seconds).
request_spec make_request_spec(const generation_request& request, std::vector<std::int32_t> prompt_ids);

/// The seed choice `choice` samples with: the request seed for choice 0,
/// a fixed mix of (request seed, choice) otherwise; independent of batching.
std::uint64_t choice_seed(std::uint64_t request_seed, int choice);

/// The answer to submit().
struct submit_result {
  bool accepted = false;
  request_handle handle = 0;
  error_kind error = error_kind::internal;  ///< when not accepted
  std::string message;                      ///< when not accepted
};

/// A choice got a token.
struct token_event {
  request_handle request = 0;
  int choice = 0;
  sample_output sample;  ///< the token and, when asked, its logprobs
};

/// A choice finished. Usage totals are final when request_done.
struct finish_event {
  request_handle request = 0;
  int choice = 0;
  finish_reason reason = finish_reason::stop;
  usage_info usage;
  bool request_done = false;
};

/// A choice was preempted (it resumes later by itself).
struct preempt_event {
  request_handle request = 0;
  int choice = 0;
  preemption_kind kind = preemption_kind::recompute;
};

/// Events in the order they happened; a choice's token comes before its finish.
struct scheduler_events {
  std::vector<token_event> tokens;
  std::vector<finish_event> finished;
  std::vector<preempt_event> preempted;
  std::string error;  ///< non-empty when the input was rejected (nothing else changed)

  bool empty() const { return tokens.empty() && finished.empty() && preempted.empty() && error.empty(); }
  void append(scheduler_events&& other);
};

/// One sequence's share of a planned step.
struct scheduled_sequence {
  sequence_id seq = 0;
  request_handle request = 0;
  int choice = 0;
  std::int32_t start = 0;                 ///< position of the first token fed (tokens before it are in the KV cache)
  std::vector<std::int32_t> tokens;       ///< [k] ids fed at positions start .. start+k-1
  std::vector<std::int32_t> block_table;  ///< device blocks covering start+k tokens (+ draft_slots), after the KV reply
  std::int32_t num_samples = 0;           ///< rows sampled from its last token's logits: 0, 1, or n on the fork step
  std::int32_t draft_slots = 0;           ///< KV slots planned for drafts after `tokens` (speculative decoding)
  std::vector<std::int32_t> drafts;       ///< [j <= draft_slots] fed after `tokens`, verified (scheduler::set_drafts)
  std::span<const float> draft_probs;     ///< [j * vocab] the drafts' q rows, or empty (point masses)
  std::vector<std::int32_t> draft_parents;  ///< [j] a draft tree's parents (verify_group::parents), or empty: a chain
  std::int32_t tree_width = 1;              ///< branches a proposer may put in the draft slots (1: a chain)
  /// Prompt lookup: where in prompt + outputs the continuation of the match
  /// a chain's slots were planned for starts (-1: none planned).
  std::ptrdiff_t lookup_from = -1;
};

/// What the executor needs to sample one logits row. The pointers and spans
/// point into the scheduler's request state and stay valid until
/// on_step_result (or abandon_step) for this step returns.
struct logits_row_hook {
  std::size_t sequence_index = 0;  ///< into scheduled_step::sequences
  sequence_id seq = 0;
  request_handle request = 0;
  int choice = 0;                 ///< the choice this row's token goes to
  std::uint64_t seed = 0;         ///< the choice's seed (choice_seed)
  std::uint64_t token_index = 0;  ///< index of the drawn token among the choice's outputs
  const sampling_params* params = nullptr;
  std::span<const std::int32_t> prompt_tokens;
  std::span<const std::int32_t> output_tokens;
  std::span<const std::int32_t> suppressed_tokens;  ///< eos and stop ids while below min_tokens
  std::span<const std::uint32_t> allowed_mask;      ///< the constraint's mask for this row; empty: unconstrained
};

/// A planned step: who runs which tokens, rows to sample, copies to run first.
struct scheduled_step {
  std::uint64_t id = 0;
  std::vector<scheduled_sequence> sequences;
  std::vector<logits_row_hook> rows;  ///< [L] in logits_indices order
  std::vector<block_copy> copies;     ///< run in order before the forward pass
  scheduler_events events;            ///< preemptions and timeouts decided while planning
  bool logits_only = false;           ///< return the rows' logits instead of samples (a draft model's steps)
  /// The requests the rows' params and spans point into. The scheduler
  /// keeps a request while its rows are in flight, but an executor can
  /// outlive that promise: a hung step still running after the engine
  /// failed and dropped its requests, or a step running while the
  /// scheduler shuts down. Owning them here keeps such a step's reads valid.
  std::vector<std::shared_ptr<const request_state>> row_owners;

  /// Tokens fed: every sequence's tokens and drafts.
  std::int32_t num_tokens() const;
  bool empty() const { return sequences.empty() && copies.empty(); }
};

/// The executor's answer: one sample per logits row, in row order.
struct step_result {
  std::uint64_t step = 0;
  std::vector<sample_output> samples;  ///< [L]
  std::vector<std::int32_t> accepted;  ///< [verify groups of the step] drafts accepted
  std::vector<float> logits;           ///< [L * vocab] f32, when the step was logits_only (samples empty)
  double execute_s = 0;                ///< wall seconds the executor spent on the step (forward + sampling)
  std::int32_t tokens = 0;             ///< tokens its forward pass fed (0 for block copies and logits_only steps)
  /// Set when the step failed but the backend is intact (its block copies
  /// ran; the forward pass or sampling threw on the step's inputs or a
  /// workspace allocation): samples are empty, and only the step's requests
  /// fail. A failure that loses backend state is an error reply instead.
  std::string failure;
};

}  // namespace troupe

#pragma once
// The scheduler's pure core: continuous batching at iteration level under a
// token budget (decodes first, then prefill chunks packed to fill it), n > 1
// choices forked from one prefill, stop conditions, cancellation, timeouts,
// preemption by swap or recompute, and pluggable policies. No threads, no
// clocks: every call takes the time `now` in seconds from the caller.
//
// One step:
//   kv_request r = s.begin_step(now);          // what the step needs from KV memory
//   while (auto again = s.on_kv_reply(kv.plan(r))) r = *again;  // re-plan when items did not fit
//   scheduled_step step = s.take_step();        // -> proposers -> set_drafts -> build_step_batch -> executor
//   ... s.on_step_result(result, now)           // -> token / finish events
// schedule(now, kv) does the first three against a kv_planner.
//
// Speculative decoding (num_speculative_tokens > 0): a decoding sequence
// may get draft_slots = k > 0 in the step (budget 1 + k, KV slots planned as
// unsettled); a proposer's drafts for it go in with set_drafts before the
// batch is built, and on_step_result takes the verified tokens and the
// accepted counts (step_result::accepted) and settles the slots with the KV
// manager in the next request (scheduler_spec.cpp).
//
// Overlap: begin_step may be called while earlier steps are still running
// (their results not yet given to on_step_result), provided the executor
// runs steps and their copies in the order they were planned. A sequence
// waiting for a sampled token is left out of later steps until the result
// arrives; prefill chunks and every other sequence keep going. cancel(),
// finish() and on_step_result() may be called between begin_step and
// take_step. Hooks into request state (logits_row_hook) stay valid until the
// step's result is applied.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "actors/core/metrics.hpp"
#include "actors/core/policy.hpp"
#include "actors/core/request_state.hpp"
#include "actors/core/scheduler_types.hpp"
#include "actors/core/speculation_cost.hpp"

namespace troupe {

/// Continuous-batching scheduler (see the file comment for the call order).
class scheduler {
 public:
  /// Throws std::invalid_argument when `config` is inconsistent (see
  /// validate_config). `policy` (fcfs when null) runs with config.policies.
  explicit scheduler(scheduler_config config, std::unique_ptr<scheduling_policy> policy = nullptr);
  ~scheduler();
  scheduler(const scheduler&) = delete;
  scheduler& operator=(const scheduler&) = delete;

  // ---- requests -----------------------------------------------------------
  /// Admits a request arriving at `now`, or says why not (queue full:
  /// overloaded; prompt too long: too_long; deadline policy: overloaded).
  submit_result submit(request_spec spec, double now);
  /// Aborts every unfinished choice; blocks are freed by the next KV request.
  scheduler_events cancel(request_handle request, double now);
  /// Ends one choice for a reason found downstream (a stop string).
  scheduler_events finish(request_handle request, int choice, finish_reason reason, double now);

  // ---- the step -----------------------------------------------------------
  /// Plans the next step; returns what it needs from the KV manager.
  kv_request begin_step(double now);
  /// Applies the KV manager's reply. Returns another request for the same
  /// step when running sequences did not fit (after choosing victims), or
  /// nullopt when the step is ready for take_step().
  std::optional<kv_request> on_kv_reply(const kv_reply& reply);
  /// The planned step (call after on_kv_reply returned nullopt).
  scheduled_step take_step();
  /// begin_step, every KV round against `kv`, take_step.
  scheduled_step schedule(double now, kv_planner& kv);
  /// Advances sequences by one sample per logits row of step `result.step`.
  scheduler_events on_step_result(const step_result& result, double now);
  /// A planned step will never run: its sequences are preempted for
  /// recompute and their blocks freed without caching. Abandon every later
  /// in-flight step too.
  scheduler_events abandon_step(std::uint64_t step);
  /// Step `step` failed on an intact backend (step_result::failure): every
  /// request with a sequence in it is cancelled, and its blocks are freed
  /// without entering the prefix cache (the step may have written some of
  /// them). Returns those requests, in step order; their abort events are
  /// dropped (the caller tells them why). The step stays in flight until
  /// abandoned.
  std::vector<request_handle> fail_step_requests(std::uint64_t step, double now);
  /// Puts up to draft_slots drafts (d1..dj) for step.sequences[sequence_index]
  /// into a taken step that has not run: they are fed after its token, and
  /// each gets its own logits row (token_index base + i, output tokens the
  /// outputs then d1..di) verified with the token's row (build_step_batch
  /// makes the verify group). `draft_probs`: [j * vocab] q rows, or empty for
  /// a point-mass proposer. `parents` (empty: a chain) makes the drafts a
  /// tree (verify_group::parents; point masses only): row i then has the
  /// token_index of its depth and its path's drafts as outputs; a
  /// constrained sequence's tree is cut to its first chain. Call at most
  /// once per sequence and step. A sequence that finished or was preempted
  /// since is left as it is. Returns what is wrong ("" when applied);
  /// nothing changes then.
  std::string set_drafts(scheduled_step& step, std::size_t sequence_index, std::vector<std::int32_t> drafts,
                         std::vector<float> draft_probs = {}, std::vector<std::int32_t> parents = {});
  /// Counts `drafted` sequences drafted for ahead of their step and `used` ahead drafts a step took (metrics).
  void count_drafts_ahead(std::int32_t drafted, std::int32_t used) {
    metrics_.spec_ahead_drafts += static_cast<std::uint64_t>(drafted);
    metrics_.spec_ahead_used += static_cast<std::uint64_t>(used);
  }

  // ---- knobs --------------------------------------------------------------
  /// Switches policy at the next step boundary; false for an unknown name.
  bool set_policy(std::string_view name, double now);
  /// Switches to `policy`, which runs with config().policies.
  void set_policy(std::unique_ptr<scheduling_policy> policy, double now);
  /// The active policy.
  const scheduling_policy& policy() const { return *policy_; }
  /// Applies new knobs (not the pool sizes or block size), the policies'
  /// tunables included; returns an error message and changes nothing when
  /// they are inconsistent.
  std::string set_config(const scheduler_config& config);
  /// The knobs in force.
  const scheduler_config& config() const { return config_; }
  /// The caller's estimate of one step's duration, for deadline admission.
  void set_step_time_estimate(double seconds) { step_time_estimate_s_ = seconds; }
  /// While a step is in flight, let the next take at most half the decoding
  /// sequences (see step_cost_model for when that pays). Off by default.
  void set_split_decodes(bool split) { split_decodes_ = split; }
  bool split_decodes() const { return split_decodes_; }
  /// The measured costs that decide which decodes speculate (the caller
  /// feeds it step and draft-round times; docs/scheduling.md "Turn-down").
  speculation_cost_model& speculation_costs() { return speculation_costs_; }
  const speculation_cost_model& speculation_costs() const { return speculation_costs_; }

  // ---- state --------------------------------------------------------------
  /// Sequences (choices) that are device-resident, waiting to be (re)prefilled, or swapped out.
  int num_running() const;
  int num_waiting() const;
  /// Requests admitted and not yet started (what max_waiting_requests bounds).
  int num_queued() const { return num_queued_; }
  int num_swapped() const;
  /// True while any request is live or not yet released (results still out).
  bool has_unfinished_requests() const { return !requests_.empty(); }
  /// True when frees, forks or settles wait for the next KV request (run a step even if nothing else is due).
  bool has_pending_kv_updates() const {
    return !pending_frees_.empty() || !pending_forks_.empty() || !pending_settles_.empty();
  }
  /// Planned steps with logits rows whose results have not come back.
  std::size_t num_steps_in_flight() const { return in_flight_.size(); }
  /// Whether `step` was dispatched and has not settled or been abandoned.
  bool has_step_in_flight(std::uint64_t step) const { return in_flight_.count(step) > 0; }
  /// A live request, or nullptr once it has finished and been released.
  const request_state* find_request(request_handle request) const;
  /// Every live request as the operator sees it, oldest first (scheduler_requests.cpp).
  std::vector<request_info> request_table(double now) const;
  /// Sets a live request's policy priority; its place in line changes from
  /// the next step. False when the request is unknown or done.
  bool set_priority(request_handle request, int priority);
  /// Counters, gauges and histograms (see metrics.hpp).
  const scheduler_metrics& metrics() const { return metrics_; }

  /// Empty when `config` is usable, else what is wrong. Knob-backed fields
  /// are held to the registry's ranges (config/knobs.cpp).
  static std::string validate_config(const scheduler_config& config);

 private:
  enum class grant_kind : std::uint8_t { append, swap_in, allocate };
  struct grant {
    sequence* seq = nullptr;
    grant_kind kind = grant_kind::append;
    std::int32_t tokens = 0;
    std::int32_t blocks = 0;
    std::int32_t draft_slots = 0;  ///< speculative slots after `tokens` (append only)
  };
  struct step_plan {
    std::uint64_t id = 0;
    double now = 0;
    int budget = 0;
    std::int32_t free_blocks = 0;
    std::int32_t host_free = 0;
    int resident = 0;
    bool preempted_for_space = false;
    std::vector<sequence*> running;     ///< resident sequences, most urgent first
    std::vector<sequence*> candidates;  ///< waiting and swapped sequences that may be admitted
    std::vector<grant> grants;
    kv_request request;  ///< the round being assembled
    std::vector<kv_allocated> allocated;
    std::vector<block_copy> copies;
    scheduler_events events;
  };
  struct in_flight_row {
    sequence* seq = nullptr;           ///< the row's source; kept alive with its request
    request_state* request = nullptr;  ///< not released while rows_in_flight > 0
    int choice = 0;
    std::int32_t draft_position = 0;  ///< i > 0: the row after draft d_i of a verify group (0: not a draft row)
  };
  struct in_flight_step {
    std::vector<in_flight_row> rows;
    std::vector<sequence_id> sequences;
  };

  // scheduler.cpp
  sequence& add_sequence(request_state& request, int choice);
  /// Applies one of sequence's transitions (`&sequence::to_...`, with its
  /// arguments) and keeps the per-status counts.
  template <typename... Params, typename... Args>
  void transition(sequence& seq, void (sequence::*to)(Params...), Args&&... args) {
    --status_counts_[static_cast<int>(seq.status)];
    (seq.*to)(std::forward<Args>(args)...);
    ++status_counts_[static_cast<int>(seq.status)];
  }
  void refresh_key(request_state& request) { request.policy_key = policy_->sort_key(request); }
  sequence* find_sequence(sequence_id id) const;
  void finish_sequence(sequence& seq, finish_reason reason, double now, scheduler_events& events);
  void cancel_request(request_state& request, double now, scheduler_events& events);
  void release_done_requests();
  std::vector<request_state*> live_requests() const;
  void list_for_release(request_state& request);
  /// The request is no longer queued (it started or ended).
  void leave_queue(request_state& request);
  std::int32_t blocks_for(std::int64_t tokens) const;
  std::string submit_problem(const request_state& request, error_kind& kind) const;

  // scheduler_plan.cpp
  void collect_sequences();
  void schedule_running(bool decodes);
  /// How a decode of the step being planned may speculate.
  enum class draft_grant : std::uint8_t {
    none,    ///< plain
    chosen,  ///< the cost model says its drafts pay
    probe,   ///< left plain for long (or never measured): one round to measure its acceptance again
  };
  /// Schedules one decode, with draft slots as `drafts` allows (no more than
  /// `match` offers, prompt lookup's; null for other proposers); false when it got nothing.
  bool schedule_decode(sequence& seq, std::size_t position, int decodes_after, draft_grant drafts,
                       const ngram_match* match);
  /// Decodes the step being planned may take: all, or half while another step runs and decodes are split.
  int decode_cap() const;
  bool make_room(sequence& seq, std::size_t position, std::int32_t& tokens, std::int32_t& blocks);
  void admit_waiting();
  bool admit_room(const sequence& seq, std::int32_t blocks);

  sequence* least_urgent_resident(std::size_t after, const sequence* except) const;
  sequence* preemptible_for_urgency() const;
  std::int32_t append_blocks(const sequence& seq, std::int32_t tokens) const;
  std::int32_t freeable_blocks(const sequence& seq) const;
  void preempt(sequence& seq, bool for_space);
  void revoke(sequence& seq);
  bool granted(const sequence& seq) const;
  /// Records a grant; true when the policy's order may have changed.
  bool add_grant(sequence& seq, grant_kind kind, std::int32_t tokens, std::int32_t blocks,
                 std::int32_t draft_slots = 0);
  void assemble_grants();
  std::vector<std::int32_t> token_range(const sequence& seq, std::int32_t from, std::int32_t count) const;
  bool urgent(const sequence& a, const sequence& b) const;

  // scheduler_reply.cpp
  void apply_deltas(const kv_reply& reply);
  void handle_refusal(const kv_refused& refused);
  void retry_append(sequence& seq, const grant& original);
  scheduled_sequence commit_grant(const grant& g, in_flight_step& record);
  void add_rows(scheduled_step& step, const scheduled_sequence& scheduled, sequence& seq, in_flight_step& record);
  void update_gauges();

  // scheduler_spec.cpp
  /// Decoding sequences the step being planned may take (at most `cap`).
  int count_decodes(int cap) const;
  /// Of the (at most `cap`) decodes the step being planned may take, those
  /// that speculate: the first `chosen` because the cost model says it pays,
  /// the rest as probes. Empty when none, or above speculative_max_batch.
  struct speculating_set {
    std::vector<const sequence*> sequences;
    std::vector<ngram_match> matches;  ///< prompt lookup: each one's match, beside `sequences` (else empty)
    std::size_t chosen = 0;
  };
  speculating_set speculating_decodes(int cap) const;
  /// Prompt lookup's match for the next round of `seq` (k_max deep).
  ngram_match lookup_match(const sequence& seq) const;
  /// The acceptance a round of `seq` is planned with: with prompt lookup,
  /// its average for the length of `match` (1.0 until measured); else its
  /// overall average.
  double planned_acceptance(const sequence& seq, const ngram_match* match) const;
  /// Plain decodes `seq` waits before its next probe once it got draft slots
  /// as `drafts`: with a drafter whose rounds cost time, twice the last wait
  /// after a probe of measured text (none after a probe at the longest wait);
  /// else, and after a decode the cost model chose, the first wait (0).
  std::int32_t probe_wait_after(const sequence& seq, draft_grant drafts) const;
  /// k_max, or the adaptive k from the planned acceptance, times the tree
  /// width; a chain no longer than prompt lookup's `match` (null: another
  /// proposer). Before budget, blocks and length limits.
  std::int32_t wanted_slots(const sequence& seq, const ngram_match* match) const;
  /// Tokens `seq` may still generate: to its max_tokens and to the context end, whichever comes first.
  std::int64_t tokens_left(const sequence& seq) const;
  /// Draft slots for a decode of `seq` that leave budget and blocks for the
  /// `decodes_after` decodes still to plan: k_max (or the adaptive k), shrunk
  /// to the tokens left before max_tokens and the context end; 0 for none.
  std::int32_t draft_slots_for(const sequence& seq, int decodes_after, const ngram_match* match) const;
  /// The step result's verdict on a group (drafts of `seq`): metrics and the adaptive average.
  void observe_verified(sequence& seq, std::int32_t accepted);
  /// After a speculative step's tokens are applied: `accepted` drafts (of a
  /// tree, those already in place) join the computed tokens, the rest of the
  /// slots go back (settle queued).
  void settle(sequence& seq, std::int32_t accepted);
  /// Moves the queued settle of `seq`, if any, into the request being assembled.
  void take_pending_settle(const sequence& seq);
  /// Empty when the result's accepted counts fit the step's verify groups.
  std::string verify_problem(const in_flight_step& record, const step_result& result) const;
  /// Settles every sequence of `record` with unsettled slots, by `verified` (0 accepted when absent).
  void settle_step(const in_flight_step& record, const std::vector<std::pair<sequence*, std::int32_t>>& verified);

  // scheduler_result.cpp
  sequence& fork_child(sequence& parent, int choice);
  /// Appends each row's sample to its choice (a verify group's up to its
  /// accepted drafts); returns each group's sequence and the accepted drafts
  /// whose K/V is in place (a tree's later branch: fewer, fed again).
  std::vector<std::pair<sequence*, std::int32_t>> apply_samples(const in_flight_step& record, const step_result& result,
                                                                double now, scheduler_events& events);
  void append_token(sequence& seq, const sample_output& sample, double now, scheduler_events& events);
  std::optional<finish_reason> stop_reason(const sequence& seq, std::int32_t token) const;

  scheduler_config config_;
  std::unique_ptr<scheduling_policy> policy_;
  /// Shared with the steps whose rows point into them (scheduled_step::row_owners).
  std::map<request_handle, std::shared_ptr<request_state>> requests_;
  std::unordered_map<sequence_id, sequence*> sequences_;
  request_handle next_handle_ = 1;
  sequence_id next_sequence_ = 1;
  std::uint64_t next_step_ = 1;
  std::uint64_t next_seed_counter_ = 0;
  std::vector<kv_free> pending_frees_;
  std::vector<kv_fork> pending_forks_;
  std::vector<kv_settle> pending_settles_;    ///< speculative slots to settle in the next KV request
  std::vector<request_handle> release_list_;  ///< done requests to release when no step refers to them
  int status_counts_[4] = {0, 0, 0, 0};       ///< sequences per sequence_status
  int num_queued_ = 0;                        ///< requests not yet started
  std::int32_t pending_freed_blocks_ = 0;     ///< device blocks the pending frees will release (estimate)
  kv_usage known_usage_;
  double step_time_estimate_s_ = 0;
  bool split_decodes_ = false;
  speculation_cost_model speculation_costs_;
  /// Accepted drafts / depth proposed, averaged over every sequence's
  /// verified rounds: where a new sequence's acceptance starts (1 before
  /// any round), so that one whose drafter is seldom right (layer skipping
  /// on a model not trained for it) does not take several optimistic
  /// rounds to learn what its neighbours already showed.
  double acceptance_prior_ = 1.0;
  std::map<std::uint64_t, in_flight_step> in_flight_;
  std::optional<step_plan> plan_;
  bool step_ready_ = false;
  scheduler_metrics metrics_;
};

}  // namespace troupe

#pragma once
// The scheduler's state of one request and its sequences (one per choice).
// Policies read it to order work; only the scheduler changes it, except
// the fields marked as policy state.

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "actors/core/draft_tree.hpp"
#include "actors/core/scheduler_types.hpp"

namespace troupe {

struct request_state;

/// Where a sequence is in its life.
enum class sequence_status : std::uint8_t {
  waiting,   ///< needs a (re)prefill: never started, or preempted by recompute
  running,   ///< device-resident (prefilling or decoding)
  swapped,   ///< preempted by swap: blocks in the host pool
  finished,  ///< stopped (any reason); its blocks are freed at the next KV plan
};

/// One choice of a request: its outputs and its place in KV memory.
///
/// Its status changes only through the transitions below (in between, the
/// scheduler advances num_computed and the KV reply's deltas grow the block
/// table). Together they keep these invariants, outside a step being
/// planned (the KV reply fills the block table of a sequence granted a
/// swap-in or an allocation before take_step commits the grant):
///  - running: kv_known; host_blocks == 0; block_table covers num_computed
///    tokens and the unsettled_slots after them.
///  - swapped: kv_known; its blocks are in the host pool (host_blocks), none
///    on the device (block_table empty, nothing shared, nothing unsettled);
///    num_computed kept.
///  - waiting, finished: no KV anywhere: !kv_known, num_computed == 0,
///    block_table empty, host_blocks == 0, nothing shared or unsettled.
/// Speculative decoding: a step in flight may have planned unsettled_slots
/// draft slots after num_computed. The result settles them (num_computed
/// grows by the accepted drafts, the table mirror drops the rest, a
/// kv_settle is queued); a preemption or finish before that drops them, as
/// the KV manager's swap-out or free does. The draft storage (draft_context,
/// draft_probs) backs the step's hooks and is only rewritten by the next
/// set_drafts, never by a transition.
/// The KV manager's side (the free, swap-out, swap-in or allocation that
/// matches a transition) is the scheduler's to request.
struct sequence {
  sequence_id id = 0;
  request_state* request = nullptr;
  int choice = 0;
  std::uint64_t seed = 0;  ///< choice_seed(request seed, choice)
  sequence_status status = sequence_status::waiting;
  std::vector<std::int32_t> outputs;        ///< sampled tokens
  std::int32_t num_computed = 0;            ///< tokens whose K/V is written or being written
  std::vector<std::int32_t> block_table;    ///< device blocks (running); empty otherwise
  std::int32_t host_blocks = 0;             ///< blocks held in the host pool (swapped)
  std::int32_t shared_prefix_blocks = 0;    ///< leading blocks that may be shared (prefix hits, fork)
  bool may_share_last_block = false;        ///< forked and not yet written: the next append may copy
  bool kv_known = false;                    ///< the KV manager holds it (device or host)
  int pending_rows = 0;                     ///< logits rows in flight; not schedulable until they return
  bool started = false;                     ///< has been scheduled at least once
  std::uint64_t resident_since = 0;         ///< step that last made it resident (admission or swap-in)
  std::uint64_t granted_step = 0;           ///< step being planned that already gave it tokens (0: none)
  double last_token_time = -1;              ///< seconds; for inter-token latency
  std::int32_t unsettled_slots = 0;         ///< draft slots after num_computed the step in flight planned
  std::int32_t num_drafts = 0;              ///< drafts the step in flight feeds
  draft_tree drafts_fed;                    ///< those drafts (a chain, or a tree with its parents)
  std::vector<std::int32_t> draft_context;  ///< the verify rows' output_tokens: outputs then the drafts (a
                                            ///< chain), or per node outputs then its path (path_contexts)
  std::vector<float> draft_probs;           ///< [num_drafts * vocab] the drafts' q rows, or empty
  double acceptance = 1.0;                  ///< exponential average of accepted drafts / depth proposed
  double fed_fraction = 1.0;                ///< exponential average of drafts fed / draft slots granted
  bool drafts_verified = false;             ///< a round of its drafts was verified (acceptance is measured)
  /// Prompt lookup: `acceptance` kept per match length (index: suffix
  /// tokens matched), 1.0 until a match of that length is verified.
  std::vector<double> acceptance_by_match;
  ngram_match planned_match;  ///< prompt lookup: the match its draft slots were planned for (length 0: none)
  /// Structured output: the constraint's position after `outputs` (null:
  /// unconstrained). Transitions never touch it: a recompute replays no
  /// sampling, so the outputs it has accepted stay accepted.
  std::unique_ptr<constraints::token_matcher> matcher;
  std::vector<std::uint32_t> allowed_mask;  ///< the mask of the row in flight (backs its hook)
  std::vector<std::uint32_t> draft_masks;   ///< [num_drafts][mask words] the verify rows' masks (back their hooks)
  std::int32_t decodes_since_slots = 0;     ///< plain decodes since it last had draft slots (turn-down probes)
  std::int32_t decodes_before_probe = 0;    ///< turn-down probes: plain decodes before the next (0: the first wait;
                                            ///< int32 max: none)

  /// Prompt plus outputs: every token whose K/V the sequence needs.
  std::int32_t total_tokens() const;
  /// Token at position `pos` of prompt + outputs.
  std::int32_t token_at(std::int32_t pos) const;
  /// True while its blocks are on the device (prefilling or decoding).
  bool resident() const { return status == sequence_status::running; }

  // Transitions. The scheduler calls them through scheduler::transition,
  // which keeps its per-status counts.

  /// Preempted by recompute, or its KV lost: drops every block (device and
  /// host) and waits for a full prefill of prompt + outputs. Not from finished.
  void to_recompute();
  /// Preempted by swap (from running): its `host_blocks` blocks go to the host pool.
  void to_swapped(std::int32_t host_blocks);
  /// Swapped in (from swapped): resident again in the block table the KV reply gave it.
  void to_swapped_in();
  /// Admitted (from waiting): the KV manager allocated it, the first
  /// `shared_prefix_blocks` blocks found in the prefix cache.
  void to_allocated(std::int32_t shared_prefix_blocks);
  /// A new choice (from waiting) forked from resident `parent`: both share
  /// the parent's blocks, the partially filled last one copied on the next append.
  void to_forked_from(sequence& parent);
  /// Stopped for good (any reason): holds no KV from here on.
  void to_finished();
  /// Empty when the invariants of its status hold (blocks of `block_size`
  /// tokens), else the first one broken.
  std::string invariant_problem(std::int32_t block_size) const;
};

/// One admitted request.
struct request_state {
  request_handle handle = 0;
  request_spec spec;
  double arrival = 0;               ///< seconds (caller's clock)
  std::uint64_t arrival_order = 0;  ///< tie-breaker: admission order
  std::uint64_t seed = 0;
  double absolute_deadline = std::numeric_limits<double>::infinity();  ///< arrival + deadline_s
  double timeout_at = std::numeric_limits<double>::infinity();
  std::vector<std::unique_ptr<sequence>> choices;   ///< choice 0 first; the rest appear at the fork
  std::vector<std::int32_t> min_tokens_suppressed;  ///< eos (unless ignore_eos) and stop ids
  bool forked = false;                              ///< the n choices exist
  bool cancelled = false;
  int finished_choices = 0;
  int rows_in_flight = 0;  ///< hooks into this state held by running steps
  usage_info usage;
  double first_scheduled = -1;  ///< seconds, for queue time
  double first_token = -1;      ///< seconds, for time to first token

  // Policy state (written by the active policy).
  int mlfq_level = 0;
  std::int64_t mlfq_level_service = 0;  ///< decode iterations at the current level
  double last_served = 0;               ///< seconds; last step that computed any of its tokens

  // Scheduler scratch.
  double policy_key = 0;               ///< the policy's sort_key, refreshed every step
  std::int64_t generated_in_step = 0;  ///< tokens appended while applying one step result
  bool release_listed = false;         ///< queued for release once done
  bool in_queue = false;               ///< counted among the requests not yet started

  /// True when every choice has finished.
  bool done() const { return finished_choices >= spec.n; }
  /// True before any token of it was computed.
  bool queued() const;
};

}  // namespace troupe

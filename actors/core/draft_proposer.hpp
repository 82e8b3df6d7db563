#pragma once
// Drafting with a second model (a smaller draft checkpoint, or the target
// itself with layers skipped): the pure core of the speculator actor. For
// the sequences of a planned target step it plans the draft model's steps
// (a catch-up step that feeds every token the draft has not seen, ending
// with the token the target feeds next, then one step per further draft),
// reads their logits and draws each draft from the request's sampling rules
// applied to the draft's logits — returning that distribution q with it,
// which rejection sampling needs.
//
// The draft's KV cache has the target's block ids and block size: a
// sequence's block table addresses both caches, so the draft needs no
// memory management of its own. A layer-skipping drafter of the target's
// first layers uses the target's pool itself (share_target_kv): the KV it
// would write for the context is what the target already wrote, so its
// rounds catch up on nothing. What the draft has written is remembered
// per sequence (tokens and blocks), and for each block which sequence wrote
// it last; a round trusts the longest prefix of a sequence's blocks whose
// last writer wrote them through the same table positions after the same
// tokens (its own earlier rounds, or another sequence sharing a cached
// prompt prefix), and recomputes the rest. With its own pool, trust is only
// ever about acceptance, never correctness: verification decides what is
// emitted. In the target's pool the drafter must never write what the
// target will read (draft_request::busy_blocks).

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "actors/core/scheduler_types.hpp"
#include "kernels/sampling.hpp"

namespace troupe {

/// One sequence of a planned target step to draft for.
struct draft_job {
  std::size_t sequence_index = 0;  ///< into the target step's sequences
  sequence_id seq = 0;
  std::vector<std::int32_t> tokens;       ///< prompt then outputs; the last, t0, goes at position tokens.size() - 1
  std::int32_t prompt_length = 0;         ///< tokens[0, prompt_length) are the prompt (for penalties)
  std::vector<std::int32_t> block_table;  ///< the target's blocks, covering t0 and the draft slots
  std::int32_t slots = 0;                 ///< drafts wanted, >= 1
  sampling_params params;                 ///< the request's (greedy requests get greedy drafts)
  std::uint64_t seed = 0;                 ///< the choice's seed
  std::uint64_t token_index = 0;          ///< index among the choice's outputs of d1 (drawn from t0's row)
  std::vector<std::int32_t> suppressed;   ///< ids forced to -inf (eos before min_tokens)
  std::int32_t tree_width = 1;            ///< > 1: a chain of ceil(slots / width) drafts, and for a greedy
                                          ///< request up to width - 1 runners-up beside each chain draft
                                          ///< (leaves; the shallowest depths first while slots last)
};

/// What one round asks for.
struct draft_request {
  std::vector<draft_job> jobs;
  /// Device blocks that steps still in flight use (their sequences' tables
  /// and copies) and that the drafted step's copies read or write before
  /// its forward pass. A block freed by preemption while its step runs may
  /// already sit in a drafted table; a drafter sharing the target's KV must
  /// not write such a block, so it drafts nothing for a sequence whose
  /// draft positions lie in one.
  std::vector<std::int32_t> busy_blocks;
};

/// The drafts of one sequence.
struct drafted {
  std::size_t sequence_index = 0;  ///< as in its job
  std::vector<std::int32_t> drafts;
  std::vector<float> probs;           ///< [drafts * vocab] q rows; empty for greedy requests (point masses)
  std::vector<std::int32_t> parents;  ///< a draft tree's (the chain, then each depth's runners-up, deepest
                                      ///< first: depth-first order), or empty: a chain
};

/// The answer to a round.
struct draft_reply {
  std::vector<drafted> sequences;  ///< one per job, in job order (no drafts: skipped)
  std::int32_t steps = 0;          ///< draft model steps the round ran (the most drafts any job wanted)

  /// Jobs the round drafted for: the sequences its draft steps fed (a
  /// skipped job, e.g. one writing a busy block, costs the round nothing).
  std::int32_t num_drafted() const {
    return static_cast<std::int32_t>(
        std::count_if(sequences.begin(), sequences.end(), [](const drafted& d) { return !d.drafts.empty(); }));
  }
};

/// Runs one draft step: the logits [rows * vocab] of a logits_only step.
using draft_step_runner = std::function<std::vector<float>(const scheduled_step&)>;

/// Plans and reads the draft model's steps of one round at a time.
class draft_proposer {
 public:
  /// `block_size` of both caches; `vocab_size` of the draft's logits rows;
  /// at most `max_remembered` sequences' written state is kept (least recently drafted forgotten first).
  draft_proposer(std::int32_t block_size, std::int64_t vocab_size, std::size_t max_remembered = 4096);

  /// The draft's logits rows hold ids [0, `width`) only (an LM head of
  /// fewer rows, knob draft_vocab_size; 1 <= width <= vocab_size): each row
  /// is widened to vocab_size with the other ids impossible, so penalties,
  /// suppressed ids and the q rows keep the target's ids.
  void set_logits_width(std::int64_t width);

  /// The draft's KV cache is the target's own pool (a layer-skipping
  /// drafter of the target's first layers computes exactly what the target
  /// wrote there): a round feeds t0 alone (the target fed all before it),
  /// a job whose draft positions lie in a busy block gets no drafts, and
  /// nothing is remembered.
  void share_target_kv() { shares_target_kv_ = true; }

  /// Starts a round; returns its first draft step (logits_only; without
  /// sequences when no job can be drafted: then take_reply). Jobs must
  /// have slots >= 1 and a block table covering tokens.size() + slots - 1 positions.
  scheduled_step begin(draft_request request);
  /// The logits [rows * vocab] of the last step; returns the next step, or
  /// nullopt when every job has its drafts (then take_reply).
  std::optional<scheduled_step> on_logits(std::span<const float> logits);
  /// The finished round's drafts, in job order.
  draft_reply take_reply();
  /// A whole round at once: begin, then `run_step` on each step the round
  /// plans, feeding its logits back, then take_reply. The draft executor
  /// runs it locally, so a round of k drafts costs one message, not k.
  draft_reply run_round(draft_request request, const draft_step_runner& run_step);

  /// Trusts no draft KV written so far (after a failed round, whose steps
  /// may have written part of their blocks): the next rounds write it anew.
  void forget_written();

  /// Leading tokens of a sequence with `tokens` and `block_table` whose
  /// draft KV the next round would trust: whoever wrote each block last (this
  /// sequence or another) wrote it through the same table position after the
  /// same tokens from position 0.
  std::int32_t trusted_prefix(std::span<const std::int32_t> tokens, std::span<const std::int32_t> block_table) const;

 private:
  struct written {
    std::vector<std::int32_t> tokens;  ///< token ids whose draft K/V sit at positions 0 .. size-1
    std::vector<std::int32_t> blocks;  ///< the block table they were written through
    std::uint64_t last_round = 0;
  };
  struct job_state {
    draft_job job;
    std::vector<std::int32_t> outputs;                ///< outputs so far then the drafts drawn (penalty context)
    std::int32_t fed_from = 0;                        ///< first position this round writes
    std::int32_t chain = 0;                           ///< drafts drawn one per draft step
    std::vector<std::vector<std::int32_t>> siblings;  ///< per chain depth, its runners-up (a greedy tree)
    drafted result;
  };

  /// Whether a round drafting `chain` tokens for `job` writes a block of `busy_blocks` (sorted).
  bool writes_busy_block(const draft_job& job, std::int32_t chain, std::span<const std::int32_t> busy_blocks) const;
  scheduled_step next_step(bool first);
  void draw(job_state& state, std::span<const float> logits_row);
  void remember(const job_state& state);
  /// Appends a tree's runners-up after the chain in depth-first order, with the parents.
  static void attach_siblings(job_state& state);

  std::int32_t block_size_;
  std::int64_t vocab_size_;
  bool shares_target_kv_ = false;
  std::int64_t logits_width_;
  std::vector<float> widened_;  ///< [vocab] a narrow row, then -inf up to vocab_size
  std::size_t max_remembered_;
  std::uint64_t round_ = 0;
  std::uint64_t next_step_id_ = 1;
  std::int32_t steps_ = 0;  ///< steps planned in the current round
  std::unordered_map<sequence_id, written> written_;
  std::unordered_map<std::int32_t, sequence_id> last_writer_;  ///< block id -> the sequence that wrote it last
  std::vector<job_state> jobs_;
  std::vector<std::size_t> stepped_;  ///< jobs in the last step, in row order
};

}  // namespace troupe

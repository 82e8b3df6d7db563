#pragma once
// Drafting ahead: while the target verifies step N's drafts, the drafter
// drafts step N+1's on the guess that every draft of N is accepted and that
// the target's bonus token is the draft's own next token. For a chain
// d1..dk fed after t0 the ahead job is the context through dk with k + 1
// slots: its first draft is the guess g for the bonus, the rest e1..ek are
// the next round's drafts, drawn exactly as a round run after step N would
// draw them (same draft-model context, same token indices, so the same
// draft uniforms). When step N's result ends the sequence with d1..dk, g
// the next step takes e1..ek without waiting for a round; otherwise the
// guess is dropped. Lossless either way: the drafts are verified as any
// other, and their q rows are the distributions they were drawn from given
// the context the sequence has.
//
// The ahead round writes draft K/V only through the blocks the step's table
// already holds (a job gets only the slots they cover), so it never needs
// memory from the KV manager (speculation.hpp, ahead_draft_jobs); the
// draft_proposer's trust rules treat the K/V of a wrong guess like that of
// any rejected draft.

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "actors/core/draft_proposer.hpp"
#include "actors/core/scheduler_types.hpp"

namespace troupe {

/// The answers of ahead rounds, kept until the step they were drafted for.
class draft_ahead_book {
 public:
  /// Drafts ahead for one sequence of a step being filled.
  struct ahead_drafts {
    std::size_t sequence_index = 0;  ///< into the step's sequences
    std::vector<std::int32_t> drafts;
    std::vector<float> probs;  ///< [drafts * vocab] q rows, or empty (point masses)
  };

  /// Keeps the answer `reply` to the ahead round `request` (ahead_draft_jobs of a dispatched step).
  void record(const draft_request& request, const draft_reply& reply);
  /// The ahead drafts for `step`'s sequences with draft slots and no drafts
  /// yet whose context is what their ahead job guessed (at most each one's
  /// slots). Every kept answer for a sequence of the step is used or
  /// dropped, and answers older than `max_age` calls are dropped.
  std::vector<ahead_drafts> take(const scheduled_step& step, std::uint64_t max_age = 16);
  /// Answers kept.
  std::size_t size() const { return kept_.size(); }

 private:
  struct guess {
    std::vector<std::int32_t> outputs;  ///< the outputs the sequence must have: through the drafts verified, then g
    std::size_t context = 0;            ///< prompt + outputs the sequence must have
    std::uint64_t token_index = 0;      ///< index of the token its next row draws (e1's)
    std::vector<std::int32_t> drafts;
    std::vector<float> probs;
    std::uint64_t recorded = 0;  ///< take() calls before it was recorded
  };
  std::unordered_map<sequence_id, guess> kept_;
  std::uint64_t takes_ = 0;
};

}  // namespace troupe

#pragma once
// Whether speculation pays, from measured costs (docs/scheduling.md,
// "Turn-down"). Two cost curves are learnt from what the engine measures:
// the target's step time as a function of the tokens it feeds, and a draft
// step's time as a function of the sequences it drafts for (a round k
// drafts deep runs k of them). With a sequence's recent acceptance a
// (accepted drafts / depth proposed), a round k deep is expected to emit
// 1 + a·k tokens instead of 1, for the drafts it feeds (k for a chain; a
// tree's branches add some) as more target tokens and its share of the
// draft round.
// The step speculates for the set of decodes that gives the most expected
// tokens per second, which is never worse than decoding plainly as far as
// the estimates go. Pure: no clock; callers pass measured seconds.

#include <cstdint>
#include <map>
#include <optional>
#include <span>

namespace troupe {

/// A smoothed cost in seconds as a function of a size (tokens fed, or
/// sequences drafted for): sizes up to 16 are learnt one by one, larger ones
/// in buckets of 1/8 of a doubling; between and beyond observed sizes the
/// estimate is linear through the two nearest (never decreasing with size).
class cost_curve {
 public:
  /// A measurement: `seconds` for a step of `size` (>= 1; smaller is ignored).
  void observe(std::int32_t size, double seconds);
  /// The estimated seconds at `size`; nullopt before any observation.
  std::optional<double> estimate(std::int32_t size) const;
  /// True once any size was observed.
  bool known() const { return !buckets_.empty(); }

 private:
  struct point {
    double size = 0;     ///< smoothed size of the bucket's observations
    double seconds = 0;  ///< smoothed seconds
  };
  std::map<int, point> buckets_;  ///< bucket index (increasing with size) -> point
};

/// One decoding sequence that may speculate.
struct speculation_candidate {
  double acceptance = 1;   ///< recent accepted drafts / depth of what was proposed, 0..1
  std::int32_t slots = 0;  ///< drafts the target would verify (>= 1)
  /// Draft steps of its round, the most drafts it can have accepted (a
  /// tree's depth); 0: a chain, `slots`.
  std::int32_t depth = 0;
};

/// The candidate of a sequence granted `slots` draft slots for a tree of
/// `width` branches: branches ceil(slots / width) deep (the draft steps a
/// drafter runs, and the most drafts a round can have accepted), of which
/// the target verifies `fed_fraction` (0..1; recent drafts fed / slots
/// granted: an n-gram tree fills what its matches give, the draft model's
/// tree is its chain with width - 1 runners-up beside each draft), at least one.
speculation_candidate tree_candidate(double acceptance, std::int32_t slots, std::int32_t width, double fed_fraction);

/// The scheduler core's cost model for the turn-down decision.
class speculation_cost_model {
 public:
  /// A target step fed `tokens` and ran for `seconds` on the executor.
  void observe_target_step(std::int32_t tokens, double seconds);
  /// A draft round for `sequences` sequences ran `steps` draft steps in `seconds` (as the scheduler waited for it).
  void observe_draft_round(std::int32_t sequences, std::int32_t steps, double seconds);
  /// Seconds every target step costs besides its executor time (messages, planning; 0 when hidden by overlap).
  void set_step_overhead(double seconds) { overhead_s_ = seconds > 0 ? seconds : 0; }

  /// How many of `candidates` — sorted by acceptance, highest first — should
  /// speculate in a step whose plain form feeds `plain_tokens` tokens for
  /// `plain_decodes` decodes: the prefix with the most expected output
  /// tokens per second (0 when none beats decoding plainly). All of them
  /// while the target's cost is still unknown, so the costs get measured.
  std::size_t worth_speculating(std::span<const speculation_candidate> candidates, std::int32_t plain_tokens,
                                std::int32_t plain_decodes) const;

  /// Estimated seconds of a target step feeding `tokens` (nullopt: not measured yet).
  std::optional<double> target_step_s(std::int32_t tokens) const { return target_.estimate(tokens); }
  /// Estimated seconds of a draft round for `sequences` sequences of `steps` draft steps (0: not measured yet).
  double draft_round_s(std::int32_t sequences, std::int32_t steps) const;
  /// True once draft rounds are known to cost time (a draft model or layer
  /// skipping, measured or timed at load); prompt lookup has no rounds.
  bool draft_rounds_cost() const { return draft_round_s(1, 1) > 0; }

 private:
  cost_curve target_;      ///< target step seconds by tokens fed
  cost_curve draft_step_;  ///< draft step seconds by sequences drafted for
  double overhead_s_ = 0;
};

}  // namespace troupe

#pragma once
// The compiled_constraint every kind produces: an automaton, the shared
// vocabulary trie and a memo of token tables; its matchers are pushdown
// recognisers that build masks from the tables.

#include <memory>
#include <vector>

#include "constraints/automaton.hpp"
#include "constraints/budget.hpp"
#include "constraints/constraint.hpp"
#include "constraints/token_table.hpp"
#include "constraints/vocab_trie.hpp"

namespace troupe::constraints {

/// Token tables memoised per compiled constraint (dense ones are
/// vocab / 8 bytes: 16 KiB for 128k ids).
inline constexpr std::size_t max_cached_tables = 4096;

/// Frames of a stack top used as the token-table key.
inline constexpr std::size_t table_key_frames = 3;

/// A rule set compiled against a vocabulary; immutable (once precomputed)
/// apart from its thread-safe table memo.
class compiled_grammar : public compiled_constraint, public std::enable_shared_from_this<compiled_grammar> {
 public:
  /// Wraps `machine` for `trie`; stacks are capped at `max_depth` frames.
  compiled_grammar(automaton machine, std::shared_ptr<const vocab_trie> trie, std::size_t max_depth);

  std::unique_ptr<token_matcher> start() const override;

  /// Merges states no token can tell apart, then builds the token tables of
  /// the stack tops reachable from the start, at most `max_tables`, until
  /// `budget` expires (never failing); the rest are built on first use.
  /// Call before sharing the grammar.
  void precompute(const compile_budget& budget, std::size_t max_tables);

  /// The automaton.
  const automaton& machine() const noexcept { return machine_; }
  /// The vocabulary trie.
  const vocab_trie& trie() const noexcept { return *trie_; }
  /// Stack depth cap in frames.
  std::size_t max_depth() const noexcept { return max_depth_; }
  /// The token table for a stack top's frames (top first), with
  /// `depth_left` frames allowed from the bottom of `frames` up.
  std::shared_ptr<const token_table> table(std::vector<std::int32_t> frames, std::size_t depth_left) const;
  /// Token tables built so far, by precompute() and on first use.
  std::size_t tables_built() const noexcept { return tables_.built(); }
  /// Token tables precompute() built.
  std::size_t tables_precomputed() const noexcept { return precomputed_; }

 private:
  automaton machine_;
  std::shared_ptr<const vocab_trie> trie_;
  std::size_t max_depth_;
  std::vector<std::int32_t> representative_;  // [states] the state whose table each state shares
  std::size_t precomputed_ = 0;
  mutable token_table_cache tables_;
};

}  // namespace troupe::constraints

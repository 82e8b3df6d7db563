#pragma once
// The compiled_constraint every kind produces: an automaton, the shared
// vocabulary trie and a memo of token tables; its matchers are pushdown
// recognisers that build masks from the tables.

#include <memory>

#include "constraints/automaton.hpp"
#include "constraints/constraint.hpp"
#include "constraints/token_table.hpp"
#include "constraints/vocab_trie.hpp"

namespace troupe::constraints {

/// Token tables memoised per compiled constraint (dense ones are
/// vocab / 8 bytes: 16 KiB for 128k ids).
inline constexpr std::size_t max_cached_tables = 1024;

/// Frames of a stack top used as the token-table key.
inline constexpr std::size_t table_key_frames = 3;

/// A rule set compiled against a vocabulary; immutable apart from its
/// thread-safe table memo.
class compiled_grammar : public compiled_constraint, public std::enable_shared_from_this<compiled_grammar> {
 public:
  /// Wraps `machine` for `trie`; stacks are capped at `max_depth` frames.
  compiled_grammar(automaton machine, std::shared_ptr<const vocab_trie> trie, std::size_t max_depth);

  std::unique_ptr<token_matcher> start() const override;

  /// The automaton.
  const automaton& machine() const noexcept { return machine_; }
  /// The vocabulary trie.
  const vocab_trie& trie() const noexcept { return *trie_; }
  /// Stack depth cap in frames.
  std::size_t max_depth() const noexcept { return max_depth_; }
  /// The token table for a stack top's frames (top first), with
  /// `depth_left` frames allowed from the bottom of `frames` up.
  std::shared_ptr<const token_table> table(const std::vector<std::int32_t>& frames, std::size_t depth_left) const;

 private:
  automaton machine_;
  std::shared_ptr<const vocab_trie> trie_;
  std::size_t max_depth_;
  mutable token_table_cache tables_;
};

}  // namespace troupe::constraints

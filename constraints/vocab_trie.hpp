#pragma once
// The vocabulary as a byte trie in preorder, so a walk can skip a dead
// subtree by jumping to its end and the tokens of a subtree are one range.

#include <cstdint>
#include <string>
#include <vector>

#include "constraints/constraint.hpp"

namespace troupe::constraints {

/// Immutable byte trie over the non-empty, non-eos tokens of a vocabulary.
struct vocab_trie {
  /// One trie node; nodes[0] is the root (the empty prefix).
  struct node {
    std::uint8_t byte = 0;          ///< the byte leading here from the parent
    std::uint32_t depth = 0;        ///< bytes from the root
    std::uint32_t end = 0;          ///< one past the last node of this subtree
    std::uint32_t first_token = 0;  ///< into token_ids: the tokens of this node start here
  };
  std::vector<node> nodes;               ///< preorder
  std::vector<std::int32_t> token_ids;   ///< tokens in node order
  std::size_t vocab_size = 0;            ///< ids in the vocabulary
  std::vector<std::int32_t> eos_tokens;  ///< from the vocabulary
  std::vector<std::string> token_bytes;  ///< [vocab] bytes of each id
  std::size_t max_token_bytes = 0;       ///< bytes of the longest token (the trie's depth)

  /// Builds the trie of `vocab`.
  static vocab_trie build(const vocabulary& vocab);
  /// Tokens of node `i` and its subtree: [first, last).
  std::pair<std::uint32_t, std::uint32_t> subtree_tokens(std::uint32_t i) const;
  /// Tokens ending exactly at node `i`: [first, last).
  std::pair<std::uint32_t, std::uint32_t> node_tokens(std::uint32_t i) const;
};

}  // namespace troupe::constraints

#pragma once
// Per stack-top precomputation (xgrammar's context-independent tokens): for
// the top frames of a stack, which tokens are allowed whatever lies below
// (`accepted`), and which can only be decided with the whole stack
// (`uncertain`, checked at run time). Everything else is rejected.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "constraints/automaton.hpp"
#include "constraints/vocab_trie.hpp"

namespace troupe::constraints {

/// The precomputed split of the vocabulary for one stack top.
struct token_table {
  std::vector<std::uint32_t> accepted;     ///< [(vocab + 31) / 32] bitmask of allowed ids, or empty
  std::vector<std::int32_t> accepted_ids;  ///< the allowed ids instead, when few (saves memory)
  std::vector<std::int32_t> uncertain;     ///< ids that need the frames below
  std::size_t depth_cap = 0;               ///< the frame cap it was computed under
  std::size_t deepest = 0;                 ///< most frames its walk reached
  bool capped = false;                     ///< the cap refused some call: valid for depth_cap only

  /// True when the table is the same under cap `cap`.
  bool valid_for(std::size_t cap) const { return capped ? cap == depth_cap : cap >= deepest; }

  /// ORs the accepted ids into `mask` (one bit per id, 32 per word).
  void add_accepted(std::span<std::uint32_t> mask) const;
};

/// Splits the vocabulary for a stack made of `frames` (automaton states,
/// top first). When the last frame belongs to the start rule the stack is
/// whole and nothing is uncertain.
token_table compute_token_table(const automaton& machine, const vocab_trie& trie,
                                const std::vector<std::int32_t>& frames, std::size_t max_depth);

/// Thread-safe memo of token tables keyed by frames, bounded in entries. A
/// table whose walk never met the depth cap serves every cap above its
/// deepest frame, so nesting levels share tables.
class token_table_cache {
 public:
  /// Caches at most `capacity` tables; later ones are computed each time.
  explicit token_table_cache(std::size_t capacity) : capacity_(capacity) {}
  /// The table for `frames`, computed (outside the lock) when missing.
  std::shared_ptr<const token_table> get(const automaton& machine, const vocab_trie& trie,
                                         const std::vector<std::int32_t>& frames, std::size_t max_depth);
  /// Tables computed so far (cached or not): an instrumentation counter.
  std::size_t built() const noexcept { return built_.load(std::memory_order_relaxed); }

 private:
  std::size_t capacity_;
  std::atomic<std::size_t> built_{0};
  std::mutex mutex_;
  std::size_t size_ = 0;
  // Tables for the same frames under different depth caps, when they differ.
  std::unordered_map<std::string, std::vector<std::shared_ptr<const token_table>>> tables_;
};

}  // namespace troupe::constraints

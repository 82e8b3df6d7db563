#pragma once
// Where a draft tree's tokens find their keys (step_batch::tree_parent):
// each query token's visible keys, as a chain would have them — the cache's
// own positions up to its tree's root, then its path's scattered cache
// positions — derived once per step and shared by every backend.

#include <cstdint>
#include <vector>

#include "kernels/step_batch.hpp"

namespace troupe {

/// Per step token: positions >= start[t] read their keys from cache
/// positions keys[offset[t] + position - start[t]]; start[t] =
/// positions[t] + 1 for a causal token (nothing remapped).
struct tree_key_map {
  std::vector<std::int32_t> start;   ///< [T]
  std::vector<std::int32_t> offset;  ///< [T] into keys
  std::vector<std::int32_t> keys;    ///< cache positions, each tree token's path below its root, root-to-token order
};

/// The key map of a valid `batch`; empty vectors when it has no tree.
tree_key_map map_tree_keys(const step_batch& batch);

/// Cache position of step token `t` of sequence `s` (its K/V slot's position in the sequence).
std::int32_t cache_position(const step_batch& batch, std::size_t s, std::int32_t t);

}  // namespace troupe

#include "kernels/tree_attention.hpp"

#include <algorithm>

namespace troupe {

std::int32_t cache_position(const step_batch& batch, std::size_t s, std::int32_t t) {
  return batch.seq_lens[s] - (batch.query_start[s + 1] - t);
}

tree_key_map map_tree_keys(const step_batch& batch) {
  tree_key_map map;
  if (batch.tree_parent.empty()) return map;
  const std::size_t tokens = batch.token_ids.size();
  map.start.resize(tokens);
  map.offset.resize(tokens);
  std::vector<std::int32_t> path;
  for (std::size_t s = 0; s + 1 < batch.query_start.size(); ++s) {
    for (std::int32_t t = batch.query_start[s]; t < batch.query_start[s + 1]; ++t) {
      const auto tu = static_cast<std::size_t>(t);
      map.offset[tu] = static_cast<std::int32_t>(map.keys.size());
      map.start[tu] = batch.positions[tu] + 1;
      if (batch.tree_parent[tu] < 0) continue;
      // Up to the root (the nearest causal ancestor), collecting the path's cache positions.
      path.clear();
      std::int32_t node = t;
      while (batch.tree_parent[static_cast<std::size_t>(node)] >= 0) {
        path.push_back(cache_position(batch, s, node));
        node = batch.tree_parent[static_cast<std::size_t>(node)];
      }
      map.start[tu] = batch.positions[static_cast<std::size_t>(node)] + 1;
      map.keys.insert(map.keys.end(), path.rbegin(), path.rend());
    }
  }
  return map;
}

}  // namespace troupe

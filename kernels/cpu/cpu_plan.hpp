#pragma once
// What the CPU backend derives once per step and reuses in every layer: the
// rotary cos/sin table per token and the attention work partition.

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/tree_attention.hpp"

namespace troupe::cpu {

/// One attention work item: every head of query tokens [first_token,
/// first_token + num_queries) of sequence `sequence` against its cached
/// tokens [kv_begin, kv_end).
struct attention_item {
  std::int32_t sequence = 0;
  std::int32_t first_token = 0;  ///< index into the step's tokens
  std::int32_t num_queries = 0;
  std::int64_t kv_begin = 0, kv_end = 0;
  std::int64_t partial_row = -1;  ///< first row in the partial buffers, or -1 when it writes the output
};

/// Items that split one query block over its context, merged after.
struct attention_merge {
  std::int32_t first_token = 0;
  std::int32_t num_queries = 0;
  std::int32_t chunks = 0;
  std::int64_t first_partial_row = 0;  ///< chunk c's rows start at first_partial_row + c * rows
};

/// Query tokens per attention work item (times the q heads gives its rows).
inline constexpr int attention_query_block = 16;
/// Cached tokens per context chunk (rounded to whole blocks): every query
/// walks its context in these position-aligned chunks and merges them in
/// order, whether one item runs them all or a short query run with a long
/// context is split into one item per chunk.
inline constexpr int attention_split_tokens = 256;

class cpu_step_plan final : public step_plan {
 public:
  std::int64_t num_tokens() const override { return batch->num_tokens(); }
  std::int64_t num_logits_rows() const override { return batch->num_logits_rows(); }

  const step_batch* batch = nullptr;
  kv_cache_spec cache;
  attention_geometry geometry;
  int rotary_dim = 0;           ///< dimensions rotated per head (even)
  std::vector<float> rope_cos;  ///< [T][rotary_dim / 2]
  std::vector<float> rope_sin;  ///< [T][rotary_dim / 2]
  std::vector<attention_item> items;
  std::vector<attention_merge> merges;
  std::int64_t chunk_tokens = 0;   ///< attention_split_tokens rounded to whole blocks
  std::int64_t partial_rows = 0;   ///< rows of partial softmax state all split items need
  std::int64_t max_item_rows = 0;  ///< largest num_queries * group of any item
  tree_key_map tree;               ///< draft tree tokens' keys (empty without a tree)
};

/// Validates `batch` (std::invalid_argument with the reason) and builds its plan.
std::unique_ptr<cpu_step_plan> build_step_plan(const step_batch& batch, const kv_cache_spec& cache,
                                               const attention_geometry& geometry);

}  // namespace troupe::cpu

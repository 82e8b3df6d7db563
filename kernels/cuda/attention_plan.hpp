#pragma once
// How a step's attention is split into thread-block work, planned once per
// step on the host: prefill tiles for sequences with two or more query
// tokens, split-KV decode items (and their merges) for single-token ones
// and for every token of a sequence that feeds a draft tree (whose keys the
// decode kernel reads through the tree key map).
// Pure host code, so the partition is unit-tested without a GPU.

#include <cstdint>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/cuda/attention.hpp"

namespace troupe::cuda {

/// Inputs of the partition beyond the batch and the geometry.
struct attention_partition_options {
  int multiprocessors = 132;  ///< the device's SM count
  int decode_splits = 0;      ///< 0: plan from lengths; n > 0: min(n, context) splits per decode sequence
};

/// The work lists of one step; kernels read them as is.
struct attention_work {
  std::vector<prefill_work_item> prefill;
  std::vector<decode_work_item> decode;
  std::vector<decode_merge_item> merges;
  int num_partials = 0;    ///< partial slots the split decode items write
  int heads_per_tile = 0;  ///< prefill tile shape, see prefill_attention_params
  int group_parts = 0;
  int tokens_per_tile = 0;
};

/// Fewest keys a decode split covers when splits are planned automatically.
constexpr int min_keys_per_split = 256;
/// Most splits of one decode sequence when planned automatically.
constexpr int max_splits_per_sequence = 64;

/// Partitions `batch` (already validated) for `geometry`.
attention_work partition_attention(const step_batch& batch, const attention_geometry& geometry,
                                   const attention_partition_options& options);

}  // namespace troupe::cuda

#pragma once
// Turns a planned step into the backend's flat varlen batch
// (kernels/step_batch.hpp). Pure: no allocation beyond the batch itself.

#include <cstdint>

#include "actors/core/scheduler_types.hpp"
#include "kernels/step_batch.hpp"

namespace troupe {

/// Fills every array of a step_batch from `step`: token_ids and positions
/// per sequence in step order (its tokens, then its drafts), the query_start
/// and paged-KV CSR arrays (kv_indices: the first ceil(seq_len / block_size)
/// blocks of each table), slot_mapping, logits_indices (each sequence's last
/// token row, repeated once per sample: n times on a fork step; then one row
/// per draft), the verify groups (one per sequence with drafts, from its
/// last token's row) and the block copies. A draft tree's nodes take the
/// slots after the token in node order, RoPE positions by depth, and
/// tree_parent (filled for every token once any sequence has a tree). `sampling` stays empty;
/// fill_sampling_rows fills it.
step_batch build_step_batch(const scheduled_step& step, std::int32_t block_size);

/// Fills `batch.sampling` ([L], one per logits row) from the step's hooks.
/// The rows point into the scheduler's request state: use the batch before
/// the step's result is given back to the scheduler.
void fill_sampling_rows(step_batch& batch, const scheduled_step& step);

}  // namespace troupe

#pragma once
// What plan_step derives once per step and every layer reuses: the step's
// index arrays on the device (one upload), rotary frequencies, and the
// attention work partition with its split-KV scratch.

#include <cstdint>

#include "kernels/backend.hpp"
#include "kernels/cuda/attention.hpp"

namespace troupe::cuda {

class cuda_step_plan final : public step_plan {
 public:
  std::int64_t num_tokens() const override { return batch->num_tokens(); }
  std::int64_t num_logits_rows() const override { return batch->num_logits_rows(); }

  const step_batch* batch = nullptr;  ///< the planned batch (outlives the plan)
  kv_cache_spec cache;
  attention_geometry geometry;

  device_buffer metadata;                         ///< owns every device array below except the partials
  const std::int32_t* token_ids = nullptr;        ///< [T]
  const std::int32_t* positions = nullptr;        ///< [T]
  const std::int64_t* slot_mapping = nullptr;     ///< [T]
  const std::int32_t* kv_indptr = nullptr;        ///< [S+1]
  const std::int32_t* kv_indices = nullptr;       ///< [kv_indptr[S]]
  const std::int32_t* logits_indices = nullptr;   ///< [L]
  const std::int32_t* token_table = nullptr;      ///< [T] rotary table per token; nullptr: one table
  const float* inv_freq = nullptr;                ///< [tables, rotary_dim / 2]
  const std::int32_t* tree_start = nullptr;       ///< [T] tree_key_map::start, or nullptr without a draft tree
  const std::int32_t* tree_key_offset = nullptr;  ///< [T]
  const std::int32_t* tree_keys = nullptr;
  int rotary_dim = 0;

  const prefill_work_item* prefill_items = nullptr;
  int num_prefill_items = 0;
  const decode_work_item* decode_items = nullptr;
  int num_decode_items = 0;
  const decode_merge_item* merge_items = nullptr;
  int num_merge_items = 0;
  int heads_per_tile = 0;
  int group_parts = 0;
  int tokens_per_tile = 0;

  device_buffer partials;        ///< partial_out then partial_lse
  float* partial_out = nullptr;  ///< [partials, num_q_heads, head_dim]
  float* partial_lse = nullptr;  ///< [partials, num_q_heads]
};

}  // namespace troupe::cuda

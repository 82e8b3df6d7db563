#pragma once
// How kernels address the paged KV pool: the layout of kv_cache_spec
// (block-major; in each block, per layer, K then V, each
// [num_kv_heads][block_size][head_dim]) and the CSR page table of a step.

#include <cstdint>

namespace troupe::cuda {

/// One layer's view of the pool plus the step's page table.
struct paged_kv_layer {
  void* pool = nullptr;             ///< the pool, cache element type (bf16 or f16)
  std::int64_t block_elements = 0;  ///< elements per block (all layers, K and V)
  std::int64_t layer_offset = 0;    ///< elements from a block's start to this layer's K tile
  std::int64_t tile_elements = 0;   ///< elements of one K (or V) tile; V follows K at this offset
  int block_size = 0;               ///< tokens per block
  int num_kv_heads = 0;
  int head_dim = 0;
  const std::int32_t* kv_indptr = nullptr;   ///< [S+1] CSR into kv_indices (device)
  const std::int32_t* kv_indices = nullptr;  ///< block ids of each sequence in position order (device)

  /// Element offset of the K row of slot `offset_in_block` of head `head` in
  /// block `block` (the V row is tile_elements further).
  __host__ __device__ std::int64_t key_offset(std::int64_t block, int head, int offset_in_block) const {
    return block * block_elements + layer_offset +
           (static_cast<std::int64_t>(head) * block_size + offset_in_block) * head_dim;
  }
};

}  // namespace troupe::cuda

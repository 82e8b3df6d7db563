#pragma once
// Rotary position embedding (HF rotate_half) fused with writing the step's
// K and V into the paged cache.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/paged_kv.hpp"
#include "kernels/dtype.hpp"

namespace troupe::cuda {

/// For every token t at position p = positions[t], every head, and i below
/// rotary_dim / 2, with angle = p * inv_freq[table(t)][i]:
///   x[i]        <- x[i] cos - x[i + half] sin
///   x[i + half] <- x[i + half] cos + x[i] sin
/// in place on q and k (dims from rotary_dim on pass through), then the
/// rotated k and v are stored at slot_mapping[t] of layer `cache`.
struct rope_kv_params {
  void* q = nullptr;          ///< bf16 [T, num_q_heads * head_dim]
  std::int64_t q_stride = 0;  ///< elements between rows
  void* k = nullptr;          ///< bf16 [T, num_kv_heads * head_dim]
  std::int64_t k_stride = 0;
  const void* v = nullptr;  ///< bf16 [T, num_kv_heads * head_dim]
  std::int64_t v_stride = 0;
  const std::int32_t* positions = nullptr;     ///< [T]
  const std::int64_t* slot_mapping = nullptr;  ///< [T] block * block_size + offset
  const float* inv_freq = nullptr;             ///< [tables, rotary_dim / 2] radians per position
  const std::int32_t* token_table = nullptr;   ///< [T] table of each token, or nullptr: table 0
  paged_kv_layer cache;                        ///< page table fields unused here
  dtype cache_type = dtype::bf16;              ///< bf16 or f16
  std::int64_t num_tokens = 0;
  int num_q_heads = 0;
  int rotary_dim = 0;  ///< even, <= head_dim
};

/// Enqueues the rotation and the cache write on `stream`.
void launch_rope_kv(const rope_kv_params& params, cudaStream_t stream);

}  // namespace troupe::cuda

#pragma once
// Paged causal attention over the CSR page table, in two kernels chosen per
// sequence by plan_step: FlashAttention-style tiles for prefill chunks, and
// split-KV (Flash-Decoding) for single-token queries, whose partial softmax
// states a third kernel merges. Both are GQA-aware: a thread block serves
// all query heads that share one KV head, so each K/V row is loaded once
// per group. q and out are bf16; the cache is bf16 or f16; scores, softmax
// and accumulation are float.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/paged_kv.hpp"
#include "kernels/dtype.hpp"

namespace troupe::cuda {

/// Head dims with a specialised instantiation; others (multiples of 8 up to
/// max_generic_head_dim) take the generic path.
constexpr int max_generic_head_dim = 256;

/// Query rows per prefill tile (tokens × heads of one group) for head_dim:
/// 64 for the specialised 64 and 128, 32 for the generic path (sized for 256).
constexpr int prefill_tile_rows(int head_dim) { return head_dim == 64 || head_dim == 128 ? 64 : 32; }

/// A tile of a prefill chunk: q_count consecutive tokens of sequence seq.
struct prefill_work_item {
  std::int32_t seq = 0;      ///< sequence index into kv_indptr
  std::int32_t q_begin = 0;  ///< first token row of the tile in q / out
  std::int32_t q_count = 0;  ///< tokens in the tile, 1..tokens_per_tile
  std::int32_t kv_end = 0;   ///< keys visited: [0, kv_end) = largest position in the tile + 1
};

/// Prefill attention. Grid: (num_items, num_kv_heads * group_parts); the
/// tile's rows are (token, head) pairs, row r = token r / heads_per_tile and
/// head part * heads_per_tile + r % heads_per_tile of the group. A query at
/// position p attends to keys 0..p of its sequence.
struct prefill_attention_params {
  const void* q = nullptr;    ///< bf16 [T, num_q_heads * head_dim]
  std::int64_t q_stride = 0;  ///< elements between rows
  void* out = nullptr;        ///< bf16 [T, num_q_heads * head_dim]
  std::int64_t out_stride = 0;
  const std::int32_t* positions = nullptr;  ///< [T]
  paged_kv_layer kv;
  dtype cache_type = dtype::bf16;
  const prefill_work_item* items = nullptr;  ///< [num_items] (device)
  int num_items = 0;
  int group_size = 0;       ///< num_q_heads / num_kv_heads
  int heads_per_tile = 0;   ///< min(group_size, tile rows)
  int group_parts = 0;      ///< ceil(group_size / heads_per_tile)
  int tokens_per_tile = 0;  ///< tile rows / heads_per_tile
  float scale = 0.0f;       ///< softmax scale
};

/// One split of a decode sequence's key range.
struct decode_work_item {
  std::int32_t seq = 0;       ///< sequence index into kv_indptr
  std::int32_t token = 0;     ///< the query's token row in q / out
  std::int32_t kv_begin = 0;  ///< keys [kv_begin, kv_end), never empty
  std::int32_t kv_end = 0;
  std::int32_t partial = -1;  ///< -1: the only split, written to out; else its partial slot
};

/// Decode attention. Grid: (num_items, num_kv_heads); a block computes the
/// group's softmax over its key range. Partial results are normalised:
/// partial_out = Σ p v / Σ p and partial_lse = max + log Σ p (scaled scores).
struct decode_attention_params {
  const void* q = nullptr;  ///< bf16 [T, num_q_heads * head_dim]
  std::int64_t q_stride = 0;
  void* out = nullptr;  ///< bf16 [T, num_q_heads * head_dim]
  std::int64_t out_stride = 0;
  paged_kv_layer kv;
  dtype cache_type = dtype::bf16;
  const decode_work_item* items = nullptr;  ///< [num_items] (device)
  int num_items = 0;
  int group_size = 0;  ///< num_q_heads / num_kv_heads
  float scale = 0.0f;
  float* partial_out = nullptr;  ///< [partials, num_q_heads, head_dim]
  float* partial_lse = nullptr;  ///< [partials, num_q_heads]
  /// Draft trees (kernels/tree_attention.hpp), device arrays or null: the
  /// token's keys at positions >= tree_start[token] are read at cache
  /// positions tree_keys[tree_key_offset[token] + key - tree_start[token]].
  const std::int32_t* tree_start = nullptr;       ///< [T]
  const std::int32_t* tree_key_offset = nullptr;  ///< [T]
  const std::int32_t* tree_keys = nullptr;
};

/// The partial slots [first_partial, first_partial + num_partials) of one token.
struct decode_merge_item {
  std::int32_t token = 0;
  std::int32_t first_partial = 0;
  std::int32_t num_partials = 0;
};

/// Merges split-KV partial states: out = Σ_i e^(lse_i - M) o_i / Σ_i e^(lse_i - M).
/// Grid: (num_items, num_q_heads).
struct decode_merge_params {
  const decode_merge_item* items = nullptr;  ///< [num_items] (device)
  int num_items = 0;
  int num_q_heads = 0;
  int head_dim = 0;
  const float* partial_out = nullptr;  ///< [partials, num_q_heads, head_dim]
  const float* partial_lse = nullptr;  ///< [partials, num_q_heads]
  void* out = nullptr;                 ///< bf16 [T, num_q_heads * head_dim]
  std::int64_t out_stride = 0;
};

/// Shared memory the prefill kernel needs for this geometry, bytes.
std::size_t prefill_shared_bytes(int head_dim, dtype cache_type);
/// Shared memory the decode kernel needs for this geometry, bytes.
std::size_t decode_shared_bytes(int head_dim, int group_size, dtype cache_type);

/// Enqueues prefill attention on `stream`; throws if the geometry needs more
/// shared memory than `shared_limit` (the device's opt-in maximum).
void launch_prefill_attention(const prefill_attention_params& params, std::size_t shared_limit, cudaStream_t stream);
/// Enqueues decode attention on `stream` (same shared-memory check).
void launch_decode_attention(const decode_attention_params& params, std::size_t shared_limit, cudaStream_t stream);
/// Enqueues the merge of partial states on `stream`.
void launch_decode_merge(const decode_merge_params& params, cudaStream_t stream);

}  // namespace troupe::cuda

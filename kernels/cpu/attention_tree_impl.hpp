#pragma once
// Tree attention's key gathering (speculative decoding with a draft tree,
// kernels/step_batch.hpp's tree_parent): a tree token sees its sequence's
// cache up to its root, then its ancestors' keys and its own, which sit at
// scattered cache positions. They are gathered into a tile laid out as if
// the path had been fed as a chain (key x at row x - first), so the fold
// reads, pads and reduces exactly as for a chain's token at the same
// position, bit for bit. Included only by attention_impl.hpp.

#include "kernels/cpu/isa_kernels.hpp"
#include "kernels/cpu/simd.hpp"

namespace troupe::cpu::TROUPE_ISA_NS {

/// Element offset of kv head `head`'s K tile in block `block`.
inline std::int64_t tile_offset(const attention_args& a, std::int32_t block, int head) {
  return static_cast<std::int64_t>(block) * a.block_elements + a.layer_offset +
         static_cast<std::int64_t>(head) * a.block_size * a.head_dim;
}

/// Converts `n` cache elements at `src` (of the cache's type) to f32 at `dst`.
inline void convert_to_f32(const attention_args& a, const void* src, int n, float* dst) {
  if (a.cache_type == elem::f32) {
    const auto* from = static_cast<const float*>(src);
    for (int i = 0; i < n; ++i) dst[i] = from[i];
    return;
  }
  const auto* from = static_cast<const std::uint16_t*>(src);
  const bool bf16 = a.cache_type == elem::bf16;
  int i = 0;
  for (; i + W <= n; i += W) store(dst + i, bf16 ? load_bf16(from + i) : load_f16(from + i));
  if (i < n) store_tail(dst + i, bf16 ? load_bf16_tail(from + i, n - i) : load_f16_tail(from + i, n - i), n - i);
}

/// Loads the K and V rows of kv head `head` at cache position `position` as f32.
inline void load_cached_row(const attention_args& a, std::int64_t position, int head, float* k, float* v) {
  const std::int32_t block = a.pages[position / a.block_size];
  const std::int64_t element = tile_offset(a, block, head) + (position % a.block_size) * a.head_dim;
  const std::int64_t element_bytes = a.cache_type == elem::f32 ? 4 : 2;
  const char* base = static_cast<const char*>(a.cache);
  convert_to_f32(a, base + element * element_bytes, a.head_dim, k);
  convert_to_f32(a, base + (element + a.tile_elements) * element_bytes, a.head_dim, v);
}

/// Whether query `t`'s keys [first, first + keys) include remapped (tree) ones.
inline bool sees_tree_keys(const attention_args& a, int t, std::int64_t first, int keys) {
  return a.tree_start != nullptr && a.tree_start[t] < first + keys;
}

/// Gathers the keys [first, first + keys) query `t` sees, of kv head `head`,
/// into `k` and `v` ([keys][head_dim] each): positions before its tree
/// start are the cache's own, later ones its path's cache positions.
inline void gather_tree_tile(const attention_args& a, int t, int head, std::int64_t first, int keys, float* k,
                             float* v) {
  const std::int64_t start = a.tree_start[t];
  const std::int32_t* remapped = a.tree_keys + a.tree_key_offset[t];
  for (int j = 0; j < keys; ++j) {
    const std::int64_t x = first + j;
    const std::int64_t position = x < start ? x : remapped[x - start];
    load_cached_row(a, position, head, k + static_cast<std::int64_t>(j) * a.head_dim,
                    v + static_cast<std::int64_t>(j) * a.head_dim);
  }
}

}  // namespace troupe::cpu::TROUPE_ISA_NS

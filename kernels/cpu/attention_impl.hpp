#pragma once
// Paged causal attention for one work item (one sequence, a run of query
// tokens, a range of cached tokens, every head), FlashAttention-style: an
// online softmax over one cache block at a time, so no [tokens × context]
// score matrix exists. A block's heads are walked in memory order, so its K
// and V regions stream sequentially; the q heads of a GQA group and the
// step's tokens share each K/V tile, read (converted to f32, or its keys
// paired for vdpbf16ps) once. Included only by the ISA units.

#include "kernels/cpu/attention_pairs_impl.hpp"
#include "kernels/cpu/attention_tree_impl.hpp"
#include "kernels/cpu/isa_kernels.hpp"
#include "kernels/cpu/simd.hpp"

namespace troupe::cpu::TROUPE_ISA_NS {

/// Scores of one query row against keys [0, count) (count <= W) of a tile
/// [.][head_dim]: one accumulator per key, reduced all at once.
inline vf score_keys(const float* q, const float* k, int head_dim, int count) {
  vf acc[W];
#pragma GCC unroll 16
  for (int j = 0; j < W; ++j) acc[j] = zero();
  int d = 0;
  for (; d + W <= head_dim; d += W) {
    const vf qv = load(q + d);
#pragma GCC unroll 16
    for (int j = 0; j < W; ++j) {
      if (j < count) acc[j] = fma(qv, load(k + static_cast<std::int64_t>(j) * head_dim + d), acc[j]);
    }
  }
  if (d < head_dim) {
    const int rest = head_dim - d;
    const vf qv = load_tail(q + d, rest);
#pragma GCC unroll 16
    for (int j = 0; j < W; ++j) {
      if (j < count) acc[j] = fma(qv, load_tail(k + static_cast<std::int64_t>(j) * head_dim + d, rest), acc[j]);
    }
  }
  return reduce_transpose(acc);
}

/// Rows folded together: the q heads of one GQA group at one token share
/// every K/V load.
constexpr int max_fold_rows = 8;

/// Softmax states of up to max_fold_rows query rows with the same causal
/// limit: unnormalised outputs, running maxima and sums, and their q vectors.
struct row_group {
  int count;
  const float* q[max_fold_rows];                ///< f32 [head_dim] each
  const std::uint32_t* q_pairs[max_fold_rows];  ///< the same as pairs, where the level scores from those
  float* o[max_fold_rows];
  float* m[max_fold_rows];
  float* l[max_fold_rows];
};

/// Scores of one row for keys [0, keys) into `scores` (padded with -inf to a
/// multiple of W); returns their maximum.
inline float score_row(const float* q, const float* k, int keys, int head_dim, float scale, float* scores) {
  const float neg_inf = -__builtin_inff();
  vf max_v = set1(neg_inf);
  for (int j = 0; j < keys; j += W) {
    store(scores + j, mul(score_keys(q, k + static_cast<std::int64_t>(j) * head_dim, head_dim, keys - j), set1(scale)));
    for (int pad = keys; pad < j + W; ++pad) scores[pad] = neg_inf;  // keys past the limit weigh 0
    max_v = max(max_v, load(scores + j));
  }
  return reduce_max(max_v);
}

/// Turns a row's scores into weights exp(s - new max) and updates its max and
/// sum; returns the factor its earlier output must be scaled by.
inline float rescale_row(float* scores, int keys, float tile_max, float* m, float* l) {
  const float new_max = *m > tile_max ? *m : tile_max;
  const float alpha = __builtin_expf(*m - new_max);  // 0 while the row is still empty (m = -inf)
  const vf shift = set1(new_max);
  vf sum = zero();
  for (int j = 0; j < keys; j += W) {
    const vf p = exp(sub(load(scores + j), shift));
    store(scores + j, p);
    sum = add(sum, p);
  }
  *l = *l * alpha + reduce_add(sum);
  *m = new_max;
  return alpha;
}

/// o_i = o_i * alpha_i + Σ_t p_i[t] v[t] for N rows, each V vector loaded
/// once for all of them (N fixed so the accumulators stay in registers).
/// `rest` > 0 handles a last partial vector.
template <int N>
void accumulate_values(const row_group& rows, const float* weights, int stride, const float* alpha, const float* v,
                       int keys, int head_dim, int d, int rest) {
  vf acc[N];
#pragma GCC unroll 8
  for (int i = 0; i < N; ++i) acc[i] = mul(rest ? load_tail(rows.o[i] + d, rest) : load(rows.o[i] + d), set1(alpha[i]));
  for (int t = 0; t < keys; ++t) {
    const float* row = v + static_cast<std::int64_t>(t) * head_dim + d;
    const vf value = rest ? load_tail(row, rest) : load(row);
#pragma GCC unroll 8
    for (int i = 0; i < N; ++i) acc[i] = fma(set1(weights[i * stride + t]), value, acc[i]);
  }
#pragma GCC unroll 8
  for (int i = 0; i < N; ++i) rest ? store_tail(rows.o[i] + d, acc[i], rest) : store(rows.o[i] + d, acc[i]);
}

template <int N>
void accumulate_all_values(const row_group& rows, const float* weights, int stride, const float* alpha, const float* v,
                           int keys, int head_dim) {
  int d = 0;
  for (; d + W <= head_dim; d += W) accumulate_values<N>(rows, weights, stride, alpha, v, keys, head_dim, d, 0);
  if (d < head_dim) accumulate_values<N>(rows, weights, stride, alpha, v, keys, head_dim, d, head_dim - d);
}

/// One block's keys as the fold reads them: f32 rows ([.][head_dim]), or
/// pairs (attention_pairs_impl.hpp) where the level scores from those.
struct key_tile {
  const float* rows = nullptr;
  const std::uint32_t* pairs = nullptr;
};

/// Folds keys [0, keys) of one K/V tile into a group of rows. `scores` has
/// room for max_fold_rows rows of `stride` floats.
inline void fold_tile(const row_group& rows, key_tile k, const float* v, int keys, int head_dim, float scale,
                      float* scores, int stride) {
  float tile_max[max_fold_rows], alpha[max_fold_rows];
  if (k.pairs != nullptr) {
    score_rows_paired(rows.count, rows.q_pairs, k.pairs, keys, head_dim, scale, scores, stride, tile_max);
  } else {
    for (int i = 0; i < rows.count; ++i)
      tile_max[i] = score_row(rows.q[i], k.rows, keys, head_dim, scale, scores + i * stride);
  }
  for (int i = 0; i < rows.count; ++i)
    alpha[i] = rescale_row(scores + i * stride, keys, tile_max[i], rows.m[i], rows.l[i]);
  with_count<max_fold_rows>(rows.count,
                            [&]<int N>() { accumulate_all_values<N>(rows, scores, stride, alpha, v, keys, head_dim); });
}

/// Writes the raw softmax state of every row into the partial buffers.
inline void write_partial_rows(const attention_args& a, const float* o, const float* m, const float* l) {
  const std::int64_t rows = std::int64_t{a.num_queries} * a.kv_heads * a.group;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* src = o + r * a.head_dim;
    float* dst = a.partial_o + r * a.head_dim;
    for (int d = 0; d < a.head_dim; ++d) dst[d] = src[d];
    a.partial_m[r] = m[r];
    a.partial_l[r] = l[r];
  }
}

/// Folds one chunk's softmax state of a row (output o, max m, sum l) into
/// the row's merged state, chunks in position order. The one merge rule for
/// both in-item chunks and split items.
inline void merge_chunk_state(const float* o, float m, float l, int head_dim, float* merged_o, float* merged_m,
                              float* merged_l) {
  if (l == 0.0f) return;  // the chunk lies wholly after this query
  const float new_max = *merged_m > m ? *merged_m : m;
  const float merged_scale = __builtin_expf(*merged_m - new_max);  // 0 while nothing is merged (m = -inf)
  const float chunk_scale = __builtin_expf(m - new_max);
  const vf old_weight = set1(merged_scale), new_weight = set1(chunk_scale);
  int d = 0;
  for (; d + W <= head_dim; d += W)
    store(merged_o + d, add(mul(load(merged_o + d), old_weight), mul(load(o + d), new_weight)));
  if (d < head_dim) {
    const int rest = head_dim - d;
    store_tail(merged_o + d,
               add(mul(load_tail(merged_o + d, rest), old_weight), mul(load_tail(o + d, rest), new_weight)), rest);
  }
  *merged_l = *merged_l * merged_scale + l * chunk_scale;
  *merged_m = new_max;
}

/// Empty softmax states for `rows` rows: o = 0, m = -inf, l = 0.
inline void reset_states(float* o, float* m, float* l, std::int64_t rows, int head_dim) {
  for (std::int64_t i = 0; i < rows * head_dim; ++i) o[i] = 0.0f;
  for (std::int64_t r = 0; r < rows; ++r) {
    m[r] = -__builtin_inff();
    l[r] = 0.0f;
  }
}

/// dst = o / l (zeros for an empty row).
inline void write_normalised(const float* o, float l, int head_dim, float* dst) {
  const vf inv = set1(l > 0.0f ? 1.0f / l : 0.0f);
  int d = 0;
  for (; d + W <= head_dim; d += W) store(dst + d, mul(load(o + d), inv));
  if (d < head_dim) store_tail(dst + d, mul(load_tail(o + d, head_dim - d), inv), head_dim - d);
}

/// Merges the chunks of split rows, in chunk order, and writes their outputs.
inline void attention_merge(const attention_merge_args& a) {
  for (std::int64_t r = 0; r < a.rows; ++r) {
    float merged_m = -__builtin_inff(), merged_l = 0.0f;
    for (int d = 0; d < a.head_dim; ++d) a.scratch[d] = 0.0f;
    for (int c = 0; c < a.chunks; ++c) {
      const std::int64_t row = c * a.rows + r;
      merge_chunk_state(a.partial_o + row * a.head_dim, a.partial_m[row], a.partial_l[row], a.head_dim, a.scratch,
                        &merged_m, &merged_l);
    }
    write_normalised(a.scratch, merged_l, a.head_dim,
                     a.out + (r / a.q_heads) * a.out_stride + (r % a.q_heads) * static_cast<std::int64_t>(a.head_dim));
  }
}

/// Prefetches the K and V tiles of kv head `head` in block `block`, all at once.
inline void prefetch_tiles(const attention_args& a, std::int32_t block, int head) {
  const std::int64_t element_bytes = a.cache_type == elem::f32 ? 4 : 2;
  const char* k = static_cast<const char*>(a.cache) + tile_offset(a, block, head) * element_bytes;
  const char* v = k + a.tile_elements * element_bytes;
  const std::int64_t bytes = static_cast<std::int64_t>(a.block_size) * a.head_dim * element_bytes;
  for (std::int64_t offset = 0; offset < bytes; offset += 64) {
    prefetch(k + offset);
    prefetch(v + offset);
  }
}

/// Softmax state buffers of one work item, carved from its scratch.
struct attention_buffers {
  float *o, *m, *l;                       ///< the current chunk's state
  float *merged_o, *merged_m, *merged_l;  ///< the chunks merged so far
  float *scores, *k_buf, *v_buf;
  float *tree_k, *tree_v;                 ///< a tree query's gathered tile
  std::uint32_t *key_pairs, *tree_pairs;  ///< paired keys of the block's tile and of a tree query's
  std::uint16_t* tree_narrow;             ///< a tree query's keys narrowed back to bf16
  std::uint32_t* q_pairs;                 ///< every row's query as pairs (paired_query_words each)
};

/// One block's tiles of kv head `head`: keys as the fold reads them, values
/// as f32 (converted into the buffers when the cache is bf16/f16). A
/// sequence's blocks lie anywhere in the pool, so the hardware prefetcher
/// cannot see the next one coming: the same head's tiles of `next_block`
/// (-1: none) are prefetched one line per line converted here, which keeps
/// the requests within what the core can have in flight.
inline void load_tiles(const attention_args& a, const attention_buffers& b, std::int32_t block, std::int32_t next_block,
                       int head, int count, key_tile* k, const float** v) {
  const std::int64_t offset = tile_offset(a, block, head);
  const std::int64_t n = static_cast<std::int64_t>(count) * a.head_dim;
  if (a.cache_type == elem::f32) {
    if (next_block >= 0) prefetch_tiles(a, next_block, head);
    k->rows = static_cast<const float*>(a.cache) + offset;
    *v = k->rows + a.tile_elements;
    return;
  }
  const auto* base = static_cast<const std::uint16_t*>(a.cache) + offset;
  const std::uint16_t* v_base = base + a.tile_elements;
  const std::uint16_t* next =
      next_block >= 0 ? static_cast<const std::uint16_t*>(a.cache) + tile_offset(a, next_block, head) : nullptr;
  const bool bf16 = a.cache_type == elem::bf16;
  const bool paired = scores_key_pairs(a.cache_type);
  if (paired) pair_keys(base, count, a.head_dim, b.key_pairs);
  std::int64_t i = 0;
  for (; i + W <= n; i += W) {
    if (next != nullptr && (i & 31) == 0) {  // once per 64 bytes of 16-bit elements
      prefetch(next + i);
      prefetch(next + a.tile_elements + i);
    }
    if (!paired) store(b.k_buf + i, bf16 ? load_bf16(base + i) : load_f16(base + i));
    store(b.v_buf + i, bf16 ? load_bf16(v_base + i) : load_f16(v_base + i));
  }
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    if (!paired) store_tail(b.k_buf + i, bf16 ? load_bf16_tail(base + i, rest) : load_f16_tail(base + i, rest), rest);
    store_tail(b.v_buf + i, bf16 ? load_bf16_tail(v_base + i, rest) : load_f16_tail(v_base + i, rest), rest);
  }
  *k = paired ? key_tile{.rows = nullptr, .pairs = b.key_pairs} : key_tile{.rows = b.k_buf, .pairs = nullptr};
  *v = b.v_buf;
}

/// Folds one block's tiles of kv head `head` into every row of that head's
/// group (a tree query's from its own gathered tile).
inline void fold_block_head(const attention_args& a, const attention_buffers& b, key_tile k, const float* v, int head,
                            std::int64_t first, int count) {
  const int q_heads = a.kv_heads * a.group;
  const int stride = a.block_size + 2 * W;
  float *o = b.o, *m = b.m, *l = b.l;
  for (int t = 0; t < a.num_queries; ++t) {
    // Causal: the token at position p sees cached positions <= p.
    const std::int64_t visible = a.positions[t] - first + 1;
    const int keys = static_cast<int>(visible < count ? visible : count);
    if (keys <= 0) continue;
    key_tile k_rows = k;
    const float* v_rows = v;
    if (sees_tree_keys(a, t, first, keys)) {
      gather_tree_tile(a, t, head, first, keys, b.tree_k, b.tree_v);
      k_rows.rows = b.tree_k;
      if (k.pairs != nullptr) {
        pair_keys_from_f32(b.tree_k, keys, a.head_dim, b.tree_narrow, b.tree_pairs);
        k_rows.pairs = b.tree_pairs;
      }
      v_rows = b.tree_v;
    }
    for (int g0 = 0; g0 < a.group; g0 += max_fold_rows) {
      row_group rows;
      rows.count = a.group - g0 < max_fold_rows ? a.group - g0 : max_fold_rows;
      for (int i = 0; i < rows.count; ++i) {
        const int q_head = head * a.group + g0 + i;
        const std::int64_t r = static_cast<std::int64_t>(t) * q_heads + q_head;
        rows.q[i] = a.q + t * a.q_stride + static_cast<std::int64_t>(q_head) * a.head_dim;
        rows.q_pairs[i] = b.q_pairs + r * paired_query_words(a.head_dim);
        rows.o[i] = o + r * a.head_dim;
        rows.m[i] = m + r;
        rows.l[i] = l + r;
      }
      fold_tile(rows, k_rows, v_rows, keys, a.head_dim, a.scale, b.scores, stride);
    }
  }
}

/// Lays the buffers out in the item's scratch (attention_scratch_floats).
inline attention_buffers carve_buffers(const attention_args& a, std::int64_t rows) {
  attention_buffers b;
  b.o = a.scratch;
  b.m = b.o + rows * a.head_dim;
  b.l = b.m + rows;
  b.merged_o = b.l + rows;
  b.merged_m = b.merged_o + rows * a.head_dim;
  b.merged_l = b.merged_m + rows;
  b.scores = b.merged_l + rows;  // max_fold_rows rows of block_size + 2 W
  b.k_buf = b.scores + max_fold_rows * (a.block_size + 2 * W);
  b.v_buf = b.k_buf + static_cast<std::int64_t>(a.block_size) * a.head_dim;
  b.tree_k = b.v_buf + static_cast<std::int64_t>(a.block_size) * a.head_dim;
  b.tree_v = b.tree_k + static_cast<std::int64_t>(a.block_size) * a.head_dim;
  const std::int64_t pair_words = paired_key_words(a.block_size, a.head_dim);
  b.key_pairs = reinterpret_cast<std::uint32_t*>(b.tree_v + static_cast<std::int64_t>(a.block_size) * a.head_dim);
  b.tree_pairs = b.key_pairs + pair_words;
  b.tree_narrow = reinterpret_cast<std::uint16_t*>(b.tree_pairs + pair_words);
  b.q_pairs =
      reinterpret_cast<std::uint32_t*>(b.tree_narrow) + (static_cast<std::int64_t>(a.block_size) * a.head_dim + 1) / 2;
  return b;
}

/// Folds cached tokens [begin, end) (whole blocks, bar the context's last)
/// into the chunk state; stops past the last query's position.
inline void fold_range(const attention_args& a, const attention_buffers& b, std::int64_t begin, std::int64_t end,
                       std::int32_t last_position) {
  const int block_size = a.block_size;
  for (std::int64_t first = begin; first < end && first <= last_position; first += block_size) {
    const int count = static_cast<int>(end - first < block_size ? end - first : block_size);
    const std::int32_t block = a.pages[first / block_size];
    // The next block is prefetched across chunk boundaries too.
    const bool has_next = first + block_size < a.kv_end && first + block_size <= last_position;
    const std::int32_t next_block = has_next ? a.pages[(first + block_size) / block_size] : -1;
    for (int head = 0; head < a.kv_heads; ++head) {
      key_tile k;
      const float* v = nullptr;
      load_tiles(a, b, block, next_block, head, count, &k, &v);
      fold_block_head(a, b, k, v, head, first, count);
    }
  }
}

/// Runs one work item: its chunks merged into normalised outputs, or (out
/// null) one chunk's raw state into the partial buffers.
inline void attention(const attention_args& a) {
  const int head_dim = a.head_dim;
  const std::int64_t rows = static_cast<std::int64_t>(a.num_queries) * a.kv_heads * a.group;
  const attention_buffers b = carve_buffers(a, rows);
  if (scores_key_pairs(a.cache_type)) {
    const int q_heads = a.kv_heads * a.group;
    for (std::int64_t r = 0; r < rows; ++r)
      pair_query(a.q + (r / q_heads) * a.q_stride + (r % q_heads) * static_cast<std::int64_t>(head_dim), head_dim,
                 b.q_pairs + r * paired_query_words(head_dim));
  }
  std::int32_t last_position = 0;
  for (int t = 0; t < a.num_queries; ++t)
    last_position = a.positions[t] > last_position ? a.positions[t] : last_position;
  if (a.out == nullptr) {  // one chunk of a split run, merged by attention_merge
    reset_states(b.o, b.m, b.l, rows, head_dim);
    fold_range(a, b, a.kv_begin, a.kv_end, last_position);
    write_partial_rows(a, b.o, b.m, b.l);
    return;
  }
  reset_states(b.merged_o, b.merged_m, b.merged_l, rows, head_dim);
  for (std::int64_t chunk = a.kv_begin; chunk < a.kv_end && chunk <= last_position; chunk += a.chunk_tokens) {
    reset_states(b.o, b.m, b.l, rows, head_dim);
    fold_range(a, b, chunk, a.kv_end - chunk < a.chunk_tokens ? a.kv_end : chunk + a.chunk_tokens, last_position);
    for (std::int64_t r = 0; r < rows; ++r)
      merge_chunk_state(b.o + r * head_dim, b.m[r], b.l[r], head_dim, b.merged_o + r * head_dim, b.merged_m + r,
                        b.merged_l + r);
  }
  const int q_heads = a.kv_heads * a.group;
  for (std::int64_t r = 0; r < rows; ++r)
    write_normalised(b.merged_o + r * head_dim, b.merged_l[r], head_dim,
                     a.out + (r / q_heads) * a.out_stride + (r % q_heads) * static_cast<std::int64_t>(head_dim));
}

}  // namespace troupe::cpu::TROUPE_ISA_NS

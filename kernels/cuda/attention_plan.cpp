#include "kernels/cuda/attention_plan.hpp"

#include <algorithm>

namespace troupe::cuda {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

void add_prefill_tiles(const step_batch& batch, std::int32_t seq, attention_work& work) {
  const std::int32_t begin = batch.query_start[static_cast<std::size_t>(seq)];
  const std::int32_t end = batch.query_start[static_cast<std::size_t>(seq) + 1];
  for (std::int32_t first = begin; first < end; first += work.tokens_per_tile) {
    prefill_work_item item;
    item.seq = seq;
    item.q_begin = first;
    item.q_count = std::min(work.tokens_per_tile, end - first);
    std::int32_t last_position = 0;
    for (std::int32_t t = first; t < first + item.q_count; ++t)
      last_position = std::max(last_position, batch.positions[static_cast<std::size_t>(t)]);
    item.kv_end = last_position + 1;
    work.prefill.push_back(item);
  }
}

// Splits so that the decode grid fills the device about twice, never below
// min_keys_per_split keys per split (the merge and the extra launch cost
// more than they save on short contexts).
int planned_splits(std::int64_t kv_len, std::int64_t wanted, const attention_partition_options& options) {
  if (options.decode_splits > 0) return static_cast<int>(std::min<std::int64_t>(options.decode_splits, kv_len));
  const std::int64_t by_length = ceil_div(kv_len, min_keys_per_split);
  return static_cast<int>(
      std::max<std::int64_t>(1, std::min({wanted, by_length, std::int64_t{max_splits_per_sequence}})));
}

void add_decode_items(const step_batch& batch, std::int32_t seq, std::int32_t token, std::int64_t wanted,
                      const attention_partition_options& options, attention_work& work) {
  const std::int64_t kv_len = std::int64_t{batch.positions[static_cast<std::size_t>(token)]} + 1;
  const int splits = planned_splits(kv_len, wanted, options);
  std::int64_t chunk = ceil_div(kv_len, splits);
  if (options.decode_splits == 0) chunk = ceil_div(chunk, 64) * 64;  // whole key tiles
  const auto used = static_cast<std::int32_t>(ceil_div(kv_len, chunk));
  if (used == 1) {
    work.decode.push_back({seq, token, 0, static_cast<std::int32_t>(kv_len), -1});
    return;
  }
  work.merges.push_back({token, work.num_partials, used});
  for (std::int32_t i = 0; i < used; ++i) {
    const auto begin = static_cast<std::int32_t>(i * chunk);
    const auto end = static_cast<std::int32_t>(std::min<std::int64_t>(kv_len, (i + 1) * chunk));
    work.decode.push_back({seq, token, begin, end, work.num_partials + i});
  }
  work.num_partials += used;
}

// Whether sequence `seq` feeds a draft tree (its last token has a tree parent).
bool feeds_tree(const step_batch& batch, std::int32_t seq) {
  const std::int32_t last = batch.query_start[static_cast<std::size_t>(seq) + 1] - 1;
  return !batch.tree_parent.empty() && last >= batch.query_start[static_cast<std::size_t>(seq)] &&
         batch.tree_parent[static_cast<std::size_t>(last)] >= 0;
}

}  // namespace

attention_work partition_attention(const step_batch& batch, const attention_geometry& geometry,
                                   const attention_partition_options& options) {
  attention_work work;
  const int group = geometry.num_q_heads / geometry.num_kv_heads;
  const int rows = prefill_tile_rows(geometry.head_dim);
  work.heads_per_tile = std::min(group, rows);
  work.group_parts = static_cast<int>(ceil_div(group, work.heads_per_tile));
  work.tokens_per_tile = rows / work.heads_per_tile;

  const auto num_seqs = static_cast<std::int32_t>(batch.num_sequences());
  std::int64_t decode_seqs = 0;
  for (std::int32_t s = 0; s < num_seqs; ++s) {
    if (batch.query_start[static_cast<std::size_t>(s) + 1] - batch.query_start[static_cast<std::size_t>(s)] == 1)
      ++decode_seqs;
  }
  const std::int64_t base_blocks = std::max<std::int64_t>(1, decode_seqs * geometry.num_kv_heads);
  const std::int64_t wanted =
      std::max<std::int64_t>(1, ceil_div(2 * std::int64_t{options.multiprocessors}, base_blocks));
  for (std::int32_t s = 0; s < num_seqs; ++s) {
    const std::int32_t q_len =
        batch.query_start[static_cast<std::size_t>(s) + 1] - batch.query_start[static_cast<std::size_t>(s)];
    const std::int32_t first = batch.query_start[static_cast<std::size_t>(s)];
    if (q_len == 1) {
      add_decode_items(batch, s, first, wanted, options, work);
    } else if (feeds_tree(batch, s)) {
      // Each tree token reads its own path's keys: one query per item, keys remapped by the decode kernel.
      for (std::int32_t t = first; t < first + q_len; ++t) add_decode_items(batch, s, t, wanted, options, work);
    } else if (q_len > 1) {
      add_prefill_tiles(batch, s, work);
    }
  }
  return work;
}

}  // namespace troupe::cuda

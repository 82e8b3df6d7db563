#include "kernels/cpu/cpu_plan.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace troupe::cpu {

namespace {

void check_geometry(const kv_cache_spec& cache, const attention_geometry& geometry, int rotary_dim) {
  if (geometry.num_kv_heads <= 0 || geometry.num_q_heads % geometry.num_kv_heads != 0)
    throw std::invalid_argument("attention geometry: num_q_heads must be a multiple of num_kv_heads");
  if (geometry.num_kv_heads != cache.num_kv_heads || geometry.head_dim != cache.head_dim)
    throw std::invalid_argument("attention geometry disagrees with the kv cache spec (kv heads or head_dim)");
  if (rotary_dim % 2 != 0 || rotary_dim > geometry.head_dim || rotary_dim <= 0)
    throw std::invalid_argument("rope head_dim must be even, positive and at most the attention head_dim");
}

// cos/sin per token as transformers computes them: angle = float(position) *
// inv_freq in f32, then cos/sin of that f32 angle.
void fill_rotary_tables(const step_batch& batch, cpu_step_plan& plan) {
  const std::size_t half = static_cast<std::size_t>(plan.rotary_dim / 2);
  plan.rope_cos.resize(static_cast<std::size_t>(batch.num_tokens()) * half);
  plan.rope_sin.resize(plan.rope_cos.size());
  rope_spec spec = plan.geometry.rope;
  spec.head_dim = plan.rotary_dim;
  const bool per_sequence = rope_depends_on_length(spec);
  std::vector<float> inv_freq = per_sequence ? std::vector<float>{} : rope_inverse_frequencies(spec, 1);
  for (std::int64_t s = 0; s < batch.num_sequences(); ++s) {
    if (per_sequence) inv_freq = rope_inverse_frequencies(spec, batch.seq_lens[static_cast<std::size_t>(s)]);
    for (std::int32_t t = batch.query_start[static_cast<std::size_t>(s)];
         t < batch.query_start[static_cast<std::size_t>(s) + 1]; ++t) {
      const float position = static_cast<float>(batch.positions[static_cast<std::size_t>(t)]);
      float* cos_row = plan.rope_cos.data() + static_cast<std::size_t>(t) * half;
      float* sin_row = plan.rope_sin.data() + static_cast<std::size_t>(t) * half;
      for (std::size_t i = 0; i < half; ++i) {
        const float angle = position * inv_freq[i];
        cos_row[i] = std::cos(angle);
        sin_row[i] = std::sin(angle);
      }
    }
  }
}

// Work items per (sequence, query block), each covering every head. A query
// block whose context exceeds one chunk (decode, short verification runs)
// is split into one item per chunk, so a long decode keeps every core busy.
// Either way each query's context is cut at the same positions and merged
// by the same rule, so its result is the same bits whatever else shares the
// batch and however its prompt was chunked.
void partition_attention(const step_batch& batch, cpu_step_plan& plan) {
  const int block_size = plan.cache.block_size;
  const std::int64_t split_tokens = std::max(1, attention_split_tokens / block_size) * std::int64_t{block_size};
  plan.chunk_tokens = split_tokens;
  std::vector<std::int64_t> cost;  // cached tokens each item reads, times its queries
  for (std::int64_t s = 0; s < batch.num_sequences(); ++s) {
    const auto su = static_cast<std::size_t>(s);
    const std::int32_t begin = batch.query_start[su], end = batch.query_start[su + 1];
    const std::int64_t seq_len = batch.seq_lens[su];
    const bool split = end - begin <= attention_query_block && seq_len > split_tokens;
    for (std::int32_t first = begin; first < end; first += attention_query_block) {
      const std::int32_t queries = std::min(attention_query_block, end - first);
      const std::int64_t rows = std::int64_t{queries} * plan.geometry.num_q_heads;
      const std::int64_t visible =
          *std::max_element(batch.positions.begin() + first, batch.positions.begin() + first + queries) + 1;
      plan.max_item_rows = std::max(plan.max_item_rows, rows);
      if (!split) {
        plan.items.push_back({static_cast<std::int32_t>(s), first, queries, 0, seq_len, -1});
        cost.push_back(visible * queries);
        continue;
      }
      const auto chunks = static_cast<std::int32_t>((seq_len + split_tokens - 1) / split_tokens);
      plan.merges.push_back({first, queries, chunks, plan.partial_rows});
      for (std::int32_t c = 0; c < chunks; ++c) {
        const std::int64_t kv_begin = c * split_tokens, kv_end = std::min(seq_len, kv_begin + split_tokens);
        plan.items.push_back(
            {static_cast<std::int32_t>(s), first, queries, kv_begin, kv_end, plan.partial_rows + c * rows});
        cost.push_back(std::max<std::int64_t>(0, std::min(kv_end, visible) - kv_begin) * queries);
      }
      plan.partial_rows += chunks * rows;
    }
  }
  // Costliest items first so the dynamic schedule ends evenly; the order
  // does not change any result.
  std::vector<std::size_t> order(plan.items.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return cost[a] > cost[b]; });
  std::vector<attention_item> sorted;
  sorted.reserve(order.size());
  for (std::size_t i : order) sorted.push_back(plan.items[i]);
  plan.items = std::move(sorted);
}

}  // namespace

std::unique_ptr<cpu_step_plan> build_step_plan(const step_batch& batch, const kv_cache_spec& cache,
                                               const attention_geometry& geometry) {
  if (std::string problem = validate_step_batch(batch, cache); !problem.empty())
    throw std::invalid_argument("invalid step batch: " + problem);
  auto plan = std::make_unique<cpu_step_plan>();
  plan->batch = &batch;
  plan->cache = cache;
  plan->geometry = geometry;
  plan->rotary_dim = geometry.rope.head_dim > 0 ? geometry.rope.head_dim : geometry.head_dim;
  check_geometry(cache, geometry, plan->rotary_dim);
  fill_rotary_tables(batch, *plan);
  partition_attention(batch, *plan);
  plan->tree = map_tree_keys(batch);
  return plan;
}

}  // namespace troupe::cpu

#pragma once
// Builds step batches over a paged KV pool for the attention tests: ragged
// sequences, each with a cached prefix and new tokens, whose blocks are
// taken from a shuffled list of the pool's blocks.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/backend.hpp"
#include "tests/kernels/cpu_test_support.hpp"

namespace troupe::test {

/// One sequence of a step: `cached` tokens already in the cache, `fresh` new ones.
struct sequence_shape {
  int cached = 0;
  int fresh = 1;
};

/// A step batch and the blocks each sequence owns.
struct paged_step {
  step_batch batch;
  std::vector<std::vector<std::int32_t>> pages;  // per sequence
};

/// Ends the sequence whose tokens were just appended to `step`: its query
/// range, length `length`, its `pages` and the logits row of its last token.
inline void close_sequence(paged_step& step, std::vector<std::int32_t> pages, int length, int block_size) {
  step_batch& b = step.batch;
  const auto blocks = static_cast<int>(pages.size());
  b.query_start.push_back(static_cast<std::int32_t>(b.token_ids.size()));
  b.seq_lens.push_back(length);
  b.kv_indices.insert(b.kv_indices.end(), pages.begin(), pages.end());
  b.kv_indptr.push_back(static_cast<std::int32_t>(b.kv_indices.size()));
  b.kv_last_page_len.push_back(length - (blocks - 1) * block_size);
  b.logits_indices.push_back(static_cast<std::int32_t>(b.token_ids.size()) - 1);
  step.pages.push_back(std::move(pages));
}

/// Lays the sequences out over `block_ids` (consumed in order).
inline paged_step build_step(const std::vector<sequence_shape>& shapes, int block_size,
                             const std::vector<std::int32_t>& block_ids) {
  paged_step step;
  step_batch& b = step.batch;
  b.query_start.push_back(0);
  b.kv_indptr.push_back(0);
  std::size_t next_block = 0;
  for (const sequence_shape& shape : shapes) {
    const int length = shape.cached + shape.fresh;
    const int blocks = (length + block_size - 1) / block_size;
    std::vector<std::int32_t> pages(block_ids.begin() + static_cast<std::ptrdiff_t>(next_block),
                                    block_ids.begin() + static_cast<std::ptrdiff_t>(next_block + blocks));
    next_block += static_cast<std::size_t>(blocks);
    for (int p = shape.cached; p < length; ++p) {
      b.token_ids.push_back(p % 7);
      b.positions.push_back(p);
      b.slot_mapping.push_back(std::int64_t{pages[static_cast<std::size_t>(p / block_size)]} * block_size +
                               p % block_size);
    }
    close_sequence(step, std::move(pages), length, block_size);
  }
  return step;
}

/// Blocks [0, count) in a random order.
inline std::vector<std::int32_t> shuffled_blocks(std::int64_t count, random_source& rng) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>(i);
  std::shuffle(ids.begin(), ids.end(), rng.engine());
  return ids;
}

/// Where one K or V element sits in the pool.
struct kv_coordinate {
  bool is_value = false;  ///< V (true) or K (false)
  std::int64_t block = 0;
  int layer = 0;
  int head = 0;    ///< kv head
  int offset = 0;  ///< token within the block
  int dim = 0;     ///< dimension within the head
};

/// A host copy of the pool's contents plus the backend cache they were loaded into.
struct filled_cache {
  std::unique_ptr<kv_cache> cache;
  std::unique_ptr<host_block_pool> host;
  kv_cache_spec spec;

  /// Element e of block `block` as float (exact widening of the stored type).
  float element(std::int64_t block, std::int64_t e) const {
    const auto* base = static_cast<const std::uint8_t*>(host->block_data(block));
    float value = 0.0f;
    convert_elements(base + e * static_cast<std::int64_t>(dtype_size(spec.type)), spec.type, &value, dtype::f32, 1);
    return value;
  }
  /// The K or V element at `at`.
  float kv(const kv_coordinate& at) const {
    const std::int64_t e = spec.layer_offset(at.layer) + (at.is_value ? spec.tile_elements() : 0) +
                           (std::int64_t{at.head} * spec.block_size + at.offset) * spec.head_dim + at.dim;
    return element(at.block, e);
  }
};

/// A cache whose every block holds random values, loaded through copy_blocks.
inline filled_cache make_filled_cache(backend& b, const kv_cache_spec& spec, random_source& rng) {
  filled_cache f;
  f.spec = spec;
  f.cache = b.create_kv_cache(spec);
  f.host = b.create_host_pool(spec, spec.num_blocks);
  std::vector<block_copy> copies;
  for (std::int64_t block = 0; block < spec.num_blocks; ++block) {
    const stored_values v =
        store_as(rng.floats(static_cast<std::size_t>(spec.block_elements()), -2.0f, 2.0f), spec.type);
    std::memcpy(f.host->block_data(block), v.bytes.data(), v.bytes.size());
    copies.push_back({block_location::host, static_cast<std::int32_t>(block), block_location::device,
                      static_cast<std::int32_t>(block)});
  }
  b.copy_blocks(*f.cache, f.host.get(), copies);
  return f;
}

/// Attention shape and KV element type of one test case.
struct attention_case {
  int q_heads, kv_heads, head_dim, block_size;
  dtype type;
};

/// A two-layer cache of `blocks` blocks for `c`.
inline kv_cache_spec spec_for(const attention_case& c, std::int64_t blocks) {
  return {.num_layers = 2,
          .num_kv_heads = c.kv_heads,
          .head_dim = c.head_dim,
          .block_size = c.block_size,
          .num_blocks = blocks,
          .type = c.type};
}

inline attention_geometry geometry_for(const attention_case& c) {
  attention_geometry g;
  g.num_q_heads = c.q_heads;
  g.num_kv_heads = c.kv_heads;
  g.head_dim = c.head_dim;
  g.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  g.rope.head_dim = c.head_dim;
  return g;
}

/// Blocks the sequences occupy together.
inline std::int64_t blocks_needed(const std::vector<sequence_shape>& shapes, int block_size) {
  std::int64_t n = 0;
  for (const auto& s : shapes) n += (s.cached + s.fresh + block_size - 1) / block_size;
  return n;
}

/// Runs attention for `batch` on `cache` (queries `q_values`, [T, Hq*D]) and
/// returns the output rows; the output starts poisoned and its padding is checked.
inline std::vector<float> run_attention(backend& b, const filled_cache& cache, const step_batch& batch,
                                        const attention_case& c, const std::vector<float>& q_values, int layer) {
  auto plan = b.plan_step(batch, cache.spec, geometry_for(c));
  const std::int64_t tokens = batch.num_tokens(), width = std::int64_t{c.q_heads} * c.head_dim;
  padded_matrix q(b, tokens, width, 7), out(b, tokens, width, 2);
  q.fill(q_values);
  out.poison_view();
  b.attention(*plan, q.view(), *cache.cache, layer, out.view());
  EXPECT_TRUE(out.padding_intact());
  return out.values();
}

}  // namespace troupe::test

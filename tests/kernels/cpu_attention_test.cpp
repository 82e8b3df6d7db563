// Paged attention at every dispatch level against a double-precision
// reference that walks the page table itself, plus batch and block-layout
// invariance.

#include <gtest/gtest.h>

#include <cstring>

#include "tests/kernels/paged_scenario.hpp"

namespace troupe {
namespace {

using test::attention_case;
using test::blocks_needed;
using test::filled_cache;
using test::random_source;
using test::run_attention;
using test::sequence_shape;
using test::spec_for;

std::vector<double> reference_attention(const filled_cache& cache, const step_batch& b, const std::vector<float>& q,
                                        const attention_case& c, int layer) {
  const int group = c.q_heads / c.kv_heads, width = c.q_heads * c.head_dim;
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  std::vector<double> out(b.token_ids.size() * static_cast<std::size_t>(width), 0.0);
  for (std::size_t s = 0; s + 1 < b.query_start.size(); ++s) {
    const std::int32_t* pages = b.kv_indices.data() + b.kv_indptr[s];
    for (std::int32_t t = b.query_start[s]; t < b.query_start[s + 1]; ++t) {
      const int position = b.positions[static_cast<std::size_t>(t)];
      for (int h = 0; h < c.q_heads; ++h) {
        const int kv_head = h / group;
        std::vector<double> scores(static_cast<std::size_t>(position) + 1);
        double best = -1e300;
        for (int p = 0; p <= position; ++p) {
          double dot = 0.0;
          test::kv_coordinate key{
              .block = pages[p / c.block_size], .layer = layer, .head = kv_head, .offset = p % c.block_size};
          for (key.dim = 0; key.dim < c.head_dim; ++key.dim)
            dot +=
                static_cast<double>(q[static_cast<std::size_t>(t * width + h * c.head_dim + key.dim)]) * cache.kv(key);
          scores[static_cast<std::size_t>(p)] = dot * scale;
          best = std::max(best, dot * scale);
        }
        double total = 0.0;
        for (double& score : scores) total += (score = std::exp(score - best));
        for (int p = 0; p <= position; ++p) {
          test::kv_coordinate value{.is_value = true,
                                    .block = pages[p / c.block_size],
                                    .layer = layer,
                                    .head = kv_head,
                                    .offset = p % c.block_size};
          for (value.dim = 0; value.dim < c.head_dim; ++value.dim)
            out[static_cast<std::size_t>(t * width + h * c.head_dim + value.dim)] +=
                scores[static_cast<std::size_t>(p)] / total * cache.kv(value);
        }
      }
    }
  }
  return out;
}

const std::vector<sequence_shape> ragged_shapes = {
    {0, 1}, {0, 37}, {45, 20}, {300, 1}, {700, 1}, {530, 3}, {17, 1}, {5, 40},
};

class AttentionAtLevel : public ::testing::TestWithParam<cpu::isa_level> {};

TEST_P(AttentionAtLevel, MatchesReferenceOverRaggedPagedBatches) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  auto b = test::make_backend_at(GetParam());
  const attention_case cases[] = {
      {4, 4, 64, 16, dtype::f32}, {8, 2, 128, 16, dtype::bf16}, {8, 1, 8, 32, dtype::f16},
      {6, 3, 20, 5, dtype::f32},  {16, 2, 64, 7, dtype::bf16},  {32, 8, 64, 16, dtype::f16},
  };
  for (const attention_case& c : cases) {
    SCOPED_TRACE("q_heads=" + std::to_string(c.q_heads) + " kv_heads=" + std::to_string(c.kv_heads) +
                 " head_dim=" + std::to_string(c.head_dim) + " block=" + std::to_string(c.block_size) + " " +
                 std::string(dtype_name(c.type)));
    const std::int64_t blocks = blocks_needed(ragged_shapes, c.block_size) + 5;
    const filled_cache cache = test::make_filled_cache(*b, spec_for(c, blocks), rng);
    const auto step = test::build_step(ragged_shapes, c.block_size, test::shuffled_blocks(blocks, rng));
    const std::vector<float> q =
        rng.floats(step.batch.token_ids.size() * static_cast<std::size_t>(c.q_heads * c.head_dim), -2.0f, 2.0f);
    const std::vector<float> got = run_attention(*b, cache, step.batch, c, q, 1);
    // With vdpbf16ps a bf16 cache's scores take q rounded to bf16, as that
    // level's GEMMs take their activations; the sums are still f32.
    std::vector<float> q_seen = q;
    if (GetParam() == cpu::isa_level::avx512_bf16 && c.type == dtype::bf16)
      for (float& x : q_seen) x = test::round_to_bf16(x);
    const std::vector<double> want = reference_attention(cache, step.batch, q_seen, c, 1);
    EXPECT_LE(test::max_scaled_error(got, want, test::max_abs(want)), 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, AttentionAtLevel, ::testing::ValuesIn(test::supported_levels()),
                         [](const auto& info) { return std::string(cpu::isa_name(info.param)); });

// A sequence's output must not depend, by a single bit, on its neighbours in
// the batch, on which physical blocks hold its tokens, or on the thread count.
TEST(Attention, OutputIsInvariantToBatchAndBlockPlacement) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  auto b = test::make_backend_at(cpu::detected_isa(), {.threads = 2});
  auto other_threads = test::make_backend_at(cpu::detected_isa(), {.threads = 3});
  for (dtype type : {dtype::f32, dtype::bf16}) {
    const attention_case c{8, 2, 64, 16, type};
    for (const sequence_shape target : {sequence_shape{600, 1}, sequence_shape{40, 25}, sequence_shape{0, 9}}) {
      const std::vector<sequence_shape> others = {{100, 1}, {3, 30}, {900, 1}};
      const std::int64_t target_blocks = blocks_needed({target}, c.block_size);
      const std::int64_t blocks = target_blocks + blocks_needed(others, c.block_size) + target_blocks;
      const filled_cache cache = test::make_filled_cache(*b, spec_for(c, blocks), rng);
      std::vector<std::int32_t> first_blocks(static_cast<std::size_t>(target_blocks));
      for (std::size_t i = 0; i < first_blocks.size(); ++i) first_blocks[i] = static_cast<std::int32_t>(i);
      const auto alone = test::build_step({target}, c.block_size, first_blocks);
      const std::vector<float> q_target =
          rng.floats(alone.batch.token_ids.size() * static_cast<std::size_t>(c.q_heads * c.head_dim), -2.0f, 2.0f);
      const std::vector<float> out_alone = run_attention(*b, cache, alone.batch, c, q_target, 0);

      // Copy the target's blocks to scattered ids and put it third in a larger batch.
      std::vector<std::int32_t> rest = test::shuffled_blocks(blocks, rng);
      std::erase_if(rest, [&](std::int32_t id) { return id < target_blocks; });
      std::vector<std::int32_t> moved(rest.end() - target_blocks, rest.end());
      std::vector<block_copy> copies;
      for (std::size_t i = 0; i < moved.size(); ++i)
        copies.push_back({block_location::device, first_blocks[i], block_location::device, moved[i]});
      b->copy_blocks(*cache.cache, nullptr, copies);
      std::vector<std::int32_t> order(rest.begin(), rest.end() - target_blocks);
      const std::int64_t before = blocks_needed({others[0], others[1]}, c.block_size);
      order.insert(order.begin() + before, moved.begin(), moved.end());
      const auto mixed = test::build_step({others[0], others[1], target, others[2]}, c.block_size, order);
      std::vector<float> q_mixed =
          rng.floats(mixed.batch.token_ids.size() * static_cast<std::size_t>(c.q_heads * c.head_dim));
      const std::size_t width = static_cast<std::size_t>(c.q_heads * c.head_dim);
      const std::size_t offset = static_cast<std::size_t>(mixed.batch.query_start[2]) * width;
      std::copy(q_target.begin(), q_target.end(), q_mixed.begin() + static_cast<std::ptrdiff_t>(offset));
      for (backend* runner : {b.get(), other_threads.get()}) {
        const std::vector<float> out_mixed = run_attention(*runner, cache, mixed.batch, c, q_mixed, 0);
        ASSERT_EQ(std::memcmp(out_mixed.data() + offset, out_alone.data(), out_alone.size() * sizeof(float)), 0);
      }
    }
  }
}

}  // namespace
}  // namespace troupe

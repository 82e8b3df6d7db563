// Bitwise batch invariance of attention (both backend modes) and of the
// row-wise ops: a query's output is the same bits whether its sequence runs
// as one prefill chunk, in chunks of 1/3/7/16 (decode rows included, with
// contexts past the 256-token chunking), or batched with other sequences
// whose blocks are interleaved with its own, on any thread count.

#include <gtest/gtest.h>

#include <cstring>

#include "tests/kernels/paged_scenario.hpp"

namespace troupe {
namespace {

using test::attention_case;
using test::blocks_needed;
using test::filled_cache;
using test::padded_matrix;
using test::random_source;
using test::run_attention;
using test::sequence_shape;
using test::spec_for;

std::unique_ptr<backend> backend_at(cpu::isa_level level, int threads, bool invariant) {
  cpu::cpu_backend_options options;
  options.threads = threads;
  options.max_isa = level;
  options.batch_invariant = invariant;
  return cpu::make_cpu_backend(options);
}

bool same_bits(const float* a, const float* b, std::size_t count) {
  return std::memcmp(a, b, count * sizeof(float)) == 0;
}

constexpr int target_length = 600;

/// The target sequence's outputs for the `chunk.fresh` tokens after
/// `chunk.cached` ones when it runs them as one chunk, with the pages given.
std::vector<float> run_target_chunk(backend& b, const filled_cache& cache, const attention_case& c,
                                    const std::vector<std::int32_t>& pages, const std::vector<float>& q_all,
                                    const sequence_shape& chunk) {
  const auto [first, count] = chunk;
  const auto step = test::build_step({chunk}, c.block_size, pages);
  const std::size_t width = static_cast<std::size_t>(c.q_heads * c.head_dim);
  const std::vector<float> q(q_all.begin() + static_cast<std::ptrdiff_t>(first * width),
                             q_all.begin() + static_cast<std::ptrdiff_t>((first + count) * width));
  return run_attention(b, cache, step.batch, c, q, 1);
}

class AttentionInvarianceAtLevel : public ::testing::TestWithParam<cpu::isa_level> {};

TEST_P(AttentionInvarianceAtLevel, QueryOutputIsTheSameBitsHoweverChunkedOrBatched) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const attention_case cases[] = {{8, 2, 64, 16, dtype::f32}, {4, 4, 32, 16, dtype::bf16}, {6, 3, 20, 5, dtype::f16}};
  const std::vector<sequence_shape> others = {{100, 1}, {3, 30}, {900, 1}, {40, 25}};
  for (bool invariant : {false, true}) {
    auto b = backend_at(GetParam(), 2, invariant);
    auto three_threads = backend_at(GetParam(), 3, invariant);
    for (const attention_case& c : cases) {
      SCOPED_TRACE("block=" + std::to_string(c.block_size) + " " + std::string(dtype_name(c.type)) +
                   (invariant ? " invariant" : " default"));
      const std::int64_t target_blocks = blocks_needed({{0, target_length}}, c.block_size);
      const std::int64_t blocks = 2 * target_blocks + blocks_needed(others, c.block_size);
      const filled_cache cache = test::make_filled_cache(*b, spec_for(c, blocks), rng);
      std::vector<std::int32_t> pages(static_cast<std::size_t>(target_blocks));
      for (std::size_t i = 0; i < pages.size(); ++i) pages[i] = static_cast<std::int32_t>(i);
      const std::size_t width = static_cast<std::size_t>(c.q_heads * c.head_dim);
      const std::vector<float> q_all = rng.floats(target_length * width, -2.0f, 2.0f);
      const std::vector<float> whole =
          run_target_chunk(*b, cache, c, pages, q_all, {.cached = 0, .fresh = target_length});

      for (int chunk : {1, 3, 7, 16}) {
        for (int first = 0; first < target_length; first += chunk) {
          const int count = std::min(chunk, target_length - first);
          const std::vector<float> out =
              run_target_chunk(*b, cache, c, pages, q_all, {.cached = first, .fresh = count});
          ASSERT_TRUE(same_bits(out.data(), whole.data() + first * width, out.size()))
              << "chunk " << chunk << " at position " << first;
        }
      }

      // The target's blocks copied to scattered ids, third in a batch of five.
      std::vector<std::int32_t> rest = test::shuffled_blocks(blocks, rng);
      std::erase_if(rest, [&](std::int32_t id) { return id < target_blocks; });
      const std::vector<std::int32_t> moved(rest.end() - target_blocks, rest.end());
      std::vector<block_copy> copies;
      for (std::size_t i = 0; i < moved.size(); ++i)
        copies.push_back({block_location::device, pages[i], block_location::device, moved[i]});
      b->copy_blocks(*cache.cache, nullptr, copies);
      for (const sequence_shape target : {sequence_shape{0, target_length}, sequence_shape{250, 7},
                                          sequence_shape{target_length - 1, 1}, sequence_shape{300, 16}}) {
        std::vector<std::int32_t> order(rest.begin(), rest.end() - target_blocks);
        const auto before = static_cast<std::ptrdiff_t>(blocks_needed({others[0], others[1]}, c.block_size));
        order.insert(order.begin() + before, moved.begin(), moved.begin() + blocks_needed({target}, c.block_size));
        const auto mixed = test::build_step({others[0], others[1], target, others[2], others[3]}, c.block_size, order);
        std::vector<float> q = rng.floats(mixed.batch.token_ids.size() * width);
        const std::size_t offset = static_cast<std::size_t>(mixed.batch.query_start[2]) * width;
        std::copy(q_all.begin() + static_cast<std::ptrdiff_t>(target.cached * width),
                  q_all.begin() + static_cast<std::ptrdiff_t>((target.cached + target.fresh) * width),
                  q.begin() + static_cast<std::ptrdiff_t>(offset));
        for (backend* runner : {b.get(), three_threads.get()}) {
          const std::vector<float> out = run_attention(*runner, cache, mixed.batch, c, q, 1);
          ASSERT_TRUE(same_bits(out.data() + offset, whole.data() + target.cached * width, target.fresh * width))
              << "batched, cached " << target.cached << " fresh " << target.fresh;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, AttentionInvarianceAtLevel, ::testing::ValuesIn(test::supported_levels()),
                         [](const auto& info) { return std::string(cpu::isa_name(info.param)); });

// Norms and SiLU-mul compute each row on its own: a row's output is the same
// bits alone and at any place in a batch of 300.
TEST(RowOpsInvariance, EveryRowIsTheSameBitsAloneAndInABatch) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  auto b = backend_at(cpu::detected_isa(), 3, true);
  const std::int64_t cols = 320, rows = 300, at = 137;
  const std::vector<float> probe = rng.floats(2 * cols), weight = rng.floats(cols, 0.5f, 1.5f);
  padded_matrix norm_weight(*b, 1, cols, 0);
  norm_weight.fill(weight);
  auto run_all = [&](std::int64_t m, std::int64_t row) {
    padded_matrix x(*b, m, 2 * cols), residual(*b, m, cols), out(*b, m, cols), silu(*b, m, cols);
    std::vector<float> values = rng.floats(static_cast<std::size_t>(m * 2 * cols));
    std::copy(probe.begin(), probe.end(), values.begin() + row * 2 * cols);
    x.fill(values);
    for (std::int64_t r = 0; r < m; ++r)  // the residual row is its x row's first half
      std::copy(&x.at(r, 0), &x.at(r, 0) + cols, &residual.at(r, 0));
    const tensor_view first_half{x.data(), dtype::f32, m, cols, x.view().row_stride};
    std::vector<float> result;
    b->rms_norm(first_half, norm_weight.view(), 1e-5f, out.view());
    result.insert(result.end(), &out.at(row, 0), &out.at(row, 0) + cols);
    b->add_rms_norm(residual.view(), first_half, norm_weight.view(), 1e-6f, out.view());
    result.insert(result.end(), &out.at(row, 0), &out.at(row, 0) + cols);
    result.insert(result.end(), &residual.at(row, 0), &residual.at(row, 0) + cols);
    b->silu_mul(x.view(), silu.view());
    result.insert(result.end(), &silu.at(row, 0), &silu.at(row, 0) + cols);
    b->head_rms_norm(x.view(), 32, tensor_view{norm_weight.data(), dtype::f32, 1, 32, 32}, 1e-6f);
    result.insert(result.end(), &x.at(row, 0), &x.at(row, 0) + 2 * cols);
    return result;
  };
  const std::vector<float> alone = run_all(1, 0);
  const std::vector<float> batched = run_all(rows, at);
  EXPECT_TRUE(same_bits(alone.data(), batched.data(), alone.size()));
}

}  // namespace
}  // namespace troupe

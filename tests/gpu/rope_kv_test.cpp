// RoPE fused with the paged KV write: rotated q and k against a double
// reference for every scaling kind (frequencies from the shared
// rope_inverse_frequencies), k and v landing at their slots in the layer's
// K and V tiles, and every other byte of the pool left as it was.

// Built only with the CUDA backend (TROUPE_HAVE_CUDA comes with troupe_kernels).
#if defined(TROUPE_HAVE_CUDA)

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "kernels/dtype.hpp"
#include "kernels/rope_spec.hpp"
#include "tests/gpu/gpu_test_support.hpp"

namespace troupe::gpu_test {
namespace {

using RopeKv = cuda_fixture;

struct rope_case {
  int head_dim;
  int rotary_dim;
  int q_heads;
  int kv_heads;
  int block_size;
  dtype cache_type;
  rope_scaling_kind scaling;
};

// Rotates one head (HF rotate_half over the first rotary_dim dims) in double,
// with the angle rounded to float as the kernel forms it.
void rotate(std::vector<double>& x, const std::vector<float>& inv_freq, std::int32_t position, int rotary_dim) {
  const int half = rotary_dim / 2;
  for (int i = 0; i < half; ++i) {
    const double angle = static_cast<float>(position) * inv_freq[static_cast<std::size_t>(i)];
    const double x1 = x[static_cast<std::size_t>(i)], x2 = x[static_cast<std::size_t>(i + half)];
    x[static_cast<std::size_t>(i)] = x1 * std::cos(angle) - x2 * std::sin(angle);
    x[static_cast<std::size_t>(i + half)] = x2 * std::cos(angle) + x1 * std::sin(angle);
  }
}

TEST_F(RopeKv, RotatesAndWritesEverySlotForEveryScaling) {
  auto rng = fresh_rng();
  const std::vector<rope_case> cases = {
      {128, 128, 32, 8, 16, dtype::bf16, rope_scaling_kind::none},
      {64, 64, 16, 2, 32, dtype::f16, rope_scaling_kind::linear},
      {128, 128, 8, 8, 16, dtype::bf16, rope_scaling_kind::dynamic},
      {128, 128, 32, 8, 32, dtype::bf16, rope_scaling_kind::llama3},
      {128, 64, 4, 2, 16, dtype::bf16, rope_scaling_kind::none},  // partial rotary
  };
  for (const rope_case& c : cases) {
    SCOPED_TRACE("head_dim " + std::to_string(c.head_dim) + " scaling " + std::to_string(static_cast<int>(c.scaling)));
    attention_geometry g{c.q_heads, c.kv_heads, c.head_dim, 1.0f, {}};
    g.rope.head_dim = c.rotary_dim;
    g.rope.theta = 500000.0;
    g.rope.scaling = c.scaling;
    g.rope.factor = 4.0;
    g.rope.max_position_embeddings = 2048;
    g.rope.original_max_position = 8192;
    const kv_cache_spec spec{3, c.kv_heads, c.head_dim, c.block_size, 24, c.cache_type};
    const int layer = 1;
    // A long prefill chunk past max_position_embeddings (the dynamic base
    // grows), a decode at a large position, and a short prompt. Pages wholly
    // before the fresh tokens are never touched here, so they all name one
    // block; pages holding fresh tokens get distinct shuffled blocks.
    const std::vector<std::pair<int, int>> shapes = {{3000, 40}, {20000, 1}, {0, 9}};
    std::vector<std::int32_t> blocks(static_cast<std::size_t>(spec.num_blocks));
    for (std::size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<std::int32_t>(i);
    std::shuffle(blocks.begin(), blocks.end(), rng);
    const std::int32_t prefix_block = blocks.back();
    step_batch b;
    b.query_start.push_back(0);
    b.kv_indptr.push_back(0);
    std::size_t next = 0;
    for (const auto& [cached, fresh] : shapes) {
      const int length = cached + fresh;
      const int pages = (length + c.block_size - 1) / c.block_size;
      for (int p = 0; p < pages; ++p) b.kv_indices.push_back(p < cached / c.block_size ? prefix_block : blocks[next++]);
      for (int p = cached; p < length; ++p) {
        b.token_ids.push_back(0);
        b.positions.push_back(p);
        const std::int32_t page = b.kv_indices[static_cast<std::size_t>(b.kv_indptr.back() + p / c.block_size)];
        b.slot_mapping.push_back(std::int64_t{page} * c.block_size + p % c.block_size);
      }
      b.query_start.push_back(static_cast<std::int32_t>(b.token_ids.size()));
      b.seq_lens.push_back(length);
      b.kv_indptr.push_back(static_cast<std::int32_t>(b.kv_indices.size()));
      b.kv_last_page_len.push_back(length - (pages - 1) * c.block_size);
    }
    ASSERT_LT(next, blocks.size());

    const std::int64_t tokens = b.num_tokens();
    const std::int64_t q_cols = std::int64_t{c.q_heads} * c.head_dim, kv_cols = std::int64_t{c.kv_heads} * c.head_dim;
    const auto qkv_bits =
        random_half_bits(rng, static_cast<std::size_t>(tokens * (q_cols + 2 * kv_cols)), 1.0f, dtype::bf16);
    const device_matrix qkv =
        upload_matrix(gpu(), {.type = dtype::bf16, .rows = tokens, .cols = q_cols + 2 * kv_cols}, qkv_bits.data());
    const tensor_view q = qkv.view.col_slice(0, q_cols), k = qkv.view.col_slice(q_cols, kv_cols),
                      v = qkv.view.col_slice(q_cols + kv_cols, kv_cols);
    auto cache = gpu().create_kv_cache(spec);
    auto host = gpu().create_host_pool(spec, spec.num_blocks);
    std::vector<block_copy> fill;
    for (std::int64_t i = 0; i < spec.num_blocks; ++i) {
      std::memset(host->block_data(i), 0xFF, spec.block_bytes());
      fill.push_back(
          {block_location::host, static_cast<std::int32_t>(i), block_location::device, static_cast<std::int32_t>(i)});
    }
    gpu().copy_blocks(*cache, host.get(), fill);
    const auto plan = gpu().plan_step(b, spec, g);
    gpu().rope_and_write_kv(*plan, q, k, v, *cache, layer);
    const auto got_qkv = download_floats(gpu(), qkv.view);
    std::vector<block_copy> back;
    for (std::int64_t i = 0; i < spec.num_blocks; ++i)
      back.push_back(
          {block_location::device, static_cast<std::int32_t>(i), block_location::host, static_cast<std::int32_t>(i)});
    gpu().copy_blocks(*cache, host.get(), back);
    gpu().synchronize();

    std::vector<double> want_q, want_k;
    std::vector<float> got_q, got_k, got_cache_k, got_cache_v;
    std::vector<double> want_v;
    std::set<std::pair<std::int64_t, std::int64_t>> written;  // (block, element offset) touched
    for (std::int64_t s = 0; s + 1 < static_cast<std::int64_t>(b.query_start.size()); ++s) {
      const std::vector<float> inv_freq = rope_inverse_frequencies(g.rope, b.seq_lens[static_cast<std::size_t>(s)]);
      for (std::int32_t t = b.query_start[s]; t < b.query_start[s + 1]; ++t) {
        const std::int64_t row = t * (q_cols + 2 * kv_cols);
        const std::int64_t slot = b.slot_mapping[static_cast<std::size_t>(t)];
        for (int h = 0; h < c.q_heads + c.kv_heads; ++h) {
          std::vector<double> x(static_cast<std::size_t>(c.head_dim));
          for (int d = 0; d < c.head_dim; ++d) x[d] = bf16_to_float(qkv_bits[row + std::int64_t{h} * c.head_dim + d]);
          rotate(x, inv_freq, b.positions[static_cast<std::size_t>(t)], c.rotary_dim);
          for (int d = 0; d < c.head_dim; ++d) {
            const float got = got_qkv[row + std::int64_t{h} * c.head_dim + d];
            (h < c.q_heads ? want_q : want_k).push_back(x[d]);
            (h < c.q_heads ? got_q : got_k).push_back(got);
            if (h >= c.q_heads) {
              const int kv_head = h - c.q_heads;
              const std::int64_t offset = spec.layer_offset(layer) +
                                          (std::int64_t{kv_head} * c.block_size + slot % c.block_size) * c.head_dim + d;
              const auto* block = static_cast<const std::uint16_t*>(host->block_data(slot / c.block_size));
              got_cache_k.push_back(half_bits_to_float(block[offset], c.cache_type));
              got_cache_v.push_back(half_bits_to_float(block[offset + spec.tile_elements()], c.cache_type));
              want_v.push_back(
                  bf16_to_float(qkv_bits[row + q_cols + kv_cols + std::int64_t{kv_head} * c.head_dim + d]));
              written.insert({slot / c.block_size, offset});
              written.insert({slot / c.block_size, offset + spec.tile_elements()});
            }
          }
        }
      }
    }
    EXPECT_TRUE(all_close(got_q, want_q, bf16_rtol)) << "q";
    EXPECT_TRUE(all_close(got_k, want_k, bf16_rtol)) << "k";
    EXPECT_TRUE(all_close(got_cache_k, want_k, bf16_rtol)) << "cached k";
    EXPECT_TRUE(all_close(got_cache_v, want_v, bf16_rtol)) << "cached v";
    std::size_t touched = 0;
    for (std::int64_t block = 0; block < spec.num_blocks; ++block) {
      const auto* data = static_cast<const std::uint16_t*>(host->block_data(block));
      for (std::int64_t e = 0; e < spec.block_elements(); ++e) {
        if (data[e] != 0xFFFF) {
          ++touched;
          ASSERT_TRUE(written.count({block, e})) << "block " << block << " element " << e << " was written";
        }
      }
    }
    EXPECT_EQ(touched, written.size());
  }
}

}  // namespace
}  // namespace troupe::gpu_test

#endif  // TROUPE_HAVE_CUDA

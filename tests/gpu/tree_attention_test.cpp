// Tree attention on the CUDA backend (step_batch::tree_parent): every
// token of a draft tree, beside a prefill chunk and a decode, attends to
// its sequence's cache up to the root and then to its path's keys only,
// against a double-precision reference that walks the path itself.
// Unused cache slots and the output start as NaN.

// Built only with the CUDA backend (TROUPE_HAVE_CUDA comes with troupe_kernels).
#if defined(TROUPE_HAVE_CUDA)

#include <algorithm>
#include <cmath>
#include <random>

#include "kernels/dtype.hpp"
#include "tests/gpu/gpu_test_support.hpp"

namespace troupe::gpu_test {
namespace {

constexpr int layer = 1;
constexpr int q_heads = 8, kv_heads = 2, head_dim = 64, block_size = 16;

struct tree_scenario {
  kv_cache_spec spec;
  attention_geometry geometry;
  step_batch batch;
  std::vector<std::uint16_t> pool;
  std::vector<std::vector<int>> keys;  // per step token: the cache positions it sees, in order
};

// Sequences: a prefill chunk (20 cached, 9 new), the tree (`cached` before
// its root, nodes with `parents`), a decode at 40.
tree_scenario build(int cached, const std::vector<std::int32_t>& parents, std::mt19937_64& rng) {
  tree_scenario s;
  const int tree_length = cached + static_cast<int>(parents.size()) + 1;
  const std::vector<std::pair<int, int>> shapes = {{20, 9}, {cached, tree_length - cached}, {40, 1}};
  std::int64_t pages = 0;
  for (const auto& [c, f] : shapes) pages += (c + f + block_size - 1) / block_size;
  s.spec = kv_cache_spec{2, kv_heads, head_dim, block_size, pages + 3, dtype::bf16};
  s.geometry = attention_geometry{q_heads, kv_heads, head_dim, 1.0f / std::sqrt(float(head_dim)), {}};
  s.pool.assign(static_cast<std::size_t>(s.spec.num_blocks * s.spec.block_elements()), 0xFFFF);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  for (auto& bits : s.pool) bits = float_to_half_bits(normal(rng), dtype::bf16);
  std::vector<std::int32_t> blocks(static_cast<std::size_t>(s.spec.num_blocks));
  for (std::size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<std::int32_t>(i);
  std::shuffle(blocks.begin(), blocks.end(), rng);
  step_batch& b = s.batch;
  b.query_start.push_back(0);
  b.kv_indptr.push_back(0);
  std::size_t next = 0;
  for (std::size_t q = 0; q < shapes.size(); ++q) {
    const auto [c, fresh] = shapes[q];
    const int length = c + fresh, n_pages = (length + block_size - 1) / block_size;
    for (int p = 0; p < n_pages; ++p) b.kv_indices.push_back(blocks[next++]);
    const std::int32_t* table = b.kv_indices.data() + b.kv_indptr.back();
    const auto first = static_cast<std::int32_t>(b.token_ids.size());
    std::vector<int> depth(static_cast<std::size_t>(fresh), 0);
    for (int i = 0; i < fresh; ++i) {
      const bool tree_node = q == 1 && i > 0;
      const int parent = tree_node ? parents[static_cast<std::size_t>(i) - 1] : -1;
      if (tree_node) depth[static_cast<std::size_t>(i)] = depth[static_cast<std::size_t>(parent)] + 1;
      b.token_ids.push_back(0);
      b.positions.push_back(q == 1 ? c + depth[static_cast<std::size_t>(i)] : c + i);
      b.slot_mapping.push_back(std::int64_t{table[(c + i) / block_size]} * block_size + (c + i) % block_size);
      b.tree_parent.push_back(tree_node ? first + parent : -1);
      std::vector<int> seen;
      if (!tree_node) {
        for (int x = 0; x <= b.positions.back(); ++x) seen.push_back(x);
      } else {
        std::vector<int> path;
        for (int node = i; node > 0; node = parents[static_cast<std::size_t>(node) - 1]) path.push_back(c + node);
        for (int x = 0; x <= c; ++x) seen.push_back(x);
        seen.insert(seen.end(), path.rbegin(), path.rend());
      }
      s.keys.push_back(std::move(seen));
    }
    b.query_start.push_back(static_cast<std::int32_t>(b.token_ids.size()));
    b.seq_lens.push_back(length);
    b.kv_indptr.push_back(static_cast<std::int32_t>(b.kv_indices.size()));
    b.kv_last_page_len.push_back(length - (n_pages - 1) * block_size);
    b.logits_indices.push_back(static_cast<std::int32_t>(b.token_ids.size()) - 1);
  }
  return s;
}

std::vector<double> reference_row(const tree_scenario& s, int seq, int token, const std::vector<double>& q,
                                  int kv_head) {
  const std::int32_t* table = s.batch.kv_indices.data() + s.batch.kv_indptr[static_cast<std::size_t>(seq)];
  const auto row = [&](int j, bool value) {
    return s.pool.data() + std::int64_t{table[j / block_size]} * s.spec.block_elements() + s.spec.layer_offset(layer) +
           (std::int64_t{kv_head} * block_size + j % block_size) * head_dim + (value ? s.spec.tile_elements() : 0);
  };
  const std::vector<int>& keys = s.keys[static_cast<std::size_t>(token)];
  std::vector<double> scores;
  double best = -INFINITY;
  for (int j : keys) {
    double dot = 0.0;
    for (int d = 0; d < head_dim; ++d)
      dot += q[static_cast<std::size_t>(d)] * half_bits_to_float(row(j, false)[d], dtype::bf16);
    scores.push_back(dot * s.geometry.scale);
    best = std::max(best, scores.back());
  }
  std::vector<double> out(head_dim, 0.0);
  double total = 0.0;
  for (std::size_t k = 0; k < keys.size(); ++k) {
    const double p = std::exp(scores[k] - best);
    total += p;
    for (int d = 0; d < head_dim; ++d)
      out[static_cast<std::size_t>(d)] += p * half_bits_to_float(row(keys[k], true)[d], dtype::bf16);
  }
  for (double& o : out) o /= total;
  return out;
}

class TreeAttention : public cuda_fixture {
 protected:
  void run_case(int cached, const std::vector<std::int32_t>& parents, std::mt19937_64& rng) {
    SCOPED_TRACE("cached " + std::to_string(cached));
    const tree_scenario s = build(cached, parents, rng);
    ASSERT_EQ(validate_step_batch(s.batch, s.spec), "");
    const auto cache = upload_kv_pool(gpu(), s.spec, s.pool);
    const std::int64_t tokens = s.batch.num_tokens(), q_cols = std::int64_t{q_heads} * head_dim;
    const auto q_bits = random_half_bits(rng, static_cast<std::size_t>(tokens * q_cols), 1.5f, dtype::bf16);
    const device_matrix q =
        upload_matrix(gpu(), {.type = dtype::bf16, .rows = tokens, .cols = q_cols, .stride = q_cols}, q_bits.data());
    const device_matrix out =
        poisoned_matrix(gpu(), {.type = dtype::bf16, .rows = tokens, .cols = q_cols, .stride = q_cols + 8});
    const auto plan = gpu().plan_step(s.batch, s.spec, s.geometry);
    gpu().attention(*plan, q.view, *cache, layer, out.view);
    const std::vector<float> got = download_floats(gpu(), out.view);
    std::vector<double> want;
    for (std::int32_t t = 0; t < tokens; ++t) {
      const auto seq = static_cast<int>(std::upper_bound(s.batch.query_start.begin(), s.batch.query_start.end(), t) -
                                        s.batch.query_start.begin()) -
                       1;
      for (int h = 0; h < q_heads; ++h) {
        std::vector<double> qv(head_dim);
        for (int d = 0; d < head_dim; ++d)
          qv[static_cast<std::size_t>(d)] = bf16_to_float(q_bits[t * q_cols + h * head_dim + d]);
        const std::vector<double> row = reference_row(s, seq, t, qv, h / (q_heads / kv_heads));
        want.insert(want.end(), row.begin(), row.end());
      }
    }
    EXPECT_TRUE(all_close(got, want, bf16_rtol));
  }
};

TEST_F(TreeAttention, EachTreeTokenSeesItsRootsContextAndItsPathOnly) {
  auto rng = fresh_rng();
  run_case(5, {0, 1, 2, 0, 4, 0}, rng);
  run_case(14, {0, 0, 1, 1, 2, 3, 3, 6}, rng);
  run_case(quick_mode() ? 300 : 700, {0, 1, 1, 0, 4, 5, 6, 2}, rng);
}

}  // namespace
}  // namespace troupe::gpu_test

#endif  // TROUPE_HAVE_CUDA

// Paged attention (prefill tiles, split-KV decode and its merge) against a
// double-precision reference on fresh random caches: ragged lengths up to
// 8k, shuffled interleaved block tables, GQA groups 1 to 80, head dims 64,
// 128 and the generic path (96, 256), bf16 and f16 caches, block sizes 16
// and 32, and forced split counts. Unused cache slots and the output start
// as NaN, so a read past a sequence or a row left unwritten shows.

// Built only with the CUDA backend (TROUPE_HAVE_CUDA comes with troupe_kernels).
#if defined(TROUPE_HAVE_CUDA)

#include <algorithm>
#include <cmath>
#include <random>

#include "kernels/dtype.hpp"
#include "tests/gpu/gpu_test_support.hpp"

namespace troupe::gpu_test {
namespace {

constexpr int attention_layer = 1;  // of two, so the layer offset matters

struct attention_case {
  int q_heads;
  int kv_heads;
  int head_dim;
  int block_size;
  dtype cache_type;
  std::vector<std::pair<int, int>> shapes;  // (cached tokens, new tokens) per sequence
};

// A step over a randomly filled pool whose blocks are dealt to the
// sequences in a shuffled order.
struct scenario {
  attention_case shape;
  kv_cache_spec spec;
  attention_geometry geometry;
  step_batch batch;
  std::vector<std::uint16_t> pool;  // host image of the whole pool
};

scenario build(const attention_case& c, std::mt19937_64& rng) {
  scenario s{c, {}, {}, {}, {}};
  std::int64_t pages_needed = 0;
  for (const auto& [cached, fresh] : c.shapes) pages_needed += (cached + fresh + c.block_size - 1) / c.block_size;
  s.spec = kv_cache_spec{2, c.kv_heads, c.head_dim, c.block_size, pages_needed + 5, c.cache_type};
  s.geometry = attention_geometry{c.q_heads, c.kv_heads, c.head_dim, 1.0f / std::sqrt(float(c.head_dim)), {}};
  std::vector<std::int32_t> blocks(static_cast<std::size_t>(s.spec.num_blocks));
  for (std::size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<std::int32_t>(i);
  std::shuffle(blocks.begin(), blocks.end(), rng);
  s.pool.assign(static_cast<std::size_t>(s.spec.num_blocks * s.spec.block_elements()), 0xFFFF);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  step_batch& b = s.batch;
  b.query_start.push_back(0);
  b.kv_indptr.push_back(0);
  std::size_t next = 0;
  for (const auto& [cached, fresh] : c.shapes) {
    const int length = cached + fresh;
    const int pages = (length + c.block_size - 1) / c.block_size;
    for (int p = 0; p < pages; ++p) b.kv_indices.push_back(blocks[next++]);
    const std::int32_t* table = b.kv_indices.data() + b.kv_indptr.back();
    for (int j = 0; j < length; ++j) {
      const std::int64_t block = table[j / c.block_size];
      for (int layer = 0; layer < 2; ++layer) {
        for (int h = 0; h < c.kv_heads; ++h) {
          const std::int64_t base = block * s.spec.block_elements() + s.spec.layer_offset(layer) +
                                    (std::int64_t{h} * c.block_size + j % c.block_size) * c.head_dim;
          for (int d = 0; d < c.head_dim; ++d) {
            s.pool[static_cast<std::size_t>(base + d)] = float_to_half_bits(normal(rng), c.cache_type);
            s.pool[static_cast<std::size_t>(base + s.spec.tile_elements() + d)] =
                float_to_half_bits(normal(rng), c.cache_type);
          }
        }
      }
    }
    for (int p = cached; p < length; ++p) {
      b.token_ids.push_back(0);
      b.positions.push_back(p);
      b.slot_mapping.push_back(std::int64_t{table[p / c.block_size]} * c.block_size + p % c.block_size);
    }
    b.query_start.push_back(static_cast<std::int32_t>(b.token_ids.size()));
    b.seq_lens.push_back(length);
    b.kv_indptr.push_back(static_cast<std::int32_t>(b.kv_indices.size()));
    b.kv_last_page_len.push_back(length - (pages - 1) * c.block_size);
    b.logits_indices.push_back(static_cast<std::int32_t>(b.token_ids.size()) - 1);
  }
  return s;
}

// Softmax((q · k_j) * scale over keys j <= position) · v, in double.
std::vector<double> reference_row(const scenario& s, int seq, const std::vector<double>& q, int position, int kv_head) {
  const attention_case& c = s.shape;
  const std::int32_t* table = s.batch.kv_indices.data() + s.batch.kv_indptr[static_cast<std::size_t>(seq)];
  const auto row = [&](int j, bool value) {
    const std::int64_t base =
        std::int64_t{table[j / c.block_size]} * s.spec.block_elements() + s.spec.layer_offset(attention_layer) +
        (std::int64_t{kv_head} * c.block_size + j % c.block_size) * c.head_dim + (value ? s.spec.tile_elements() : 0);
    return s.pool.data() + base;
  };
  std::vector<double> scores(static_cast<std::size_t>(position) + 1);
  double best = -INFINITY;
  for (int j = 0; j <= position; ++j) {
    const std::uint16_t* k = row(j, false);
    double dot = 0.0;
    for (int d = 0; d < c.head_dim; ++d) dot += q[static_cast<std::size_t>(d)] * half_bits_to_float(k[d], c.cache_type);
    scores[static_cast<std::size_t>(j)] = dot * s.geometry.scale;
    best = std::max(best, scores[static_cast<std::size_t>(j)]);
  }
  std::vector<double> out(static_cast<std::size_t>(c.head_dim), 0.0);
  double total = 0.0;
  for (int j = 0; j <= position; ++j) {
    const double p = std::exp(scores[static_cast<std::size_t>(j)] - best);
    total += p;
    const std::uint16_t* v = row(j, true);
    for (int d = 0; d < c.head_dim; ++d) out[static_cast<std::size_t>(d)] += p * half_bits_to_float(v[d], c.cache_type);
  }
  for (double& o : out) o /= total;
  return out;
}

// Tokens whose rows the reference recomputes: every decode, and up to 16
// rows of each chunk (its first and last, the rest random).
std::vector<std::int32_t> checked_tokens(const step_batch& b, std::mt19937_64& rng) {
  std::vector<std::int32_t> tokens;
  for (std::size_t s = 0; s + 1 < b.query_start.size(); ++s) {
    const std::int32_t first = b.query_start[s], end = b.query_start[s + 1];
    if (end - first <= 16) {
      for (std::int32_t t = first; t < end; ++t) tokens.push_back(t);
      continue;
    }
    tokens.push_back(first);
    tokens.push_back(end - 1);
    std::uniform_int_distribution<std::int32_t> pick(first + 1, end - 2);
    for (int i = 0; i < 14; ++i) tokens.push_back(pick(rng));
  }
  return tokens;
}

class PagedAttention : public cuda_fixture, public ::testing::WithParamInterface<int> {
 protected:
  cuda::cuda_backend_options backend_options() const override {
    cuda::cuda_backend_options options;
    options.decode_splits = GetParam();
    return options;
  }

  void run_case(const attention_case& c, std::mt19937_64& rng) {
    SCOPED_TRACE("heads " + std::to_string(c.q_heads) + "/" + std::to_string(c.kv_heads) + " head_dim " +
                 std::to_string(c.head_dim) + " block " + std::to_string(c.block_size) + " " +
                 std::string(dtype_name(c.cache_type)));
    const scenario s = build(c, rng);
    const auto cache = upload_kv_pool(gpu(), s.spec, s.pool);

    const std::int64_t tokens = s.batch.num_tokens();
    const std::int64_t q_cols = std::int64_t{c.q_heads} * c.head_dim;
    const auto q_bits = random_half_bits(rng, static_cast<std::size_t>(tokens * q_cols), 1.5f, dtype::bf16);
    // q and out are strided like slices of the fused qkv and a wider buffer.
    const device_matrix q = upload_matrix(
        gpu(), {.type = dtype::bf16, .rows = tokens, .cols = q_cols, .stride = q_cols + 2 * c.kv_heads * c.head_dim},
        q_bits.data());
    const device_matrix out =
        poisoned_matrix(gpu(), {.type = dtype::bf16, .rows = tokens, .cols = q_cols, .stride = q_cols + 8});
    const auto plan = gpu().plan_step(s.batch, s.spec, s.geometry);
    gpu().attention(*plan, q.view, *cache, attention_layer, out.view);
    const std::vector<float> got = download_floats(gpu(), out.view);
    for (std::size_t i = 0; i < got.size(); ++i)
      ASSERT_FALSE(std::isnan(got[i])) << "output element " << i << " not written";

    std::vector<float> got_checked;
    std::vector<double> want;
    const int group = c.q_heads / c.kv_heads;
    for (std::int32_t t : checked_tokens(s.batch, rng)) {
      const auto seq = static_cast<int>(std::upper_bound(s.batch.query_start.begin(), s.batch.query_start.end(), t) -
                                        s.batch.query_start.begin()) -
                       1;
      for (int h = 0; h < c.q_heads; ++h) {
        std::vector<double> qv(static_cast<std::size_t>(c.head_dim));
        for (int d = 0; d < c.head_dim; ++d)
          qv[d] = bf16_to_float(q_bits[t * q_cols + std::int64_t{h} * c.head_dim + d]);
        const std::vector<double> row =
            reference_row(s, seq, qv, s.batch.positions[static_cast<std::size_t>(t)], h / group);
        want.insert(want.end(), row.begin(), row.end());
        for (int d = 0; d < c.head_dim; ++d) got_checked.push_back(got[t * q_cols + std::int64_t{h} * c.head_dim + d]);
      }
    }
    EXPECT_TRUE(all_close(got_checked, want, bf16_rtol));
  }
};

// Decode (1 new token) at random context lengths in [1, max_context], plus
// the edges around one block.
std::vector<std::pair<int, int>> decodes(std::mt19937_64& rng, int count, int max_context, int block_size) {
  std::vector<std::pair<int, int>> shapes = {{0, 1}, {block_size - 1, 1}, {block_size, 1}};
  std::uniform_int_distribution<int> length(1, max_context);
  for (int i = 0; i < count; ++i) shapes.push_back({length(rng) - 1, 1});
  return shapes;
}

TEST_P(PagedAttention, MatchesReferenceOverGeometriesAndRaggedBatches) {
  auto rng = fresh_rng();
  const int long_context = quick_mode() ? 1024 : 8192;
  std::uniform_int_distribution<int> prefix(1, long_context / 2);
  const auto with = [](std::vector<std::pair<int, int>> a, const std::vector<std::pair<int, int>>& b) {
    a.insert(a.end(), b.begin(), b.end());
    std::shuffle(a.begin(), a.end(), std::mt19937(static_cast<unsigned>(a.size())));
    return a;
  };
  // Long contexts go to geometries with few KV heads, to keep the pool image small.
  const std::vector<attention_case> cases = {
      {32, 8, 128, 16, dtype::bf16,
       with(decodes(rng, 3, long_context / 2, 16), {{0, 37}, {prefix(rng), 64}, {prefix(rng), 129}})},
      {32, 4, 128, 32, dtype::bf16, with(decodes(rng, 2, long_context, 32), {{prefix(rng), 1}})},
      {8, 8, 64, 32, dtype::bf16, with(decodes(rng, 4, long_context / 2, 32), {{0, 300}, {31, 2}})},
      {64, 8, 128, 32, dtype::f16, with(decodes(rng, 2, long_context / 4, 32), {{prefix(rng) / 4, 70}})},
      {16, 2, 64, 16, dtype::f16, with(decodes(rng, 1, long_context, 16), {{long_context - 200, 200}})},
      {14, 2, 96, 16, dtype::bf16, with(decodes(rng, 3, long_context / 2, 16), {{0, 45}, {100, 19}})},
      {8, 1, 256, 16, dtype::bf16, with(decodes(rng, 2, long_context / 2, 16), {{prefix(rng) / 2, 33}})},
      {80, 1, 64, 16, dtype::bf16, with(decodes(rng, 2, 600, 16), {{10, 5}})},
  };
  for (const attention_case& c : cases) run_case(c, rng);
}

// 0 plans splits from the lengths; the others force them, so the merge runs
// with 1 (none), a few, and many partial states.
INSTANTIATE_TEST_SUITE_P(DecodeSplits, PagedAttention, ::testing::Values(0, 1, 3, 8));

}  // namespace
}  // namespace troupe::gpu_test

#endif  // TROUPE_HAVE_CUDA

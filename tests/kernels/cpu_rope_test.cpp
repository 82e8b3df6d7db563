// rope_and_write_kv against HF's rotate_half written out directly, and the
// K/V slots it writes (read back through copy_blocks).

#include <gtest/gtest.h>

#include "tests/kernels/paged_scenario.hpp"

namespace troupe {
namespace {

using test::padded_matrix;
using test::random_source;

struct rope_case {
  int q_heads, kv_heads, head_dim, rotary_dim, block_size;
  dtype type;
  rope_scaling_kind scaling;
};

/// The heads of one token's q or k: `heads` of `head_dim` from element `base`,
/// the first `rotary_dim` dimensions of each rotated.
struct head_span {
  std::size_t base = 0;
  int heads = 1;
  int head_dim = 1;
  int rotary_dim = 0;
};

// transformers: angle = float(position) * inv_freq (f32), cos/sin of it;
// x_out = x * cos + rotate_half(x) * sin over the first rotary_dim dims.
void reference_rope(std::vector<double>& row, const std::vector<float>& x, const head_span& span,
                    const std::vector<float>& inv_freq, int position) {
  const auto& [base, heads, head_dim, rotary_dim] = span;
  const int half = rotary_dim / 2;
  for (int h = 0; h < heads; ++h) {
    const std::size_t head = base + static_cast<std::size_t>(h * head_dim);
    for (int d = 0; d < head_dim; ++d) row[head + d] = x[head + d];
    for (int i = 0; i < half; ++i) {
      const float angle = static_cast<float>(position) * inv_freq[static_cast<std::size_t>(i)];
      const double c = static_cast<float>(std::cos(static_cast<double>(angle)));
      const double s = static_cast<float>(std::sin(static_cast<double>(angle)));
      const double x1 = x[head + i], x2 = x[head + i + half];
      row[head + i] = x1 * c - x2 * s;
      row[head + i + half] = x2 * c + x1 * s;
    }
  }
}

// Inputs of one case: q, k, v as column slices of one fused qkv buffer, the
// way the model passes them.
struct rope_inputs {
  std::int64_t tokens, qw, kw;
  std::vector<float> q, k, v;
  std::int64_t width() const { return qw + 2 * kw; }
};

rope_inputs random_inputs(const rope_case& c, std::int64_t tokens, random_source& rng) {
  rope_inputs in{tokens, std::int64_t{c.q_heads} * c.head_dim, std::int64_t{c.kv_heads} * c.head_dim, {}, {}, {}};
  in.q = rng.floats(static_cast<std::size_t>(tokens * in.qw), -3.0f, 3.0f);
  in.k = rng.floats(static_cast<std::size_t>(tokens * in.kw), -3.0f, 3.0f);
  in.v = rng.floats(static_cast<std::size_t>(tokens * in.kw), -3.0f, 3.0f);
  return in;
}

std::vector<float> fused_rows(const rope_inputs& in) {
  std::vector<float> fused(static_cast<std::size_t>(in.tokens * in.width()));
  for (std::int64_t t = 0; t < in.tokens; ++t) {
    std::copy_n(in.q.begin() + t * in.qw, in.qw, fused.begin() + t * in.width());
    std::copy_n(in.k.begin() + t * in.kw, in.kw, fused.begin() + t * in.width() + in.qw);
    std::copy_n(in.v.begin() + t * in.kw, in.kw, fused.begin() + t * in.width() + in.qw + in.kw);
  }
  return fused;
}

// Expected rotated q and k of every token.
void expected_rotation(const rope_case& c, const rope_spec& frequencies, const step_batch& batch, const rope_inputs& in,
                       std::vector<double>& q_want, std::vector<double>& k_want) {
  q_want.assign(in.q.size(), 0.0);
  k_want.assign(in.k.size(), 0.0);
  for (std::size_t s = 0; s + 1 < batch.query_start.size(); ++s) {
    const auto inv_freq = rope_inverse_frequencies(frequencies, batch.seq_lens[s]);
    for (std::int32_t t = batch.query_start[s]; t < batch.query_start[s + 1]; ++t) {
      const int position = batch.positions[static_cast<std::size_t>(t)];
      reference_rope(q_want, in.q,
                     {.base = static_cast<std::size_t>(t * in.qw),
                      .heads = c.q_heads,
                      .head_dim = c.head_dim,
                      .rotary_dim = c.rotary_dim},
                     inv_freq, position);
      reference_rope(k_want, in.k,
                     {.base = static_cast<std::size_t>(t * in.kw),
                      .heads = c.kv_heads,
                      .head_dim = c.head_dim,
                      .rotary_dim = c.rotary_dim},
                     inv_freq, position);
    }
  }
}

void check_rope_case(backend& b, const rope_case& c, random_source& rng) {
  const std::vector<test::sequence_shape> shapes = {{0, 5}, {13, 1}, {30, 9}, {2100, 1}};
  kv_cache_spec spec{.num_layers = 3,
                     .num_kv_heads = c.kv_heads,
                     .head_dim = c.head_dim,
                     .block_size = c.block_size,
                     .num_blocks = 3,
                     .type = c.type};
  for (const auto& s : shapes) spec.num_blocks += (s.cached + s.fresh + c.block_size - 1) / c.block_size;
  const test::filled_cache cache = test::make_filled_cache(b, spec, rng);
  const auto step = test::build_step(shapes, c.block_size, test::shuffled_blocks(spec.num_blocks, rng));
  attention_geometry geo{c.q_heads, c.kv_heads, c.head_dim, 0.125f, {}};
  geo.rope = {.head_dim = c.rotary_dim, .theta = 10000.0, .scaling = c.scaling, .factor = 2.0};
  geo.rope.max_position_embeddings = 64;  // so the dynamic case rescales the long sequence only
  auto plan = b.plan_step(step.batch, spec, geo);
  const rope_inputs in = random_inputs(c, step.batch.num_tokens(), rng);
  padded_matrix qkv(b, in.tokens, in.width(), 1);
  qkv.fill(fused_rows(in));
  const tensor_view all = qkv.view();
  b.rope_and_write_kv(*plan, all.col_slice(0, in.qw), all.col_slice(in.qw, in.kw), all.col_slice(in.qw + in.kw, in.kw),
                      *cache.cache, 1);
  auto readback = b.create_host_pool(spec, spec.num_blocks);
  std::vector<block_copy> copies;
  for (std::int32_t i = 0; i < spec.num_blocks; ++i)
    copies.push_back({block_location::device, i, block_location::host, i});
  b.copy_blocks(*cache.cache, readback.get(), copies);
  const test::filled_cache after{nullptr, std::move(readback), spec};
  std::vector<double> q_want, k_want;
  expected_rotation(c, geo.rope, step.batch, in, q_want, k_want);
  const auto got = qkv.values();
  const double cached_tolerance = (c.type == dtype::f32 ? 1e-5 : 1e-2) * 3;  // |values| <= 3 * sqrt(2)
  for (std::int64_t t = 0; t < in.tokens; ++t) {
    const auto row = static_cast<std::size_t>(t * in.width());
    for (std::int64_t i = 0; i < in.qw; ++i) ASSERT_NEAR(got[row + i], q_want[t * in.qw + i], 3e-5) << "q " << t;
    for (std::int64_t i = 0; i < in.kw; ++i) {
      ASSERT_NEAR(got[row + in.qw + i], k_want[t * in.kw + i], 3e-5) << "k " << t;
      ASSERT_EQ(got[row + in.qw + in.kw + i], in.v[t * in.kw + i]) << "v is not rotated";
    }
    const std::int64_t block = step.batch.slot_mapping[t] / c.block_size;
    const int offset = static_cast<int>(step.batch.slot_mapping[t] % c.block_size);
    for (int h = 0; h < c.kv_heads; ++h) {
      for (int d = 0; d < c.head_dim; ++d) {
        const auto at = static_cast<std::size_t>(t * in.kw + h * c.head_dim + d);
        ASSERT_NEAR(after.kv({.is_value = false, .block = block, .layer = 1, .head = h, .offset = offset, .dim = d}),
                    k_want[at], cached_tolerance)
            << "cached k " << t;
        ASSERT_EQ(after.kv({.is_value = true, .block = block, .layer = 1, .head = h, .offset = offset, .dim = d}),
                  test::store_as({in.v[at]}, c.type).exact[0]);
        // Other layers' tiles at the slot are untouched.
        ASSERT_EQ(after.kv({.is_value = false, .block = block, .layer = 0, .head = h, .offset = offset, .dim = d}),
                  cache.kv({.is_value = false, .block = block, .layer = 0, .head = h, .offset = offset, .dim = d}));
      }
    }
  }
}

class RopeAtLevel : public ::testing::TestWithParam<cpu::isa_level> {};

TEST_P(RopeAtLevel, RotatesLikeTransformersAndWritesTheSlots) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  auto b = test::make_backend_at(GetParam());
  const rope_case cases[] = {
      {4, 2, 16, 16, 16, dtype::f32, rope_scaling_kind::none},
      {8, 8, 64, 64, 5, dtype::bf16, rope_scaling_kind::linear},
      {4, 1, 128, 128, 32, dtype::f16, rope_scaling_kind::dynamic},
      {6, 2, 24, 12, 16, dtype::f32, rope_scaling_kind::dynamic},  // partial rotary
  };
  for (const rope_case& c : cases) {
    SCOPED_TRACE("head_dim=" + std::to_string(c.head_dim) + " rotary=" + std::to_string(c.rotary_dim));
    check_rope_case(*b, c, rng);
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, RopeAtLevel, ::testing::ValuesIn(test::supported_levels()),
                         [](const auto& info) { return std::string(cpu::isa_name(info.param)); });

}  // namespace
}  // namespace troupe

// linear(): the skinny GEMM at every dispatch level and the oneDNN path,
// for f32/bf16/f16 weights, biases and stacked parts, against a double
// precision reference on the exact stored weight values. bf16 weights stay
// row-major here (bf16_panels off); cpu_panel_gemm_test.cpp covers panels.

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "tests/kernels/cpu_test_support.hpp"

namespace troupe {
namespace {

using test::padded_matrix;
using test::random_source;

struct weight_parts {
  std::vector<test::stored_values> stored;  // per part
  std::vector<std::vector<float>> biases;   // per part (empty: no bias)
  std::vector<host_tensor> tensors, bias_tensors;
};

weight_parts make_parts(random_source& rng, dtype type, std::int64_t k, const std::vector<std::int64_t>& outs,
                        bool with_bias) {
  weight_parts p;
  for (std::size_t i = 0; i < outs.size(); ++i) {
    p.stored.push_back(test::store_as(rng.floats(static_cast<std::size_t>(outs[i] * k)), type));
    if (with_bias) p.biases.push_back(rng.floats(static_cast<std::size_t>(outs[i])));
  }
  for (std::size_t i = 0; i < outs.size(); ++i) {
    p.tensors.push_back({"part" + std::to_string(i), type, {outs[i], k}, p.stored[i].bytes.data()});
    if (with_bias) p.bias_tensors.push_back({"bias" + std::to_string(i), dtype::f32, {outs[i]}, p.biases[i].data()});
  }
  return p;
}

// out[m][n] = Σ_k x[m][k] w[n][k] + b[n] in double; `bound` is Σ|x w| + |b|,
// the scale a float dot product's rounding error is proportional to.
void reference_linear(const std::vector<float>& x, std::int64_t m, std::int64_t k, const weight_parts& p,
                      bool round_x_to_bf16, std::vector<double>& out, std::vector<double>& bound) {
  std::vector<const float*> rows;
  std::vector<float> bias;
  for (std::size_t i = 0; i < p.stored.size(); ++i) {
    const std::int64_t part_rows = p.tensors[i].shape[0];
    for (std::int64_t r = 0; r < part_rows; ++r) {
      rows.push_back(p.stored[i].exact.data() + r * k);
      bias.push_back(p.biases.empty() ? 0.0f : p.biases[i][static_cast<std::size_t>(r)]);
    }
  }
  const auto n = static_cast<std::int64_t>(rows.size());
  out.assign(static_cast<std::size_t>(m * n), 0.0);
  bound.assign(out.size(), 0.0);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = bias[static_cast<std::size_t>(j)], magnitude = std::abs(sum);
      for (std::int64_t kk = 0; kk < k; ++kk) {
        float xv = x[static_cast<std::size_t>(i * k + kk)];
        if (round_x_to_bf16) xv = test::round_to_bf16(xv);
        const double term = static_cast<double>(xv) * rows[static_cast<std::size_t>(j)][kk];
        sum += term;
        magnitude += std::abs(term);
      }
      out[static_cast<std::size_t>(i * n + j)] = sum;
      bound[static_cast<std::size_t>(i * n + j)] = magnitude;
    }
  }
}

// At AVX-512 BF16, bf16 weights multiply bf16-rounded activations on both paths.
bool rounds_activations(cpu::isa_level level, dtype type) {
  return type == dtype::bf16 && level == cpu::isa_level::avx512_bf16;
}

/// One linear() check: `m` rows of `k` inputs times the parts stacked from
/// `outs` (output features per part), in weights of `type`.
struct linear_case {
  dtype type = dtype::f32;
  std::int64_t m = 1;
  std::int64_t k = 1;
  std::vector<std::int64_t> outs = {};
  bool with_bias = false;
};

void check_linear(backend& b, cpu::isa_level level, random_source& rng, const linear_case& c) {
  const auto& [type, m, k, outs, with_bias] = c;
  const weight_parts parts = make_parts(rng, type, k, outs, with_bias);
  auto weight = b.prepare_linear(parts.tensors, parts.bias_tensors);
  const std::int64_t n = std::accumulate(outs.begin(), outs.end(), std::int64_t{0});
  ASSERT_EQ(weight->out_features(), n);
  ASSERT_EQ(weight->in_features(), k);
  const std::vector<float> x_values = rng.floats(static_cast<std::size_t>(m * k));
  padded_matrix x(b, m, k, 5), out(b, m, n, 3);
  x.fill(x_values);
  out.poison_view();
  b.linear(x.view(), *weight, out.view());
  std::vector<double> want, bound;
  reference_linear(x_values, m, k, parts, rounds_activations(level, type), want, bound);
  const std::vector<float> got = out.values();
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::abs(got[i] - want[i]), 1e-5 * bound[i] + 1e-30)
        << "m=" << m << " n=" << n << " k=" << k << " type=" << dtype_name(type) << " at " << i << " got " << got[i]
        << " want " << want[i];
  }
  ASSERT_TRUE(out.padding_intact());
  if (rounds_activations(level, type)) {  // and the rounding stays within bf16 accuracy of the exact product
    reference_linear(x_values, m, k, parts, false, want, bound);
    for (std::size_t i = 0; i < got.size(); ++i) ASSERT_LE(std::abs(got[i] - want[i]), 1e-2 * bound[i] + 1e-30);
  }
}

class LinearAtLevel : public ::testing::TestWithParam<cpu::isa_level> {};

TEST_P(LinearAtLevel, SkinnyGemmMatchesReferenceForEveryRowCount) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  auto b = test::make_backend_at(GetParam(), {.gemv_max_rows = 1000, .bf16_panels = false});
  for (dtype type : {dtype::f32, dtype::bf16, dtype::f16}) {
    for (std::int64_t m = 1; m <= 300; m += (m < 40 ? 1 : 37))
      check_linear(*b, GetParam(), rng, {.type = type, .m = m, .k = 45, .outs = {37}, .with_bias = true});
    for (std::int64_t k : {1, 7, 16, 31, 32, 33, 64, 100, 257})
      check_linear(*b, GetParam(), rng, {.type = type, .m = 3, .k = k, .outs = {9}, .with_bias = false});
    check_linear(*b, GetParam(), rng, {.type = type, .m = 1, .k = 2048, .outs = {300}, .with_bias = false});
    check_linear(*b, GetParam(), rng, {.type = type, .m = 5, .k = 1024, .outs = {130}, .with_bias = true});
  }
}

TEST_P(LinearAtLevel, OneDnnPathMatchesReference) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  auto b = test::make_backend_at(GetParam(), {.gemv_max_rows = 0, .bf16_panels = false});
  for (dtype type : {dtype::f32, dtype::bf16, dtype::f16}) {
    for (std::int64_t m : {1, 2, 9, 64, 300})
      check_linear(*b, GetParam(), rng, {.type = type, .m = m, .k = 45, .outs = {37}, .with_bias = true});
    check_linear(*b, GetParam(), rng, {.type = type, .m = 70, .k = 256, .outs = {200}, .with_bias = false});
  }
}

TEST_P(LinearAtLevel, StackedPartsWithBiasesMatchTheConcatenatedMatrix) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  for (int gemv_rows : {1000, 0}) {
    auto b = test::make_backend_at(GetParam(), {.gemv_max_rows = gemv_rows, .bf16_panels = false});
    for (dtype type : {dtype::f32, dtype::bf16, dtype::f16}) {
      check_linear(*b, GetParam(), rng,
                   {.type = type, .m = 4, .k = 64, .outs = {64, 16, 16}, .with_bias = true});  // fused q, k, v
      check_linear(*b, GetParam(), rng,
                   {.type = type, .m = 33, .k = 40, .outs = {50, 50}, .with_bias = false});  // fused gate, up
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, LinearAtLevel, ::testing::ValuesIn(test::supported_levels()),
                         [](const auto& info) { return std::string(cpu::isa_name(info.param)); });

TEST(Linear, EveryRowCountFromOneTo300OnBothPaths) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const cpu::isa_level best = cpu::detected_isa();
  auto skinny = test::make_backend_at(best, {.gemv_max_rows = 1000, .bf16_panels = false});
  auto onednn = test::make_backend_at(best, {.gemv_max_rows = 0, .bf16_panels = false});
  for (std::int64_t m = 1; m <= 300; ++m) {
    const dtype type = m % 3 == 0 ? dtype::f32 : m % 3 == 1 ? dtype::bf16 : dtype::f16;
    check_linear(*skinny, best, rng, {.type = type, .m = m, .k = 24, .outs = {19}, .with_bias = m % 2 == 0});
    check_linear(*onednn, best, rng, {.type = type, .m = m, .k = 24, .outs = {19}, .with_bias = m % 2 == 1});
  }
}

TEST(Linear, MappedWeightsAreUsedInPlaceEvenWhenUnaligned) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  cpu::cpu_backend_options options;
  options.threads = 2;
  options.weights = cpu::weight_placement::mapped;
  options.gemv_max_rows = 4;
  auto b = cpu::make_cpu_backend(options);
  const std::int64_t n = 21, k = 35;
  const test::stored_values w = test::store_as(rng.floats(static_cast<std::size_t>(n * k)), dtype::bf16);
  std::vector<std::uint8_t> shifted(w.bytes.size() + 2);
  std::copy(w.bytes.begin(), w.bytes.end(), shifted.begin() + 2);  // 2-byte aligned only, like a safetensors offset
  const host_tensor tensor{"w", dtype::bf16, {n, k}, shifted.data() + 2};
  auto weight = b->prepare_linear(std::span(&tensor, 1), {});
  for (std::int64_t m : {1, 7}) {
    const std::vector<float> x_values = rng.floats(static_cast<std::size_t>(m * k));
    padded_matrix x(*b, m, k), out(*b, m, n);
    x.fill(x_values);
    out.poison_view();
    b->linear(x.view(), *weight, out.view());
    const bool rounded = rounds_activations(cpu::detected_isa(), dtype::bf16);
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        double want = 0, bound = 0;
        for (std::int64_t kk = 0; kk < k; ++kk) {
          float xv = x_values[static_cast<std::size_t>(i * k + kk)];
          if (rounded) xv = test::round_to_bf16(xv);
          want += static_cast<double>(xv) * w.exact[static_cast<std::size_t>(j * k + kk)];
          bound += std::abs(static_cast<double>(xv) * w.exact[static_cast<std::size_t>(j * k + kk)]);
        }
        ASSERT_NEAR(out.at(i, j), want, 1e-5 * bound);
      }
    }
  }
  shifted.assign(shifted.size(), 0);  // in place: the weight now reads zeros
  padded_matrix x(*b, 1, k), out(*b, 1, n);
  x.fill(rng.floats(static_cast<std::size_t>(k)));
  b->linear(x.view(), *weight, out.view());
  for (std::int64_t j = 0; j < n; ++j) EXPECT_EQ(out.at(0, j), 0.0f);
}

TEST(Linear, RejectsMismatchedShapes) {
  auto b = test::make_backend_at(cpu::detected_isa());
  std::vector<float> w(6, 1.0f);
  const host_tensor tensor{"model.layers.0.mlp.up_proj.weight", dtype::f32, {2, 3}, w.data()};
  auto weight = b->prepare_linear(std::span(&tensor, 1), {});
  padded_matrix x(*b, 1, 4), out(*b, 1, 2);
  EXPECT_THROW(b->linear(x.view(), *weight, out.view()), std::invalid_argument);
  const host_tensor wrong{"model.layers.0.mlp.down_proj.weight", dtype::f32, {2, 5}, w.data()};
  const host_tensor parts[] = {tensor, wrong};
  try {
    b->prepare_linear(parts, {});
    FAIL() << "mismatched in_features must be rejected";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("down_proj"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace troupe

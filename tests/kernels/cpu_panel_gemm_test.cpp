// bf16 weights in output panels: the packing puts every element where the
// layout says and zeroes the padding; linear() on a packed weight gives,
// for every row count, tile position, panel tail, K block and thread
// count, exactly the bits of the documented order (one f32 fma per input
// from zero, then + bias; with bf16 arithmetic, vdpbf16ps's order on x
// rounded to bf16), which also makes it batch-invariant; levels without the
// panel GEMM keep row-major bf16 and still match a double reference.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernels/cpu/bf16_panels.hpp"
#include "kernels/cpu/cpu_features.hpp"
#include "tests/kernels/cpu_test_support.hpp"

namespace troupe {
namespace {

using test::padded_matrix;
using test::random_source;

TEST(Bf16Panels, PackingPlacesEveryElementAndZeroesThePadding) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  for (std::int64_t rows : {1, 37, 64}) {
    for (std::int64_t cols : {1, 2, 5, 64, 65}) {
      std::vector<std::uint16_t> values(static_cast<std::size_t>(rows * cols));
      for (auto& v : values) v = static_cast<std::uint16_t>(rng.integer(1, 0xffff));
      std::vector<const std::uint16_t*> row_pointers;
      for (std::int64_t r = 0; r < rows; ++r) row_pointers.push_back(values.data() + r * cols);
      const std::size_t bytes = cpu::bf16_panel_bytes(rows, cols);
      ASSERT_EQ(bytes, static_cast<std::size_t>(cpu::bf16_panel_rows * ((cols + 1) / 2) * 2 * 2));
      std::vector<std::uint16_t> panel(bytes / 2, 0xdead);
      cpu::pack_bf16_panel(row_pointers, cols, panel.data());
      std::size_t nonzero = 0;
      for (std::uint16_t v : panel) nonzero += v != 0 ? 1 : 0;
      ASSERT_EQ(nonzero, values.size()) << "rows " << rows << " cols " << cols << ": padding must be zero";
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
          ASSERT_EQ(cpu::bf16_panel_element(panel.data(), cols, r, c), values[static_cast<std::size_t>(r * cols + c)])
              << "row " << r << " col " << c;
    }
  }
}

/// bf16 parts stacked into one weight, with their biases.
struct bf16_weight {
  std::int64_t k = 0;
  std::vector<test::stored_values> parts;
  std::vector<std::vector<float>> biases;
  std::vector<host_tensor> tensors, bias_tensors;
  std::vector<const float*> rows;  // exact values of each stacked row
  std::vector<float> bias;         // stacked biases (zeros when none)

  bf16_weight(random_source& rng, std::int64_t in, const std::vector<std::int64_t>& outs, bool with_bias) : k(in) {
    for (std::int64_t out : outs) {
      parts.push_back(test::store_as(rng.floats(static_cast<std::size_t>(out * k)), dtype::bf16));
      biases.push_back(with_bias ? rng.floats(static_cast<std::size_t>(out)) : std::vector<float>{});
    }
    for (std::size_t i = 0; i < outs.size(); ++i) {
      tensors.push_back({"part" + std::to_string(i), dtype::bf16, {outs[i], k}, parts[i].bytes.data()});
      if (with_bias) bias_tensors.push_back({"bias" + std::to_string(i), dtype::f32, {outs[i]}, biases[i].data()});
      for (std::int64_t r = 0; r < outs[i]; ++r) {
        rows.push_back(parts[i].exact.data() + r * k);
        bias.push_back(with_bias ? biases[i][static_cast<std::size_t>(r)] : 0.0f);
      }
    }
  }
  std::int64_t n() const { return static_cast<std::int64_t>(rows.size()); }
};

/// The panel GEMM's documented arithmetic for one output, in scalar code.
/// With bf16 arithmetic (`bf16_dot`): x rounded to bf16, and per input pair
/// the odd product, then the even one, each one fma, as the SDM states
/// vdpbf16ps (a lone last input meets a zero pair half). Without: one fma
/// per input in order.
float documented_order(const float* x, const float* w, std::int64_t k, float bias, bool bf16_dot) {
  float acc = 0.0f;
  if (!bf16_dot) {
    for (std::int64_t c = 0; c < k; ++c) acc = std::fma(x[c], w[c], acc);
    return acc + bias;
  }
  for (std::int64_t c = 0; c < k; c += 2) {
    const bool odd = c + 1 < k;
    acc = std::fma(odd ? test::round_to_bf16(x[c + 1]) : 0.0f, odd ? w[c + 1] : 0.0f, acc);
    acc = std::fma(test::round_to_bf16(x[c]), w[c], acc);
  }
  return acc + bias;
}

/// `panels`: `b` runs the panel GEMM; `bf16_dot`: at a level with bf16 arithmetic.
void check_against_order(backend& b, bool panels, bool bf16_dot, random_source& rng, std::int64_t m, std::int64_t k,
                         const std::vector<std::int64_t>& outs, bool with_bias) {
  const bf16_weight w(rng, k, outs, with_bias);
  auto weight = b.prepare_linear(w.tensors, w.bias_tensors);
  const std::vector<float> x_values = rng.floats(static_cast<std::size_t>(m * k));
  padded_matrix x(b, m, k, 5), out(b, m, w.n(), 3);
  x.fill(x_values);
  out.poison_view();
  b.linear(x.view(), *weight, out.view());
  ASSERT_TRUE(out.padding_intact());
  for (std::int64_t i = 0; i < m; ++i) {
    const float* row = x_values.data() + i * k;
    for (std::int64_t j = 0; j < w.n(); ++j) {
      const float got = out.at(i, j), bias = w.bias[static_cast<std::size_t>(j)];
      if (panels) {
        const float want = documented_order(row, w.rows[static_cast<std::size_t>(j)], k, bias, bf16_dot);
        ASSERT_EQ(std::memcmp(&got, &want, sizeof(float)), 0) << "m=" << m << " k=" << k << " n=" << w.n() << " at ("
                                                              << i << ", " << j << "): got " << got << " want " << want;
      } else {
        double want = bias, bound = std::abs(bias);
        for (std::int64_t c = 0; c < k; ++c) {
          const double term = static_cast<double>(row[c]) * w.rows[static_cast<std::size_t>(j)][c];
          want += term;
          bound += std::abs(term);
        }
        ASSERT_LE(std::abs(got - want), 1e-2 * bound + 1e-30) << "m=" << m << " k=" << k << " at (" << i << ", " << j;
      }
    }
  }
}

class PanelGemmAtLevel : public ::testing::TestWithParam<cpu::isa_level> {};

// Row counts through every tile height and several tiles; panel tails (N
// not a multiple of 64, stacked parts that split panels); odd K (a lone
// last input) and K past one block of 2,048 inputs (partial sums parked in
// the output and resumed); 1 and 2 threads (tasks split panels and rows).
TEST_P(PanelGemmAtLevel, EveryOutputHasTheBitsOfTheDocumentedOrder) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const cpu::isa_level level = GetParam();
  const bool panels = cpu::bf16_panels_at(level), bf16_dot = cpu::kernels_for(level).bf16_dot;
  for (int threads : {1, 2}) {
    auto b = test::make_backend_at(level, {.threads = threads});
    for (std::int64_t m = 1; m <= 40; ++m) check_against_order(*b, panels, bf16_dot, rng, m, 45, {37}, m % 2 == 0);
    for (std::int64_t m : {64, 131}) check_against_order(*b, panels, bf16_dot, rng, m, 33, {130}, true);
    for (std::int64_t k : {1, 2, 3, 31, 32, 33, 100}) check_against_order(*b, panels, bf16_dot, rng, 7, k, {65}, true);
    for (std::int64_t n : {1, 15, 16, 17, 63, 64, 65})
      check_against_order(*b, panels, bf16_dot, rng, 6, 20, {n}, false);
    check_against_order(*b, panels, bf16_dot, rng, 5, 24, {40, 70, 9}, true);  // fused parts across panel edges
    check_against_order(*b, panels, bf16_dot, rng, 9, 4101, {70}, true);       // three K blocks, the last one odd
  }
}

// The batch-invariant option changes nothing for panels: they are invariant
// as they stand (row-major levels: cpu_linear_invariance_test.cpp).
TEST_P(PanelGemmAtLevel, BatchInvariantModeGivesTheSameBits) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const cpu::isa_level level = GetParam();
  cpu::cpu_backend_options options;
  options.threads = 2;
  options.max_isa = level;
  options.batch_invariant = true;
  auto b = cpu::make_cpu_backend(options);
  check_against_order(*b, cpu::bf16_panels_at(level), cpu::kernels_for(level).bf16_dot, rng, 300, 2100, {100, 30},
                      true);
}

INSTANTIATE_TEST_SUITE_P(Cpu, PanelGemmAtLevel, ::testing::ValuesIn(test::supported_levels()),
                         [](const auto& info) { return std::string(cpu::isa_name(info.param)); });

// Mapped placement and a disabled option keep bf16 row-major (the panel
// GEMM needs a packed copy); both still compute the right values.
TEST(PanelGemm, MappedOrDisabledWeightsStayRowMajor) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  for (bool mapped : {true, false}) {
    cpu::cpu_backend_options options;
    options.threads = 2;
    options.weights = mapped ? cpu::weight_placement::mapped : cpu::weight_placement::copy;
    options.bf16_panels = mapped;  // mapped with panels on, or copied with panels off
    auto b = cpu::make_cpu_backend(options);
    check_against_order(*b, false, false, rng, 9, 70, {66}, true);
  }
}

}  // namespace
}  // namespace troupe

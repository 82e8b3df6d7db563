// Weight-only int8/int4 on the CPU backend: the formats' round-to-nearest
// error bounds, activation quantisation, the quantised GEMV at every
// dispatch level against the scalar reference, and linear() end to end.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/isa_kernels.hpp"
#include "kernels/cpu/quantized_weights.hpp"
#include "tests/kernels/cpu_test_support.hpp"

namespace troupe {
namespace {

using cpu::quant_group;
using test::random_source;

constexpr weight_quantization all_formats[] = {weight_quantization::int8, weight_quantization::int4,
                                               weight_quantization::int4_asym};

struct quantized_buffer {
  cpu::quantized_layout layout;
  std::vector<std::uint8_t> bytes;
  cpu::quantized_matrix view() const { return cpu::view_of(layout, bytes.data()); }
};

quantized_buffer quantize(const std::vector<float>& w, weight_quantization format, std::int64_t rows,
                          std::int64_t cols) {
  quantized_buffer q;
  q.layout = cpu::layout_for(format, rows, cols);
  q.bytes.assign(q.layout.total_bytes, 0);
  cpu::quantize_rows(w.data(), dtype::f32, rows, q.layout, q.bytes.data(), 0);
  return q;
}

TEST(QuantizedFormat, NamesRoundTrip) {
  for (auto format : {weight_quantization::none, weight_quantization::int8, weight_quantization::int4,
                      weight_quantization::int4_asym})
    EXPECT_EQ(parse_quantization(quantization_name(format)), format);
  EXPECT_FALSE(parse_quantization("int3").has_value());
}

TEST(QuantizedFormat, InterleavingIsAPermutationOfEachSuperblock) {
  std::vector<int> seen(1024, 0);
  for (std::int64_t k = 0; k < 1024; ++k) ++seen[static_cast<std::size_t>(cpu::interleaved_position(k))];
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
  // Group g's first four features sit in lane g of the first 64-byte vector.
  EXPECT_EQ(cpu::interleaved_position(3 * quant_group), 12);
  EXPECT_EQ(cpu::interleaved_position(3 * quant_group + 4), 64 + 12);
  EXPECT_EQ(cpu::interleaved_position(512 + 1), 512 + 1);
}

// Round to nearest: each weight within half a step of its code, except the
// symmetric int4 format's one-sided level (+8 steps clamps to +7).
TEST(QuantizedFormat, RoundTripWithinHalfAStep) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  for (std::int64_t cols : {100, 512, 1000}) {
    const std::int64_t rows = 5;
    std::vector<float> w = rng.floats(static_cast<std::size_t>(rows * cols), -0.5f, 0.5f);
    w[7] = 3.0f;  // an outlier in row 0, group 0
    for (auto format : all_formats) {
      const quantized_buffer q = quantize(w, format, rows, cols);
      const cpu::quantized_matrix view = q.view();
      for (std::int64_t n = 0; n < rows; ++n) {
        for (std::int64_t k = 0; k < cols; ++k) {
          const float value = w[static_cast<std::size_t>(n * cols + k)];
          float step = 0.0f, slack = 0.0f;
          if (format == weight_quantization::int8) {
            step = view.row_scales[n];
          } else {
            const std::int64_t group = n * q.layout.groups + k / quant_group;
            step = std::fabs(f16_to_float(view.group_scales[group]));
            if (format == weight_quantization::int4_asym) slack = std::fabs(value) * 1e-3f;  // f16 offset
          }
          const bool one_sided = format == weight_quantization::int4 && std::fabs(value) > 7.0f * step;
          const float bound = (one_sided ? 1.0f : 0.5f) * step * 1.001f + slack + 1e-7f;
          ASSERT_LE(std::fabs(cpu::dequantized_weight(view, n, k) - value), bound)
              << quantization_name(format) << " row " << n << " col " << k << " of " << cols;
        }
      }
      EXPECT_NEAR(cpu::dequantized_weight(view, 0, 7), 3.0f, 3.0f * 2e-3f) << quantization_name(format);
    }
  }
}

TEST(QuantizedFormat, ActivationRowsMatchTheReferenceAtEveryLevel) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t cols = 700, padded = 1024;
  std::vector<float> x = rng.floats(static_cast<std::size_t>(cols), -4.0f, 4.0f);
  std::fill(x.begin() + 64, x.begin() + 96, 0.0f);  // an all-zero group
  const cpu::reference_rows want = cpu::quantize_rows_reference(x.data(), 1, cols, cols, padded);
  for (std::int64_t k = 0; k < cols; ++k) {
    const float scale = want.scales[static_cast<std::size_t>(k / quant_group)];
    const float value = scale * want.codes[static_cast<std::size_t>(cpu::interleaved_position(k))];
    ASSERT_LE(std::fabs(value - x[static_cast<std::size_t>(k)]), 0.5f * scale * 1.0001f) << k;
  }
  for (auto level : test::supported_levels()) {
    std::vector<std::int8_t> codes(padded, 99);
    std::vector<float> scales(padded / quant_group), sums(padded / quant_group);
    cpu::kernels_for(level).quantize_row(x.data(), cols, padded, codes.data(), scales.data(), sums.data());
    EXPECT_EQ(codes, want.codes) << cpu::isa_name(level);
    EXPECT_EQ(scales, want.scales) << cpu::isa_name(level);
    EXPECT_EQ(sums, want.sums) << cpu::isa_name(level);
  }
}

// Σ_k |w_k · x_k|: the scale of a dot product's rounding error.
double magnitude(const cpu::quantized_matrix& w, const cpu::reference_rows& x, std::int64_t m, std::int64_t n) {
  const std::int64_t groups = x.padded_cols / quant_group;
  double total = 0.0;
  for (std::int64_t k = 0; k < w.cols; ++k)
    total +=
        std::fabs(cpu::dequantized_weight(w, n, k) * x.scales[static_cast<std::size_t>(m * groups + k / quant_group)] *
                  x.codes[static_cast<std::size_t>(m * x.padded_cols + cpu::interleaved_position(k))]);
  return total;
}

TEST(QuantizedGemv, EveryLevelMatchesTheReference) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  for (std::int64_t cols : {64, 512, 1500}) {
    const std::int64_t rows = 19;
    const std::vector<float> w = rng.floats(static_cast<std::size_t>(rows * cols));
    for (std::int64_t m : {1, 3, 8, 11}) {
      const std::vector<float> x = rng.floats(static_cast<std::size_t>(m * cols), -2.0f, 2.0f);
      for (auto format : all_formats) {
        const quantized_buffer q = quantize(w, format, rows, cols);
        const cpu::quantized_matrix view = q.view();
        const cpu::reference_rows xq = cpu::quantize_rows_reference(x.data(), m, cols, cols, view.padded_cols);
        const cpu::quantized_rows rows_view = xq.view();
        const std::vector<float> bias = rng.floats(static_cast<std::size_t>(rows));
        for (auto level : test::supported_levels()) {
          std::vector<float> out(static_cast<std::size_t>(m * rows), std::nanf(""));
          cpu::qgemv_args args;
          args.weights = &view;
          args.x = &rows_view;
          args.bias = bias.data();
          args.m_rows = m;
          args.out = out.data();
          args.out_stride = rows;
          args.n_begin = 2;  // rows before n_begin stay untouched
          args.n_end = rows;
          cpu::kernels_for(level).qgemv(args);
          for (std::int64_t i = 0; i < m; ++i) {
            for (std::int64_t n = 0; n < rows; ++n) {
              const float got = out[static_cast<std::size_t>(i * rows + n)];
              if (n < 2) {
                ASSERT_TRUE(std::isnan(got));
                continue;
              }
              const double want = cpu::quantized_dot_reference(view, xq, i, n) + bias[static_cast<std::size_t>(n)];
              const double bound = 1e-5 * (magnitude(view, xq, i, n) + 1.0);
              ASSERT_NEAR(got, want, bound) << quantization_name(format) << " at " << cpu::isa_name(level) << " cols "
                                            << cols << " m " << m << " row " << i << " out " << n;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace troupe

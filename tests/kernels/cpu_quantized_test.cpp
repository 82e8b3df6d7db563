// Weight-only int8/int4/int5/int4_nl/int6 on the CPU backend: the formats' round-to-nearest
// error bounds, activation quantisation, the quantised GEMV at every
// dispatch level against the scalar reference, and linear() end to end.

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/isa_kernels.hpp"
#include "kernels/cpu/quantized_weights.hpp"
#include "tests/kernels/cpu_test_support.hpp"
#include "tests/kernels/quantized_test_support.hpp"

namespace troupe {
namespace {

using cpu::quant_group;
using test::magnitude;
using test::quantize;
using test::quantized_buffer;
using test::random_source;
using test::run_qgemv;

constexpr weight_quantization all_formats[] = {weight_quantization::int8,      weight_quantization::int4,
                                               weight_quantization::int4_asym, weight_quantization::int5_asym,
                                               weight_quantization::int4_nl,   weight_quantization::int6,
                                               weight_quantization::int4_g16};

TEST(QuantizedFormat, NamesRoundTrip) {
  const std::vector<std::string> choices = quantization_choices();
  ASSERT_EQ(choices.size(), std::size(all_formats) + 2);  // auto and none too
  EXPECT_EQ(choices.front(), "auto");
  EXPECT_EQ(parse_quantization(choices[1]), weight_quantization::none);
  for (auto format : all_formats) {
    EXPECT_EQ(parse_quantization(quantization_name(format)), format);
    EXPECT_NE(std::find(choices.begin(), choices.end(), quantization_name(format)), choices.end());
  }
  EXPECT_EQ(quantization_choices_text(), "auto, none, int8, int4, int4_asym, int5_asym, int4_nl, int6, int4_g16");
  EXPECT_EQ(quantization_code_bits(weight_quantization::int5_asym), 5);
  EXPECT_EQ(quantization_code_bits(weight_quantization::int6), 6);
  EXPECT_EQ(quantization_code_bits(weight_quantization::int4_nl), 4);
  EXPECT_EQ(quantization_code_bits(weight_quantization::int4_g16), 4);
  EXPECT_FALSE(parse_quantization("int3").has_value());
}

TEST(QuantizedFormat, LmHeadIsInt4BesideFourBitLayersOnlyWhenRefinedElseInt8UnlessChosen) {
  for (bool refined : {false, true}) {
    EXPECT_EQ(lm_head_quantization(weight_quantization::none, "auto", refined), weight_quantization::none);
    EXPECT_EQ(lm_head_quantization(weight_quantization::int8, "auto", refined), weight_quantization::int8);
    for (auto layers : {weight_quantization::int4, weight_quantization::int4_asym, weight_quantization::int5_asym,
                        weight_quantization::int4_nl, weight_quantization::int6, weight_quantization::int4_g16})
      EXPECT_EQ(lm_head_quantization(layers, "auto", refined),
                refined ? weight_quantization::int4 : weight_quantization::int8);
    EXPECT_EQ(lm_head_quantization(weight_quantization::int4, "int4", refined), weight_quantization::int4);
    EXPECT_EQ(lm_head_quantization(weight_quantization::int4, "none", refined), weight_quantization::none);
    EXPECT_EQ(lm_head_quantization(weight_quantization::none, "int8", refined), weight_quantization::int8);
    EXPECT_FALSE(lm_head_quantization(weight_quantization::int8, "int3", refined).has_value());
  }
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
// symmetric int4 format's one-sided level (+8 steps clamps to +7); int4_nl's
// the nearest of its group's 16 levels (its quantiser is held to that rule
// code by code in cpu_quantized_pack_test.cpp; here, through dequantized_weight).
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
          if (format == weight_quantization::int4_nl) {
            const float scale = f16_to_float(view.group_scales[n * q.layout.groups + k / quant_group]);
            float nearest = INFINITY;
            for (std::int8_t level : int4_nl_levels)
              nearest = std::min(nearest, std::fabs(value - scale * static_cast<float>(level)));
            ASSERT_LE(std::fabs(cpu::dequantized_weight(view, n, k) - value), nearest * 1.0001f + 1e-7f)
                << "int4_nl row " << n << " col " << k << " of " << cols;
            continue;
          }
          if (quantization_half_group_scales(format)) {
            // Its half group's scale (block-factored: of either sign); the
            // extreme on code 0 may be clipped where the scale byte was
            // taken toward zero, by the weight's excess over the steps on
            // the other side (31 for int6, 7 for int4_g16).
            step = std::fabs(cpu::half_group_scale(view, n * q.layout.groups + k / quant_group,
                                                   static_cast<int>(k % quant_group / 16)));
            const float clipped = std::fabs(value) - static_cast<float>(half_group_code_offset(format) - 1) * step;
            ASSERT_LE(std::fabs(cpu::dequantized_weight(view, n, k) - value),
                      std::max(0.5f * step, clipped) * 1.001f + 1e-7f)
                << quantization_name(format) << " row " << n << " col " << k << " of " << cols;
            continue;
          }
          if (format == weight_quantization::int8) {
            step = view.row_scales[n];
          } else {
            const std::int64_t group = n * q.layout.groups + k / quant_group;
            step = std::fabs(f16_to_float(view.group_scales[group]));
            if (format != weight_quantization::int4) slack = std::fabs(value) * 1e-3f;  // f16 offset
          }
          const bool one_sided = format == weight_quantization::int4 && std::fabs(value) > 7.0f * step;
          // The f16 scale may round below |extreme| / 8 (by up to 2^-11 of it), so
          // the far side of the one-sided level can sit that much past 8 steps.
          if (one_sided) slack = std::fabs(value) * 1e-3f;
          const float bound = (one_sided ? 1.0f : 0.5f) * step * 1.001f + slack + 1e-7f;
          ASSERT_LE(std::fabs(cpu::dequantized_weight(view, n, k) - value), bound)
              << quantization_name(format) << " row " << n << " col " << k << " of " << cols;
        }
      }
      // int4_nl's fitted scale trades the outlier's exactness for the
      // group's squared error (cpu_quantized_pack_test.cpp holds it to that);
      // int6's and int4_g16's scale byte may be the next toward zero (126 where the
      // outlier's own scale is the block's largest, 127), which clips it by
      // up to 1/127.
      if (format != weight_quantization::int4_nl) {
        const float slack = quantization_half_group_scales(format) ? 1.0f / 120.0f : 2e-3f;
        EXPECT_NEAR(cpu::dequantized_weight(view, 0, 7), 3.0f, 3.0f * slack) << quantization_name(format);
      }
    }
  }
}

// The row x (its cols = x.size()) quantised by `level`'s quantize_row for
// a matrix of `padded` inputs (codes and code sums prefilled with 99).
cpu::reference_rows quantize_row_at(cpu::isa_level level, const std::vector<float>& x, std::int64_t padded) {
  cpu::reference_rows out;
  out.padded_cols = padded;
  out.codes.assign(static_cast<std::size_t>(padded), 99);
  out.scales.assign(static_cast<std::size_t>(padded / quant_group), 0.0f);
  out.sums.assign(out.scales.size(), 0.0f);
  out.code_sums.assign(out.scales.size(), 99);
  out.half_starts.assign(2 * out.scales.size(), 99);
  cpu::kernels_for(level).quantize_row(x.data(), static_cast<std::int64_t>(x.size()), padded, out.codes.data(),
                                       out.scales.data(), out.sums.data(), out.code_sums.data(),
                                       out.half_starts.data());
  return out;
}

// quantize_row of the row x at every supported level matches
// cpu::quantize_rows_reference bit for bit.
void expect_activation_row_matches_reference(const std::vector<float>& x, std::int64_t padded) {
  const auto cols = static_cast<std::int64_t>(x.size());
  const cpu::reference_rows want = cpu::quantize_rows_reference(x.data(), 1, cols, cols, padded);
  for (auto level : test::supported_levels()) {
    const cpu::reference_rows got = quantize_row_at(level, x, padded);
    EXPECT_EQ(got.codes, want.codes) << cpu::isa_name(level) << " cols " << cols;
    EXPECT_EQ(got.scales, want.scales) << cpu::isa_name(level) << " cols " << cols;
    EXPECT_EQ(got.sums, want.sums) << cpu::isa_name(level) << " cols " << cols;
    EXPECT_EQ(got.code_sums, want.code_sums) << cpu::isa_name(level) << " cols " << cols;
    EXPECT_EQ(got.half_starts, want.half_starts) << cpu::isa_name(level) << " cols " << cols;
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
  expect_activation_row_matches_reference(x, padded);
}

TEST(QuantizedFormat, ActivationRowsMatchTheReferenceForAnyLengthAndMagnitude) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  // Whole superblocks, one input, a group and one input, a partial superblock after a whole one.
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{2048, 2048}, {1, 512}, {33, 512}, {1500, 1536}};
  for (auto [cols, padded] : shapes)
    expect_activation_row_matches_reference(rng.floats(static_cast<std::size_t>(cols), -4.0f, 4.0f), padded);

  std::vector<float> x = rng.floats(1500, -4.0f, 4.0f);
  for (std::size_t k = 0; k < x.size(); ++k)
    x[k] *= k / quant_group % 3 == 1 ? 1e-6f : k / quant_group % 3 == 2 ? 1e4f : 1.0f;
  // Group 4: amax 127, so the inverse is 1 and ±0.5, ±1.5, ... ±30.5 are ties (to even: 0, 2, 2, 4, ...).
  for (int t = 0; t < 31; ++t) x[4 * quant_group + t] = (t % 2 == 0 ? 1.0f : -1.0f) * (0.5f + static_cast<float>(t));
  x[4 * quant_group + 31] = 127.0f;
  std::fill(x.begin() + 6 * quant_group, x.begin() + 7 * quant_group, 0.0f);  // an all-zero group
  // Group 8: amax below 127 / FLT_MAX, so 127 / amax overflows: the group codes as zeros.
  for (int t = 0; t < quant_group; ++t) x[8 * quant_group + t] = 1e-37f * rng.uniform(-1.0f, 1.0f);
  expect_activation_row_matches_reference(x, 1536);
  const cpu::reference_rows tiny = cpu::quantize_rows_reference(x.data(), 1, 1500, 1500, 1536);
  for (int t = 0; t < quant_group; ++t)
    EXPECT_EQ(tiny.codes[static_cast<std::size_t>(cpu::interleaved_position(8 * quant_group + t))], 0) << t;
}

// A NaN codes as 0 and leaves its group's other codes as they were; an
// infinite input makes its group's inverse 0, so the whole group codes as 0.
// Every level gives the reference's codes and code sums (its scale sums of
// such groups are NaN, compared by the codes that make them).
TEST(QuantizedFormat, NonFiniteActivationsCodeAsZeroAtEveryLevel) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t cols = 700, padded = 1024;
  std::vector<float> x = rng.floats(static_cast<std::size_t>(cols), -4.0f, 4.0f);
  std::vector<float> clean = x;
  x[2 * quant_group + 5] = std::nanf("");
  clean[2 * quant_group + 5] = 0.0f;  // what the NaN codes as, the group's amax unchanged if 0 is not its largest
  x[5 * quant_group + 9] = std::numeric_limits<float>::infinity();
  const cpu::reference_rows want = cpu::quantize_rows_reference(x.data(), 1, cols, cols, padded);
  const cpu::reference_rows without_nan = cpu::quantize_rows_reference(clean.data(), 1, cols, cols, padded);
  for (std::int64_t t = 0; t < quant_group; ++t) {
    const auto nan_group = static_cast<std::size_t>(cpu::interleaved_position(2 * quant_group + t));
    EXPECT_EQ(want.codes[nan_group], without_nan.codes[nan_group]) << t;
    EXPECT_EQ(want.codes[static_cast<std::size_t>(cpu::interleaved_position(5 * quant_group + t))], 0) << t;
  }
  for (auto level : test::supported_levels()) {
    const cpu::reference_rows got = quantize_row_at(level, x, padded);
    EXPECT_EQ(got.codes, want.codes) << cpu::isa_name(level);
    EXPECT_EQ(got.code_sums, want.code_sums) << cpu::isa_name(level);
    EXPECT_EQ(got.half_starts, want.half_starts) << cpu::isa_name(level);
  }
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
          // Outputs before n_begin = 2 stay untouched.
          const std::vector<float> out = run_qgemv(level, view, rows_view, m, 2, bias.data());
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

// Above one GEMV pass the kernel runs register tiles of weight rows ×
// activation rows; each output must be the GEMV's own bits (a lone row, same
// level), including the rows left over at both edges of the tiles; and the
// tiles give the same bits whether they unpack 4- and 5-bit codes themselves
// or read them expanded to bytes a block of weight rows at a time (256 KiB:
// at 16,500 inputs a block of 12 rows, so 23 rows make two blocks, each with
// rows left over for the GEMV).
TEST(QuantizedGemm, TilesGiveTheGemvBitsAtEveryLevel) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t rows = 23, m = 14;
  for (std::int64_t cols : {200, 1100, 16500}) {
    const std::vector<float> w = rng.floats(static_cast<std::size_t>(rows * cols));
    const std::vector<float> x = rng.floats(static_cast<std::size_t>(m * cols), -3.0f, 3.0f);
    for (auto format : all_formats) {
      const quantized_buffer q = quantize(w, format, rows, cols);
      const cpu::quantized_matrix view = q.view();
      const cpu::reference_rows xq = cpu::quantize_rows_reference(x.data(), m, cols, cols, view.padded_cols);
      const cpu::quantized_rows all = xq.view();
      for (auto level : test::supported_levels()) {
        const std::vector<float> out = run_qgemv(level, view, all, m, 1);
        const std::vector<float> unexpanded = run_qgemv(level, view, all, m, 1, nullptr, false);
        for (std::size_t k = static_cast<std::size_t>(1); k < out.size(); ++k) {
          if (k % static_cast<std::size_t>(rows) == 0) continue;  // output 0 is left unwritten (n_begin 1)
          ASSERT_EQ(std::bit_cast<std::uint32_t>(out[k]), std::bit_cast<std::uint32_t>(unexpanded[k]))
              << quantization_name(format) << " at " << cpu::isa_name(level) << ": expanded codes at " << k;
        }
        for (std::int64_t i = 0; i < m; ++i) {
          const std::vector<float> lone = run_qgemv(level, view, test::activation_row(all, i), 1, 1);
          for (std::int64_t n = 1; n < rows; ++n) {
            const float got = out[static_cast<std::size_t>(i * rows + n)];
            ASSERT_EQ(std::bit_cast<std::uint32_t>(got),
                      std::bit_cast<std::uint32_t>(lone[static_cast<std::size_t>(n)]))
                << quantization_name(format) << " at " << cpu::isa_name(level) << " cols " << cols << " row " << i
                << " out " << n << ": " << got << " vs " << lone[static_cast<std::size_t>(n)];
          }
        }
      }
    }
  }
}

// int8 codes are stored as q + 128 (int4_nl's levels meet the activations
// that way too), int4's and int4_g16's as q + 8 and int6's as q + 32; the kernels take the
// offset out of each group's integer sum, before any rounding. A row whose
// weights are all tiny beside one outlier has codes near the offset, so
// removing it in floating point afterwards (128 · Σ x) would cancel large
// terms and leave an error far above this bound.
TEST(QuantizedGemv, CodeOffsetsLeaveNoCancellationError) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t rows = 5, cols = 2048, m = 12;
  std::vector<float> w = rng.floats(static_cast<std::size_t>(rows * cols), -0.01f, 0.01f);
  for (std::int64_t n = 0; n < rows; ++n) w[static_cast<std::size_t>(n * cols + 3 * n)] = 100.0f;
  const std::vector<float> x = rng.floats(static_cast<std::size_t>(m * cols), 1.0f, 2.0f);
  for (auto format : {weight_quantization::int8, weight_quantization::int4, weight_quantization::int4_nl,
                      weight_quantization::int6, weight_quantization::int4_g16}) {
    const quantized_buffer q = quantize(w, format, rows, cols);
    const cpu::quantized_matrix view = q.view();
    const cpu::reference_rows xq = cpu::quantize_rows_reference(x.data(), m, cols, cols, view.padded_cols);
    const cpu::quantized_rows xs = xq.view();
    for (auto level : test::supported_levels()) {
      const std::vector<float> out = run_qgemv(level, view, xs, m, 0);
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t n = 0; n < rows; ++n) {
          const double want = cpu::quantized_dot_reference(view, xq, i, n);
          ASSERT_NEAR(out[static_cast<std::size_t>(i * rows + n)], want, 4e-6 * std::fabs(want))
              << quantization_name(format) << " at " << cpu::isa_name(level) << " row " << i << " out " << n;
        }
      }
    }
  }
}

TEST(QuantizedGemv, DequantisedPanelsMatchTheReferenceAtEveryLevel) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t rows = 6, cols = 1000;
  const std::vector<float> w = rng.floats(static_cast<std::size_t>(rows * cols));
  for (auto format : all_formats) {
    const quantized_buffer q = quantize(w, format, rows, cols);
    const cpu::quantized_matrix view = q.view();
    for (auto level : test::supported_levels()) {
      std::vector<std::uint16_t> out(static_cast<std::size_t>((rows - 1) * cols), 0xffff);
      cpu::kernels_for(level).dequantize_rows(view, 1, rows, out.data());
      for (std::int64_t n = 1; n < rows; ++n) {
        for (std::int64_t k = 0; k < cols; ++k) {
          const float want = cpu::dequantized_weight(view, n, k);
          const float got = bf16_to_float(out[static_cast<std::size_t>((n - 1) * cols + k)]);
          ASSERT_NEAR(got, want, std::fabs(want) * 0x1p-8f + 1e-7f)
              << quantization_name(format) << " at " << cpu::isa_name(level) << " row " << n << " col " << k;
        }
      }
    }
  }
}

// linear() end to end: stacked bf16 parts with biases, through the integer
// GEMV (few rows), its GEMM tiles (more) and the dequantised oneDNN panels
// (forced by a row limit of 0), against the
// dequantised weights times the exact activations. The bound allows each
// activation its int8 step (GEMV) or its and the weight's bf16 rounding (GEMM).
TEST(QuantizedLinear, StackedPartsWithBiasesAtEveryLevelAndRowCount) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t k = 600, outs[] = {24, 40};
  std::vector<test::stored_values> stored;
  std::vector<std::vector<float>> biases;
  std::vector<host_tensor> parts, bias_tensors;
  std::vector<float> all_weights;
  for (std::int64_t out : outs) {
    stored.push_back(test::store_as(rng.floats(static_cast<std::size_t>(out * k)), dtype::bf16));
    biases.push_back(rng.floats(static_cast<std::size_t>(out)));
    all_weights.insert(all_weights.end(), stored.back().exact.begin(), stored.back().exact.end());
  }
  for (std::size_t i = 0; i < stored.size(); ++i) {
    parts.push_back({"part" + std::to_string(i), dtype::bf16, {outs[i], k}, stored[i].bytes.data()});
    bias_tensors.push_back({"bias" + std::to_string(i), dtype::f32, {outs[i]}, biases[i].data()});
  }
  const std::int64_t n_total = outs[0] + outs[1];
  for (auto format : all_formats) {
    const quantized_buffer q = quantize(all_weights, format, n_total, k);
    const cpu::quantized_matrix view = q.view();
    for (auto [level, integer_rows] : test::supported_levels_times({-1, 0})) {
      auto device = test::make_backend_at(level, {.quantized_gemv_max_rows = integer_rows});
      const auto weight = device->prepare_quantized_linear(parts, bias_tensors, format);
      ASSERT_EQ(weight->out_features(), n_total);
      for (std::int64_t m : {1, 5, 40}) {
        const std::vector<float> x = rng.floats(static_cast<std::size_t>(m * k), -3.0f, 3.0f);
        test::padded_matrix xs(*device, m, k), out(*device, m, n_total);
        xs.fill(x);
        out.poison_view();
        device->linear(xs.view(), *weight, out.view());
        ASSERT_TRUE(out.padding_intact());
        const std::vector<float> got = out.values();
        for (std::int64_t i = 0; i < m; ++i) {
          for (std::int64_t n = 0; n < n_total; ++n) {
            double want =
                n < outs[0] ? biases[0][static_cast<std::size_t>(n)] : biases[1][static_cast<std::size_t>(n - outs[0])];
            double bound = 1e-5;
            for (std::int64_t c = 0; c < k; ++c) {
              const double wv = cpu::dequantized_weight(view, n, c), xv = x[static_cast<std::size_t>(i * k + c)];
              float group_max = 0.0f;
              for (std::int64_t t = c / quant_group * quant_group; t < std::min(k, (c / quant_group + 1) * quant_group);
                   ++t)
                group_max = std::max(group_max, std::fabs(x[static_cast<std::size_t>(i * k + t)]));
              want += wv * xv;
              bound += std::fabs(wv) * (group_max / 127.0 * 0.5 + std::fabs(xv) * 0x1p-7) + 1e-4 * std::fabs(wv * xv);
            }
            ASSERT_NEAR(got[static_cast<std::size_t>(i * n_total + n)], want, bound)
                << quantization_name(format) << " at " << cpu::isa_name(level) << " integer rows " << integer_rows
                << " m " << m << " row " << i << " out " << n;
          }
        }
      }
    }
  }
}

// A row's result does not depend on what else shares the call.
TEST(QuantizedLinear, RowsAreIndependentOfTheBatch) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t n = 70, k = 530, m = 9;
  const auto w = test::store_as(rng.floats(static_cast<std::size_t>(n * k)), dtype::bf16);
  const host_tensor part{"w", dtype::bf16, {n, k}, w.bytes.data()};
  const std::vector<float> x = rng.floats(static_cast<std::size_t>(m * k));
  auto device = test::make_backend_at(cpu::detected_isa());
  for (auto format : all_formats) {
    const auto weight = device->prepare_quantized_linear(std::span(&part, 1), {}, format);
    test::padded_matrix all(*device, m, k), all_out(*device, m, n);
    all.fill(x);
    device->linear(all.view(), *weight, all_out.view());
    for (std::int64_t r : {0, 4, 8}) {
      test::padded_matrix one(*device, 1, k), one_out(*device, 1, n);
      one.fill(std::vector<float>(x.begin() + r * k, x.begin() + (r + 1) * k));
      device->linear(one.view(), *weight, one_out.view());
      for (std::int64_t c = 0; c < n; ++c) ASSERT_EQ(one_out.at(0, c), all_out.at(r, c)) << r << " " << c;
    }
  }
}

}  // namespace
}  // namespace troupe

// Block-factored weights: int4_asym / int5_asym (GGUF Q4_K / Q5_K kept
// exactly, u8 scale codes), int4_nl (IQ4_XS, s8 codes), int6 and int4_g16
// (Q6_K, Q3_K: s8 codes per 16 inputs) and int4 (s8 codes, quantised at load): the layout's size, the weights it holds,
// the int4 quantiser, the quantised GEMV, its tiles and the dequantised panels at every dispatch level, and the CPU
// backend choosing the layout only where every part of a linear has factors or is quantised by it.

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/quantized_weights.hpp"
#include "tests/kernels/cpu_test_support.hpp"
#include "tests/kernels/permuted_codes.hpp"
#include "tests/kernels/quantized_test_support.hpp"

namespace troupe {
namespace {

using test::block_factored_codes;
using test::pack_block_factored;
using test::random_source;
using test::run_qgemv;

constexpr weight_quantization block_formats[] = {weight_quantization::int4_asym, weight_quantization::int5_asym,
                                                 weight_quantization::int4_nl,   weight_quantization::int4,
                                                 weight_quantization::int6,      weight_quantization::int4_g16};

// Per row and 512 inputs: 16 scale codes and two f16 factors (20 bytes)
// where f16 group scales take 32, and as many again for offsets where the
// format has them (40 bytes against 64); int8 holds none, and of the
// block-factored layouts only int4's are quantised to nearest.
TEST(QuantizedBlockFactors, LayoutTakesTwentyBytesARowPer512InputsForEachFactorKind) {
  const std::int64_t rows = 64, cols = 4096, superblocks = cols / 512;
  for (auto format : block_formats) {
    if (quantization_half_group_scales(format)) continue;  // their own test below
    const cpu::quantized_layout plain = cpu::layout_for(format, rows, cols);
    const cpu::quantized_layout factored = cpu::layout_for(format, rows, cols, true);
    const auto codes = static_cast<std::size_t>(rows) * plain.row_code_bytes;
    const int kinds = quantization_group_offsets(format) ? 2 : 1;
    EXPECT_EQ(plain.total_bytes, codes + static_cast<std::size_t>(rows * superblocks * 32 * kinds));
    EXPECT_EQ(factored.total_bytes, codes + static_cast<std::size_t>(rows * superblocks * 20 * kinds));
    EXPECT_TRUE(factored.block_factors);
    std::vector<float> w(static_cast<std::size_t>(rows * cols), 0.5f);
    std::vector<std::uint8_t> buffer(factored.total_bytes);
    if (format == weight_quantization::int4) {
      EXPECT_NO_THROW(cpu::quantize_rows(w.data(), dtype::f32, rows, factored, buffer.data(), 0));
    } else {
      EXPECT_THROW(cpu::quantize_rows(w.data(), dtype::f32, rows, factored, buffer.data(), 0), std::invalid_argument)
          << quantization_name(format);
    }
  }
  EXPECT_THROW(cpu::layout_for(weight_quantization::int8, 4, 512, true), std::invalid_argument);
  const cpu::quantized_layout partial = cpu::layout_for(weight_quantization::int4_asym, 2, 288, true);
  std::vector<std::uint8_t> buffer(partial.total_bytes);
  EXPECT_THROW(cpu::pack_block_factor_rows(nullptr, nullptr, nullptr, nullptr, 2, partial, buffer.data(), 0),
               std::invalid_argument)
      << "288 inputs are not whole blocks of 256";
}

// int6 and int4_g16 are always block-factored: per row and 512 inputs 384
// (256) bytes of codes, 32 scale codes and two f16 factors (6.5625 bits a
// weight as GGUF Q6_K; 4.5625), and they are quantised to nearest too.
TEST(QuantizedBlockFactors, HalfGroupFormatsTakeThirtySixBytesARowPer512InputsBesideTheirCodes) {
  const std::int64_t rows = 64, cols = 4096, superblocks = cols / 512;
  for (const auto& [format, code_bytes] :
       {std::pair{weight_quantization::int6, 384}, {weight_quantization::int4_g16, 256}})
    for (bool asked : {false, true}) {
      const cpu::quantized_layout layout = cpu::layout_for(format, rows, cols, asked);
      EXPECT_TRUE(layout.block_factors);
      EXPECT_EQ(layout.row_code_bytes, static_cast<std::size_t>(superblocks * code_bytes));
      EXPECT_EQ(layout.total_bytes, static_cast<std::size_t>(rows * superblocks * (code_bytes + 36)));
      std::vector<float> w(static_cast<std::size_t>(rows * cols), 0.5f);
      std::vector<std::uint8_t> buffer(layout.total_bytes);
      EXPECT_NO_THROW(cpu::quantize_rows(w.data(), dtype::f32, rows, layout, buffer.data(), 0));
    }
}

// int6 and int4_g16 quantised to nearest: each half group of 16 takes the
// byte nearest its own scale (its first weight of largest magnitude on code
// 0, that is −32 or −8 steps) over the
// block's f16 factor (the largest own scale / 127, rounded up where that is
// an f16 subnormal), or the next byte toward zero where that leaves its
// codes less squared error, and each weight its nearest code under the
// chosen scale. Recomputed here for every half group; a zero row stays zero
// and a row whose factor is subnormal keeps its weights.
TEST(QuantizedBlockFactors, HalfGroupsQuantisedToNearestTakeTheLesserErrorOfTwoBytes) {
  for (weight_quantization format : {weight_quantization::int6, weight_quantization::int4_g16}) {
    SCOPED_TRACE(quantization_name(format));
    const int offset = half_group_code_offset(format);
    random_source rng;
    SCOPED_TRACE(rng.trace());
    const std::int64_t rows = 8, cols = 600;  // a partial factor block and superblock at the end
    std::normal_distribution<float> normal(0.0f, 0.02f);
    std::vector<float> w(static_cast<std::size_t>(rows * cols));
    for (float& v : w) v = normal(rng.engine());
    for (std::int64_t i = 0; i < rows * cols; i += 89) w[static_cast<std::size_t>(i)] *= 8.0f;  // outliers
    for (std::int64_t k = 0; k < cols; ++k) {
      w[static_cast<std::size_t>(k)] = 0.0f;                             // row 0: zero
      w[static_cast<std::size_t>(cols + k)] = 1e-6f * ((k % 7) - 3.0f);  // row 1: a subnormal factor
    }
    test::quantized_buffer q;
    q.layout = cpu::layout_for(format, rows, cols);
    q.bytes.assign(q.layout.total_bytes, 0);
    cpu::quantize_rows(w.data(), dtype::f32, rows, q.layout, q.bytes.data(), 0);
    const cpu::quantized_matrix view = q.view();
    const std::int64_t groups = view.padded_cols / cpu::quant_group, blocks = view.padded_cols / 256;
    // The squared error of a half group's values under scale d · byte, and the weights it gives.
    const auto coded = [offset](const float* values, float scale, float* out) {
      double error = 0.0;
      for (int t = 0; t < 16; ++t) {
        const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
        const int code = std::clamp(static_cast<int>(std::nearbyint(values[t] * inverse)) + offset, 0, 2 * offset - 1);
        out[t] = scale * static_cast<float>(code - offset);
        error += std::pow(static_cast<double>(values[t]) - out[t], 2.0);
      }
      return error;
    };
    double tiny_error = 0.0, tiny_size = 0.0;
    bool took_other = false, negative = false;
    for (std::int64_t n = 0; n < rows; ++n) {
      for (std::int64_t block = 0; block < blocks; ++block) {
        float values[16][16] = {}, own[16], largest = 0.0f;
        for (int h = 0; h < 16; ++h) {
          float extreme = 0.0f;
          for (int t = 0; t < 16; ++t) {
            const std::int64_t k = block * 256 + h * 16 + t;
            values[h][t] = k < cols ? w[static_cast<std::size_t>(n * cols + k)] : 0.0f;
            extreme = std::fabs(values[h][t]) > std::fabs(extreme) ? values[h][t] : extreme;
          }
          own[h] = extreme / static_cast<float>(-offset);
          largest = std::max(largest, std::fabs(own[h]));
        }
        std::uint16_t factor = float_to_f16(largest / 127.0f);
        if (factor < 0x0400 && f16_to_float(factor) * 127.0f < largest) ++factor;
        ASSERT_EQ(view.block_scales[n * blocks + block], factor) << "row " << n << " block " << block;
        const float d = f16_to_float(factor);
        for (int h = 0; h < 16; ++h) {
          const std::int64_t g = n * groups + block * 8 + h / 2;
          const int got = static_cast<std::int8_t>(view.scale_codes[cpu::half_scale_code_index(g, h % 2)]);
          const int nearest = d > 0.0f ? std::clamp(static_cast<int>(std::nearbyint(own[h] / d)), -127, 127) : 0;
          const int other = nearest > 0 ? nearest - 1 : nearest < 0 ? nearest + 1 : own[h] > 0.0f ? 1 : -1;
          float nearest_weights[16], other_weights[16];
          const double nearest_error = coded(values[h], d * static_cast<float>(nearest), nearest_weights);
          const double other_error = coded(values[h], d * static_cast<float>(other), other_weights);
          const bool take_other = other_error < nearest_error;
          ASSERT_EQ(got, take_other ? other : nearest) << "row " << n << " half group " << block * 16 + h;
          took_other |= take_other && n > 1;
          negative |= got < 0;
          for (int t = 0; t < 16; ++t) {
            const std::int64_t k = block * 256 + h * 16 + t;
            if (k >= cols) continue;
            const float want = (take_other ? other_weights : nearest_weights)[t];
            ASSERT_EQ(cpu::dequantized_weight(view, n, k), want) << "row " << n << " col " << k;
            if (n == 0) ASSERT_EQ(want, 0.0f);
            if (n == 1) {
              tiny_error += std::pow(static_cast<double>(want) - values[h][t], 2.0);
              tiny_size += std::pow(static_cast<double>(values[h][t]), 2.0);
            }
          }
        }
      }
    }
    EXPECT_TRUE(took_other) << "some half group errs less with the byte toward zero";
    EXPECT_TRUE(negative) << "scales of both signs";
    // 6-bit codes: about 4e-4 of the weights' size; 4-bit ones 16 times that.
    EXPECT_LT(tiny_error, (format == weight_quantization::int6 ? 0.001 : 0.016) * tiny_size);
  }
}

// int4 quantised to nearest with block factors: each group's scale a
// signed byte times its block's f16 factor, of either sign, its nearest
// byte or the next toward zero, for the least squared error. On weights
// with outliers that errs less overall than f16 group scales, which put
// each group's extreme on code 0; a zero block stays zero, and blocks too
// small for a normal f16 factor keep their weights: one whose factor
// rounded to nearest would be zero, and one whose subnormal factor
// rounded to nearest would fall a third short (clipping its extremes).
TEST(QuantizedBlockFactors, Int4QuantisedToNearestErrsLessThanF16Scales) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t rows = 48, cols = 1000;  // a partial superblock and a partial group at the end
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(static_cast<std::size_t>(rows * cols));
  for (float& v : w) v = normal(rng.engine());
  for (std::int64_t i = 0; i < rows * cols; i += 97) w[static_cast<std::size_t>(i)] *= 8.0f;  // outliers
  for (std::int64_t k = 0; k < cols; ++k) {
    w[static_cast<std::size_t>(k)] = 0.0f;                             // row 0: zero
    w[static_cast<std::size_t>(cols + k)] = 1e-6f * ((k % 7) - 3.0f);  // row 1: a subnormal factor
    // Row 2: largest / 8 / 127 = 1.45 · 2^-24, which rounds down to 2^-24.
    w[static_cast<std::size_t>(2 * cols + k)] = 1.45f * 0x1p-24f * 1016.0f * ((k % 7) - 3.0f) / 3.0f;
  }
  const test::quantized_buffer plain = test::quantize(w, weight_quantization::int4, rows, cols);
  test::quantized_buffer factored;
  factored.layout = cpu::layout_for(weight_quantization::int4, rows, cols, true);
  factored.bytes.assign(factored.layout.total_bytes, 0);
  cpu::quantize_rows(w.data(), dtype::f32, rows, factored.layout, factored.bytes.data(), 0);
  const cpu::quantized_matrix p = plain.view(), f = factored.view();
  double plain_error = 0.0, factored_error = 0.0, tiny_error[3] = {}, tiny_size[3] = {};
  bool negative_code = false;
  for (std::int64_t n = 0; n < rows; ++n) {
    for (std::int64_t k = 0; k < cols; ++k) {
      const double v = w[static_cast<std::size_t>(n * cols + k)];
      const double got = cpu::dequantized_weight(f, n, k);
      if (n == 0) {
        ASSERT_EQ(got, 0.0) << "col " << k;
      } else if (n < 3) {
        tiny_error[n] += (got - v) * (got - v);
        tiny_size[n] += v * v;
      }
      if (n < 3) continue;
      plain_error += std::pow(cpu::dequantized_weight(p, n, k) - v, 2.0);
      factored_error += std::pow(got - v, 2.0);
    }
    for (std::int64_t g = 0; g < f.padded_cols / cpu::quant_group; ++g)
      negative_code |= static_cast<std::int8_t>(f.scale_codes[n * (f.padded_cols / cpu::quant_group) + g]) < 0;
  }
  EXPECT_TRUE(negative_code) << "scales of both signs";
  // 0.979-0.982 here over seeds; 1.0006 with each group's nearest scale code alone.
  EXPECT_LT(factored_error, 0.99 * plain_error);
  for (int n : {1, 2}) EXPECT_LT(tiny_error[n], 0.02 * tiny_size[n]) << "row " << n;
}

// Each weight is its block's factor times its group's code, times the
// weight's code, plus the offset's product: the f32 products exact, one
// rounding in the sum. read_rows' f16 products differ from them by up to
// f16's rounding, which the layout no longer adds.
TEST(QuantizedBlockFactors, WeightsAreTheFactorProductsExactly) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t rows = 5, cols = 768;
  for (auto format : block_formats) {
    const block_factored_codes source(rng.engine(), format, rows, cols);
    const test::quantized_buffer q = pack_block_factored(source, rows, cols);
    const cpu::quantized_matrix view = q.view();
    for (std::int64_t n = 0; n < rows; ++n) {
      for (std::int64_t k = 0; k < cols; ++k)
        ASSERT_EQ(cpu::dequantized_weight(view, n, k), static_cast<float>(source.weight(n, k)))
            << quantization_name(format) << " [" << n << ", " << k << "]";
    }
  }
}

// The GEMV against the scalar reference; the tiles (14 activation rows),
// with codes expanded or read packed, give each row's lone GEMV bits; the
// dequantised panels hold each weight to bf16. 16,640 inputs take the tiles'
// expansion in two blocks of rows; 1,280 leaves half a superblock of padding.
TEST(QuantizedBlockFactors, GemvTilesAndPanelsAtEveryLevel) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t rows = 23;
  for (std::int64_t cols : {256, 1280, 16640}) {
    for (auto format : block_formats) {
      const block_factored_codes source(rng.engine(), format, rows, cols);
      const test::quantized_buffer q = pack_block_factored(source, rows, cols);
      const cpu::quantized_matrix view = q.view();
      for (std::int64_t m : {1, 5, 14}) {
        const std::vector<float> x = rng.floats(static_cast<std::size_t>(m * cols), -2.0f, 2.0f);
        const cpu::reference_rows xq = cpu::quantize_rows_reference(x.data(), m, cols, cols, view.padded_cols);
        const cpu::quantized_rows all = xq.view();
        for (auto level : test::supported_levels()) {
          const std::vector<float> out = run_qgemv(level, view, all, m, 1);
          const std::vector<float> unexpanded = run_qgemv(level, view, all, m, 1, nullptr, false);
          for (std::int64_t i = 0; i < m; ++i) {
            const std::vector<float> lone = run_qgemv(level, view, test::activation_row(all, i), 1, 1);
            for (std::int64_t n = 1; n < rows; ++n) {
              const auto at = static_cast<std::size_t>(i * rows + n);
              const double want = cpu::quantized_dot_reference(view, xq, i, n);
              ASSERT_NEAR(out[at], want, 1e-5 * (test::magnitude(view, xq, i, n) + 1.0))
                  << quantization_name(format) << " at " << cpu::isa_name(level) << " cols " << cols << " m " << m
                  << " row " << i << " out " << n;
              ASSERT_EQ(std::bit_cast<std::uint32_t>(out[at]), std::bit_cast<std::uint32_t>(unexpanded[at]));
              ASSERT_EQ(std::bit_cast<std::uint32_t>(out[at]),
                        std::bit_cast<std::uint32_t>(lone[static_cast<std::size_t>(n)]))
                  << quantization_name(format) << " at " << cpu::isa_name(level) << " cols " << cols << " m " << m
                  << " row " << i << " out " << n;
            }
          }
        }
      }
      for (auto level : test::supported_levels()) {
        std::vector<std::uint16_t> panel(static_cast<std::size_t>((rows - 1) * cols), 0xffff);
        cpu::kernels_for(level).dequantize_rows(view, 1, rows, panel.data());
        for (std::int64_t n = 1; n < rows; ++n) {
          for (std::int64_t k = 0; k < cols; ++k) {
            const float want = cpu::dequantized_weight(view, n, k);
            ASSERT_NEAR(bf16_to_float(panel[static_cast<std::size_t>((n - 1) * cols + k)]), want,
                        std::fabs(want) * 0x1p-8f + 1e-7f)
                << quantization_name(format) << " at " << cpu::isa_name(level) << " row " << n << " col " << k;
          }
        }
      }
    }
  }
}

// `weight`'s outputs for 1, 7 and 40 random activation rows, each held to
// Σ_j weight_at(n, j) · x_j within the activations' int8 rounding (each
// activation within half an int8 step of its group's largest, at most
// 2 / 254) and the f32 sums, as the reference's bound.
void expect_outputs_follow(backend& device, random_source& rng, const linear_weight& weight,
                           const std::function<double(std::int64_t, std::int64_t)>& weight_at, std::int64_t k) {
  const std::int64_t outputs = weight.out_features();
  for (std::int64_t m : {1, 7, 40}) {
    const std::vector<float> x = rng.floats(static_cast<std::size_t>(m * k), -2.0f, 2.0f);
    const std::vector<float> got = test::run_linear(device, weight, x, m, k);
    for (std::int64_t r = 0; r < m; ++r) {
      for (std::int64_t n = 0; n < outputs; ++n) {
        double want = 0.0, size = 0.0;
        for (std::int64_t j = 0; j < k; ++j) {
          const double w = weight_at(n, j);
          want += w * x[static_cast<std::size_t>(r * k + j)];
          size += std::fabs(w);
        }
        const double step = 2.0 / 254.0 * 1.001;
        ASSERT_NEAR(got[static_cast<std::size_t>(r * outputs + n)], want, size * step + 1e-5)
            << "m " << m << " row " << r << " out " << n;
      }
    }
  }
}

// The backend holds a stack's factors when every part has them (the weight
// then as small as the layout says, its outputs those of the exact weights),
// and f16 group scales when one part has none: a plain int4_asym part
// beside a block-factored one, whose products are then rounded to f16.
TEST(QuantizedBlockFactors, TheBackendKeepsFactorsOnlyWhereEveryPartHasThem) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t k = 768, rows = 72;  // past one 64-row packing task, so packing starts mid-part too
  const auto first = std::make_shared<block_factored_codes>(rng.engine(), weight_quantization::int4_asym, rows, k);
  const auto second = std::make_shared<block_factored_codes>(rng.engine(), weight_quantization::int4_asym, rows, k);
  const auto plain = std::make_shared<test::permuted_codes>(rng.engine(), rows, k, std::vector<std::int32_t>{});
  auto device = test::make_backend_at(cpu::detected_isa());
  const std::vector<host_tensor> factored_parts = {test::as_part("first", rows, k, first),
                                                   test::as_part("second", rows, k, second)};
  const std::vector<host_tensor> mixed_parts = {test::as_part("first", rows, k, first),
                                                test::as_part("plain", rows, k, plain)};
  const auto factored = device->prepare_quantized_linear(factored_parts, {}, weight_quantization::int4_asym);
  const auto mixed = device->prepare_quantized_linear(mixed_parts, {}, weight_quantization::int4_asym);
  EXPECT_EQ(factored->weight_bytes(), cpu::layout_for(weight_quantization::int4_asym, 2 * rows, k, true).total_bytes);
  EXPECT_EQ(mixed->weight_bytes(), cpu::layout_for(weight_quantization::int4_asym, 2 * rows, k).total_bytes);
  expect_outputs_follow(
      *device, rng, *factored,
      [&](std::int64_t n, std::int64_t j) { return n < rows ? first->weight(n, j) : second->weight(n - rows, j); }, k);
  expect_outputs_follow(
      *device, rng, *mixed,
      [&](std::int64_t n, std::int64_t j) {
        return n < rows ? first->weight(n, j, true) : static_cast<double>(plain->natural(n - rows, j));
      },
      k);
}

// A stored source read only through read_rows' f16 products, as a GGUF
// Q4_0 holds int4 codes.
class f16_products_only final : public stored_code_source {
 public:
  explicit f16_products_only(std::shared_ptr<const stored_code_source> inner) : inner_(std::move(inner)) {}
  weight_quantization format() const override { return inner_->format(); }
  void read_rows(std::int64_t first, std::int64_t count, std::uint8_t* codes, std::uint16_t* scales,
                 std::uint16_t* offsets) const override {
    inner_->read_rows(first, count, codes, scales, offsets);
  }

 private:
  std::shared_ptr<const stored_code_source> inner_;
};

// int4 weights the backend quantises at load take block factors, the same
// as quantize_rows into the factored layout gives (each output that
// weight's dot product); beside int4 codes a checkpoint stores with f16
// scales, the whole stack keeps f16 scales and those codes as stored.
TEST(QuantizedBlockFactors, TheBackendQuantisesInt4ToFactorsUnlessAPartStoresF16Scales) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t k = 768, rows = 72;
  const std::vector<float> w = rng.floats(static_cast<std::size_t>(rows * k), -0.1f, 0.1f);
  const auto stored = std::make_shared<block_factored_codes>(rng.engine(), weight_quantization::int4, rows, k);
  auto device = test::make_backend_at(cpu::detected_isa());
  const host_tensor loaded{"loaded", dtype::f32, {rows, k}, w.data()};
  const std::vector<host_tensor> own = {loaded, loaded};
  const std::vector<host_tensor> mixed = {
      loaded, test::as_part("stored", rows, k, std::make_shared<f16_products_only>(stored))};
  const auto factored = device->prepare_quantized_linear(own, {}, weight_quantization::int4);
  const auto kept = device->prepare_quantized_linear(mixed, {}, weight_quantization::int4);
  EXPECT_EQ(factored->weight_bytes(), cpu::layout_for(weight_quantization::int4, 2 * rows, k, true).total_bytes);
  EXPECT_EQ(kept->weight_bytes(), cpu::layout_for(weight_quantization::int4, 2 * rows, k).total_bytes);
  test::quantized_buffer own_rows;
  own_rows.layout = cpu::layout_for(weight_quantization::int4, rows, k, true);
  own_rows.bytes.assign(own_rows.layout.total_bytes, 0);
  cpu::quantize_rows(w.data(), dtype::f32, rows, own_rows.layout, own_rows.bytes.data(), 0);
  const test::quantized_buffer plain_rows = test::quantize(w, weight_quantization::int4, rows, k);
  expect_outputs_follow(
      *device, rng, *factored,
      [&](std::int64_t n, std::int64_t j) {
        return static_cast<double>(cpu::dequantized_weight(own_rows.view(), n % rows, j));
      },
      k);
  expect_outputs_follow(
      *device, rng, *kept,
      [&](std::int64_t n, std::int64_t j) {
        return n < rows ? static_cast<double>(cpu::dequantized_weight(plain_rows.view(), n, j))
                        : stored->weight(n - rows, j, true);
      },
      k);
}

}  // namespace
}  // namespace troupe

// Block-factored int4_asym / int5_asym weights (GGUF Q4_K / Q5_K kept
// exactly): the layout's size, the weights it holds, the quantised GEMV,
// its tiles and the dequantised panels at every dispatch level, and the CPU
// backend choosing the layout only where every part of a linear has factors.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <memory>
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

constexpr weight_quantization block_formats[] = {weight_quantization::int4_asym, weight_quantization::int5_asym};

// Per row and 512 inputs: 16 scale and 16 offset codes and two f16 factors
// of each kind (40 bytes) where f16 group scales and offsets take 64; only
// the formats with group offsets hold factors, and only codes a checkpoint
// stores fill them.
TEST(QuantizedBlockFactors, LayoutTakesFortyBytesARowPer512InputsForScales) {
  const std::int64_t rows = 64, cols = 4096, superblocks = cols / 512;
  for (auto format : block_formats) {
    const cpu::quantized_layout plain = cpu::layout_for(format, rows, cols);
    const cpu::quantized_layout factored = cpu::layout_for(format, rows, cols, true);
    const auto codes = static_cast<std::size_t>(rows) * plain.row_code_bytes;
    EXPECT_EQ(plain.total_bytes, codes + static_cast<std::size_t>(rows * superblocks * 64));
    EXPECT_EQ(factored.total_bytes, codes + static_cast<std::size_t>(rows * superblocks * 40));
    EXPECT_TRUE(factored.block_factors);
    std::vector<float> w(static_cast<std::size_t>(rows * cols), 0.5f);
    std::vector<std::uint8_t> buffer(factored.total_bytes);
    EXPECT_THROW(cpu::quantize_rows(w.data(), dtype::f32, rows, factored, buffer.data(), 0), std::invalid_argument);
  }
  for (auto format : {weight_quantization::int8, weight_quantization::int4, weight_quantization::int4_nl})
    EXPECT_THROW(cpu::layout_for(format, 4, 512, true), std::invalid_argument) << quantization_name(format);
  const cpu::quantized_layout partial = cpu::layout_for(weight_quantization::int4_asym, 2, 288, true);
  std::vector<std::uint8_t> buffer(partial.total_bytes);
  EXPECT_THROW(cpu::pack_block_factor_rows(nullptr, nullptr, nullptr, nullptr, 2, partial, buffer.data(), 0),
               std::invalid_argument)
      << "288 inputs are not whole blocks of 256";
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

// The backend holds a stack's factors when every part has them (the weight
// then as small as the layout says, its outputs those of the exact weights),
// and f16 group scales when one part has none: a plain int4_asym part
// beside a block-factored one, whose products are then rounded to f16.
// Bound: the activations' int8 rounding and f32 sums, as the reference.
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
  for (std::int64_t m : {1, 7, 40}) {
    const std::vector<float> x = rng.floats(static_cast<std::size_t>(m * k), -2.0f, 2.0f);
    const std::vector<float> got = test::run_linear(*device, *factored, x, m, k);
    const std::vector<float> got_mixed = test::run_linear(*device, *mixed, x, m, k);
    for (std::int64_t r = 0; r < m; ++r) {
      for (std::int64_t n = 0; n < 2 * rows; ++n) {
        double exact = 0.0, rounded = 0.0, size = 0.0, size_mixed = 0.0;
        for (std::int64_t j = 0; j < k; ++j) {
          const double xj = x[static_cast<std::size_t>(r * k + j)];
          const double w = n < rows ? first->weight(n, j) : second->weight(n - rows, j);
          const double w_mixed = n < rows ? first->weight(n, j, true) : plain->natural(n - rows, j);
          exact += w * xj;
          rounded += w_mixed * xj;
          size += std::fabs(w);
          size_mixed += std::fabs(w_mixed);
        }
        // Each activation within half an int8 step of its group's largest, at most 2 / 254.
        const double step = 2.0 / 254.0 * 1.001;
        const auto at = static_cast<std::size_t>(r * 2 * rows + n);
        ASSERT_NEAR(got[at], exact, size * step + 1e-5) << "m " << m << " row " << r << " out " << n;
        ASSERT_NEAR(got_mixed[at], rounded, size_mixed * step + 1e-5) << "m " << m << " row " << r << " out " << n;
      }
    }
  }
}

}  // namespace
}  // namespace troupe

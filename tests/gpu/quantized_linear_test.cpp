// Weight-only quantised linear layers (int8, int4, int4_asym, int5_asym, int4_nl): the packing
// into the device layout against the CPU quantiser's own decoding (no GPU
// needed), then the fused GEMV and the expanded-slab path against a double
// reference that decodes the CPU quantiser's codes of the same weights, and
// GPTQ act-order codes against the same codes unpermuted.

// Built only with the CUDA backend (TROUPE_HAVE_CUDA comes with troupe_kernels).
#if defined(TROUPE_HAVE_CUDA)

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <utility>

#include "kernels/cpu/quantized_weights.hpp"
#include "kernels/cuda/quantized_linear.hpp"
#include "kernels/dtype.hpp"
#include "tests/gpu/gpu_test_support.hpp"
#include "tests/kernels/permuted_codes.hpp"

namespace troupe::gpu_test {
namespace {

constexpr weight_quantization formats[] = {weight_quantization::int8, weight_quantization::int4,
                                           weight_quantization::int4_asym, weight_quantization::int5_asym,
                                           weight_quantization::int4_nl};

/// Every weight of a rows × cols f32 matrix as the CPU quantiser stores it;
/// int4's in block factors, each group's scale product rounded to f16 as
/// the device holds it.
std::vector<float> cpu_decoded(const std::vector<float>& w, weight_quantization format, std::int64_t rows,
                               std::int64_t cols) {
  const bool block_factors = format == weight_quantization::int4;
  const cpu::quantized_layout layout = cpu::layout_for(format, rows, cols, block_factors);
  std::vector<unsigned char> buffer(layout.total_bytes);
  cpu::quantize_rows(w.data(), dtype::f32, rows, layout, buffer.data(), 0);
  const cpu::quantized_matrix view = cpu::view_of(layout, buffer.data());
  const std::int64_t groups = view.padded_cols / cpu::quant_group;
  std::vector<float> decoded(w.size());
  for (std::int64_t n = 0; n < rows; ++n) {
    for (std::int64_t k = 0; k < cols; ++k) {
      if (!block_factors) {
        decoded[n * cols + k] = cpu::dequantized_weight(view, n, k);
        continue;
      }
      const float scale = f16_to_float(float_to_f16(cpu::group_scale(view, n * groups + k / cpu::quant_group)));
      decoded[n * cols + k] = stored_code_value(format, cpu::stored_code(view, n, k), scale, 0.0f);
    }
  }
  return decoded;
}

TEST(QuantizedPacking, DeviceLayoutHoldsTheCpuQuantisersCodes) {
  auto rng = fresh_rng();
  for (const weight_quantization format : formats) {
    const std::pair<std::int64_t, std::int64_t> sizes[] = {{5, 100}, {70, 64}, {3, 1000}};
    for (const auto& [rows, cols] : sizes) {
      SCOPED_TRACE(std::string(quantization_name(format)) + " " + std::to_string(rows) + "x" + std::to_string(cols));
      const auto w = random_floats(rng, static_cast<std::size_t>(rows * cols), 0.3f);
      const cuda::quantized_device_layout layout = cuda::device_layout_for(format, rows, cols);
      EXPECT_EQ(layout.padded_cols % 32, 0);
      EXPECT_EQ(layout.row_bytes % 16, 0u);
      std::vector<unsigned char> image(layout.total_bytes, 0);
      // Two calls, as the backend's packing threads split a part.
      cuda::pack_quantized_rows(w.data(), dtype::f32, rows / 2, layout, image.data(), 0);
      cuda::pack_quantized_rows(w.data() + (rows / 2) * cols, dtype::f32, rows - rows / 2, layout, image.data(),
                                rows / 2);
      const auto want = cpu_decoded(w, format, rows, cols);
      std::int64_t differences = 0;
      for (std::int64_t n = 0; n < rows; ++n)
        for (std::int64_t k = 0; k < cols; ++k)
          differences += cuda::packed_weight(layout, image.data(), n, k) != want[n * cols + k];
      EXPECT_EQ(differences, 0);
    }
  }
  EXPECT_THROW(cuda::device_layout_for(weight_quantization::none, 4, 4), std::invalid_argument);
}

struct quantized_case {
  std::int64_t m, k;
  std::vector<std::int64_t> parts;  // out features of each fused part
  std::int64_t x_stride;            // elements between activation rows
  dtype out_type;
  bool bias;
};

/// Runs every case in every format against the double reference.
void expect_cases_match(backend& gpu, const std::vector<quantized_case>& cases, std::int64_t gemv_max_rows) {
  auto rng = fresh_rng();
  for (const weight_quantization format : formats) {
    for (const quantized_case& c : cases) {
      std::int64_t n = 0;
      for (auto p : c.parts) n += p;
      SCOPED_TRACE(std::string(quantization_name(format)) + " M=" + std::to_string(c.m) + " N=" + std::to_string(n) +
                   " K=" + std::to_string(c.k));
      std::vector<std::vector<float>> storage;
      std::vector<host_tensor> parts, biases;
      std::vector<float> w_used, b_used;
      for (std::size_t i = 0; i < c.parts.size(); ++i) {
        storage.push_back(random_floats(rng, static_cast<std::size_t>(c.parts[i] * c.k), 1.0f / std::sqrt(float(c.k))));
        parts.push_back({"w" + std::to_string(i), dtype::f32, {c.parts[i], c.k}, storage.back().data()});
        const auto decoded = cpu_decoded(storage.back(), format, c.parts[i], c.k);
        w_used.insert(w_used.end(), decoded.begin(), decoded.end());
        if (c.bias) {
          storage.push_back(random_floats(rng, static_cast<std::size_t>(c.parts[i]), 1.0f));
          biases.push_back({"b" + std::to_string(i), dtype::f32, {c.parts[i]}, storage.back().data()});
          b_used.insert(b_used.end(), storage.back().begin(), storage.back().end());
        }
      }
      const auto weight = gpu.prepare_quantized_linear(parts, biases, format);
      ASSERT_EQ(weight->out_features(), n);
      ASSERT_EQ(weight->in_features(), c.k);
      const auto x_bits = random_half_bits(rng, static_cast<std::size_t>(c.m * c.k), 1.0f, dtype::bf16);
      const device_matrix x =
          upload_matrix(gpu, {.type = dtype::bf16, .rows = c.m, .cols = c.k, .stride = c.x_stride}, x_bits.data());
      const device_matrix out = poisoned_matrix(gpu, {.type = c.out_type, .rows = c.m, .cols = n, .stride = n + 5});
      gpu.linear(x.view, *weight, out.view);
      std::vector<double> want(static_cast<std::size_t>(c.m * n));
      for (std::int64_t r = 0; r < c.m; ++r) {
        for (std::int64_t o = 0; o < n; ++o) {
          double sum = c.bias ? b_used[o] : 0.0;
          for (std::int64_t i = 0; i < c.k; ++i)
            sum += double(bf16_to_float(x_bits[r * c.k + i])) * w_used[o * c.k + i];
          want[r * n + o] = sum;
        }
      }
      // Expanded slabs round the weights to bf16 before cuBLASLt.
      const bool exact_weights = c.m <= gemv_max_rows && c.out_type == dtype::f32;
      EXPECT_TRUE(all_close(download_floats(gpu, out.view), want, exact_weights ? f32_rtol : bf16_rtol));
    }
  }
}

// M = 1, 3, 8 and 16 take the GEMV (16: two launches), 64 and 130 the
// expanded slabs. Columns that are no multiple of 32 and strides that are
// no multiple of 8 take the padded copy of x.
const std::vector<quantized_case> shapes = {
    {1, 64, {40}, 64, dtype::bf16, false},       {3, 100, {37, 16, 16}, 103, dtype::f32, true},
    {8, 200, {70}, 200, dtype::bf16, true},      {16, 96, {33}, 104, dtype::f32, false},
    {64, 100, {48, 24}, 100, dtype::bf16, true}, {130, 160, {65}, 168, dtype::f32, true},
};

using QuantizedLinear = cuda_fixture;

TEST_F(QuantizedLinear, MatchesTheDecodedCodesOverFormatsAndShapes) {
  expect_cases_match(gpu(), shapes, cuda::cuda_backend_options{}.quantized_gemv_max_rows);
}

// Every row count through the expanded path, in slabs of 64 rows: slab
// offsets of the output and the bias.
class QuantizedLinearSlabs : public cuda_fixture {
 protected:
  cuda::cuda_backend_options backend_options() const override {
    cuda::cuda_backend_options options;
    options.quantized_gemv_max_rows = 0;
    options.quantized_slab_bytes = 1;
    return options;
  }
};

TEST_F(QuantizedLinearSlabs, MatchesTheDecodedCodes) {
  expect_cases_match(gpu(),
                     {{1, 64, {40, 100}, 64, dtype::bf16, true},
                      {3, 100, {130}, 103, dtype::f32, true},
                      {9, 48, {64, 64, 3}, 48, dtype::f32, false}},
                     0);
}

// GPTQ act-order codes (stored_code_source::input_permutation) packed as
// stored, x gathered into their order on the device: the same bits as the
// codes read unpermuted on x gathered on the host, through the GEMV (with
// and without the padded copy it needs anyway) and the slabs. Stacked
// parts share the first one's order.
TEST_F(QuantizedLinear, ActOrderCodesEqualTheUnpermutedCodesOnGatheredActivations) {
  auto rng = fresh_rng();
  const std::int64_t k = 320, outs[] = {24, 40};
  const std::vector<std::int32_t> permutation = test::random_permutation(rng, k);
  std::vector<host_tensor> permuted, plain;
  for (const std::int64_t out : outs) {
    auto source = std::make_shared<test::permuted_codes>(rng, out, k, permutation);
    plain.push_back(test::as_part("plain", out, k, std::make_shared<test::permuted_codes>(source->unpermuted())));
    permuted.push_back(test::as_part("permuted", out, k, std::move(source)));
  }
  const auto weight = gpu().prepare_quantized_linear(permuted, {}, weight_quantization::int4_asym);
  const auto reference = gpu().prepare_quantized_linear(plain, {}, weight_quantization::int4_asym);
  for (const auto& [m, stride] : {std::pair<std::int64_t, std::int64_t>{1, 320}, {5, 323}, {70, 320}}) {
    SCOPED_TRACE("M=" + std::to_string(m) + " stride " + std::to_string(stride));
    const auto x_bits = random_half_bits(rng, static_cast<std::size_t>(m * k), 1.0f, dtype::bf16);
    std::vector<std::uint16_t> gathered(x_bits.size());
    for (std::int64_t r = 0; r < m; ++r)
      for (std::int64_t j = 0; j < k; ++j) gathered[r * k + j] = x_bits[r * k + permutation[j]];
    const device_matrix x =
        upload_matrix(gpu(), {.type = dtype::bf16, .rows = m, .cols = k, .stride = stride}, x_bits.data());
    const device_matrix x_gathered = upload_matrix(gpu(), {.type = dtype::bf16, .rows = m, .cols = k}, gathered.data());
    const device_matrix got = poisoned_matrix(gpu(), {.type = dtype::f32, .rows = m, .cols = 64});
    const device_matrix want = poisoned_matrix(gpu(), {.type = dtype::f32, .rows = m, .cols = 64});
    gpu().linear(x.view, *weight, got.view);
    gpu().linear(x_gathered.view, *reference, want.view);
    EXPECT_EQ(download_bytes(gpu(), got.view), download_bytes(gpu(), want.view));
  }
}

// A stacked linear of act-order codes, codes in another order and a float
// part: the first part's codes as stored, the others decoded and
// requantised in its order, x gathered once, through the GEMV (M 3) and the
// slabs (M 40), against the decoded weights in double. Bound: the
// requantised parts' int4 step (at most (max − min) / 30 of the row), x's
// bf16 and the slabs' bf16 weights, generously.
TEST_F(QuantizedLinear, ActOrderStacksRequantiseOtherPartsInTheFirstOnesOrder) {
  auto rng = fresh_rng();
  const std::int64_t k = 256, rows = 16;
  const auto first = std::make_shared<test::permuted_codes>(rng, rows, k, test::random_permutation(rng, k));
  const auto second = std::make_shared<test::permuted_codes>(rng, rows, k, test::random_permutation(rng, k));
  const std::vector<float> floats = random_floats(rng, static_cast<std::size_t>(rows * k), 0.1f);
  const std::vector<host_tensor> parts = {test::as_part("first", rows, k, first),
                                          test::as_part("second", rows, k, second),
                                          {"float", dtype::f32, {rows, k}, floats.data()}};
  const auto weight = gpu().prepare_quantized_linear(parts, {}, weight_quantization::int4_asym);
  for (const std::int64_t m : {3, 40}) {
    SCOPED_TRACE("M=" + std::to_string(m));
    const auto x_bits = random_half_bits(rng, static_cast<std::size_t>(m * k), 1.0f, dtype::bf16);
    const device_matrix x = upload_matrix(gpu(), {.type = dtype::bf16, .rows = m, .cols = k}, x_bits.data());
    const device_matrix out = poisoned_matrix(gpu(), {.type = dtype::f32, .rows = m, .cols = 3 * rows});
    gpu().linear(x.view, *weight, out.view);
    const std::vector<float> got = download_floats(gpu(), out.view);
    for (std::int64_t r = 0; r < m; ++r) {
      for (std::int64_t n = 0; n < 3 * rows; ++n) {
        const std::int64_t row = n % rows;
        std::vector<double> w(static_cast<std::size_t>(k));
        for (std::int64_t c = 0; c < k; ++c)
          w[c] = n < rows ? first->natural(row, c) : n < 2 * rows ? second->natural(row, c) : floats[row * k + c];
        const auto [low, high] = std::minmax_element(w.begin(), w.end());
        const double step = n < rows ? 0.0 : (*high - *low) / 30.0;
        double want = 0.0, bound = 1e-4;
        for (std::int64_t c = 0; c < k; ++c) {
          const double xv = bf16_to_float(x_bits[r * k + c]);
          want += w[c] * xv;
          bound += std::fabs(xv) * (step + 1e-2 * std::fabs(w[c]));
        }
        EXPECT_NEAR(got[r * 3 * rows + n], want, bound) << "row " << r << " out " << n;
      }
    }
  }
}

TEST_F(QuantizedLinear, RejectsMismatchedShapes) {
  std::vector<float> w(64 * 32, 0.5f);
  const host_tensor part{"w", dtype::f32, {64, 32}, w.data()};
  const auto weight = gpu().prepare_quantized_linear(std::span(&part, 1), {}, weight_quantization::int4);
  const device_matrix x = poisoned_matrix(gpu(), {.type = dtype::bf16, .rows = 4, .cols = 31});
  const device_matrix out = poisoned_matrix(gpu(), {.type = dtype::bf16, .rows = 4, .cols = 64});
  EXPECT_THROW(gpu().linear(x.view, *weight, out.view), std::invalid_argument);
  const host_tensor bad_bias{"b", dtype::f32, {63}, w.data()};
  EXPECT_THROW(gpu().prepare_quantized_linear(std::span(&part, 1), std::span(&bad_bias, 1), weight_quantization::int8),
               std::invalid_argument);
  const host_tensor empty{"e", dtype::f32, {64, 32}, nullptr};
  EXPECT_THROW(gpu().prepare_quantized_linear(std::span(&empty, 1), {}, weight_quantization::int8),
               std::invalid_argument);
}

}  // namespace
}  // namespace troupe::gpu_test

#endif  // TROUPE_HAVE_CUDA

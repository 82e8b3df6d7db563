// Linear weights whose 4-bit source reads the inputs permuted (GPTQ
// act-order, stored_code_source::input_permutation): linear() gathers x to match,
// bit for bit the same as the unpermuted codes on gathered activations,
// and stacked parts whose permutations differ are requantised correctly;
// kept codes stacked with a finer part go into int8 (a Q4_K_M file's
// q/k beside its Q6_K v).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/quantized_weights.hpp"
#include "kernels/stored_code_source.hpp"
#include "tests/kernels/cpu_test_support.hpp"

namespace troupe {
namespace {

using test::random_source;
using test::run_linear;

// Random int4_asym codes [rows][cols] in the order of `permutation`.
class test_source final : public stored_code_source {
 public:
  test_source(random_source& rng, std::int64_t rows, std::int64_t cols, std::vector<std::int32_t> permutation)
      : rows_(rows), cols_(cols), permutation_(std::move(permutation)) {
    for (std::int64_t i = 0; i < rows * cols; ++i) codes_.push_back(static_cast<std::uint8_t>(rng.integer(0, 15)));
    for (std::int64_t i = 0; i < rows * cols / stored_code_group; ++i) {
      scales_.push_back(float_to_f16(rng.uniform(0.01f, 0.1f)));
      offsets_.push_back(float_to_f16(rng.uniform(-0.8f, 0.0f)));
    }
  }
  // The same codes read in input order 0..cols-1 of the permuted matrix.
  test_source unpermuted() const {
    test_source copy = *this;
    copy.permutation_.clear();
    return copy;
  }

  weight_quantization format() const override { return weight_quantization::int4_asym; }
  std::span<const std::int32_t> input_permutation() const override { return permutation_; }
  void read_rows(std::int64_t first, std::int64_t count, std::uint8_t* codes, std::uint16_t* scales,
                 std::uint16_t* offsets) const override {
    const std::int64_t groups = cols_ / stored_code_group;
    std::copy_n(codes_.begin() + first * cols_, count * cols_, codes);
    std::copy_n(scales_.begin() + first * groups, count * groups, scales);
    std::copy_n(offsets_.begin() + first * groups, count * groups, offsets);
  }

  /// Weight (n, k) at its natural input position k.
  float natural(std::int64_t n, std::int64_t k) const {
    const std::int64_t j =
        permutation_.empty() ? k : std::find(permutation_.begin(), permutation_.end(), k) - permutation_.begin();
    const std::size_t g = static_cast<std::size_t>((n * cols_ + j) / stored_code_group);
    return f16_to_float(scales_[g]) * codes_[static_cast<std::size_t>(n * cols_ + j)] + f16_to_float(offsets_[g]);
  }

 private:
  std::int64_t rows_, cols_;
  std::vector<std::int32_t> permutation_;
  std::vector<std::uint8_t> codes_;
  std::vector<std::uint16_t> scales_, offsets_;
};

std::vector<std::int32_t> random_permutation(random_source& rng, std::int64_t n) {
  std::vector<std::int32_t> out(static_cast<std::size_t>(n));
  std::iota(out.begin(), out.end(), 0);
  std::shuffle(out.begin(), out.end(), rng.engine());
  return out;
}

host_tensor as_part(const std::string& name, std::int64_t rows, std::int64_t cols,
                    std::shared_ptr<const stored_code_source> source) {
  host_tensor part{name, dtype::bf16, {rows, cols}, nullptr};
  part.stored_codes = std::move(source);
  return part;
}

// Through the integer GEMV (few rows) and the dequantised panels (many).
TEST(PermutedLinear, EqualsTheUnpermutedCodesOnGatheredActivations) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t k = 320, outs[] = {24, 40};
  const std::vector<std::int32_t> permutation = random_permutation(rng, k);
  std::vector<host_tensor> permuted, plain;
  for (std::int64_t out : outs) {
    auto source = std::make_shared<test_source>(rng, out, k, permutation);
    plain.push_back(as_part("plain", out, k, std::make_shared<test_source>(source->unpermuted())));
    permuted.push_back(as_part("permuted", out, k, std::move(source)));
  }
  auto device = test::make_backend_at(cpu::detected_isa());
  const auto weight = device->prepare_quantized_linear(permuted, {}, weight_quantization::int4_asym);
  const auto reference = device->prepare_quantized_linear(plain, {}, weight_quantization::int4_asym);
  for (std::int64_t m : {1, 7, 130}) {
    const std::vector<float> x = rng.floats(static_cast<std::size_t>(m * k), -2.0f, 2.0f);
    std::vector<float> gathered(x.size());
    for (std::int64_t r = 0; r < m; ++r)
      for (std::int64_t j = 0; j < k; ++j)
        gathered[static_cast<std::size_t>(r * k + j)] = x[static_cast<std::size_t>(r * k + permutation[j])];
    EXPECT_EQ(run_linear(*device, *weight, x, m, k), run_linear(*device, *reference, gathered, m, k)) << "m " << m;
  }
}

// q/k/v-style parts with different permutations, and a float part, stacked:
// every part after the first is requantised in the first one's input order.
// Bound: each weight's own int4 step (requantised: half a step of its new
// group, at most (max − min) / 30 of the row) plus the activations' int8
// rounding, generously.
TEST(PermutedLinear, PartsWithOtherPermutationsAreRequantisedInTheFirstOnesOrder) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t k = 256, rows = 16, m = 3;
  const auto first = std::make_shared<test_source>(rng, rows, k, random_permutation(rng, k));
  const auto second = std::make_shared<test_source>(rng, rows, k, random_permutation(rng, k));
  const auto floats = test::store_as(rng.floats(static_cast<std::size_t>(rows * k)), dtype::bf16);
  const std::vector<host_tensor> parts = {as_part("first", rows, k, first),
                                          as_part("second", rows, k, second),
                                          {"float", dtype::bf16, {rows, k}, floats.bytes.data()}};
  auto device = test::make_backend_at(cpu::detected_isa());
  const auto weight = device->prepare_quantized_linear(parts, {}, weight_quantization::int4_asym);
  const std::vector<float> x = rng.floats(static_cast<std::size_t>(m * k), -2.0f, 2.0f);
  const std::vector<float> got = run_linear(*device, *weight, x, m, k);
  for (std::int64_t r = 0; r < m; ++r) {
    for (std::int64_t n = 0; n < 3 * rows; ++n) {
      const std::int64_t row = n % rows;
      std::vector<float> w(static_cast<std::size_t>(k));
      for (std::int64_t c = 0; c < k; ++c)
        w[static_cast<std::size_t>(c)] = n < rows       ? first->natural(row, c)
                                         : n < 2 * rows ? second->natural(row, c)
                                                        : floats.exact[static_cast<std::size_t>(row * k + c)];
      const auto [low, high] = std::minmax_element(w.begin(), w.end());
      const double step = n < rows ? 0.0 : (*high - *low) / 30.0;
      double want = 0.0, bound = 1e-4;
      for (std::int64_t c = 0; c < k; ++c) {
        const double xv = x[static_cast<std::size_t>(r * k + c)], wv = w[static_cast<std::size_t>(c)];
        want += wv * xv;
        bound += std::fabs(xv) * (step + 1e-3 * std::fabs(wv)) + std::fabs(wv) * 2.0 / 127.0;
      }
      EXPECT_NEAR(got[static_cast<std::size_t>(r * 3 * rows + n)], want, bound) << "row " << r << " out " << n;
    }
  }
}

// Kept int4_asym codes stacked with a float part, prepared as int8: the
// codes are decoded and every row rounded to its own int8 scale. Bound: half
// an int8 step of the row's largest weight for every weight, plus the
// activations' int8 rounding, generously. The other 4-bit format is still refused.
TEST(PermutedLinear, KeptCodesStackedWithAFinerPartArePreparedAsInt8) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t k = 256, rows = 16, m = 3;
  const auto kept = std::make_shared<test_source>(rng, rows, k, std::vector<std::int32_t>{});
  const auto floats = test::store_as(rng.floats(static_cast<std::size_t>(rows * k)), dtype::bf16);
  const std::vector<host_tensor> parts = {as_part("kept", rows, k, kept),
                                          {"finer", dtype::bf16, {rows, k}, floats.bytes.data()}};
  auto device = test::make_backend_at(cpu::detected_isa());
  const auto weight = device->prepare_quantized_linear(parts, {}, weight_quantization::int8);
  const std::vector<float> x = rng.floats(static_cast<std::size_t>(m * k), -2.0f, 2.0f);
  const std::vector<float> got = run_linear(*device, *weight, x, m, k);
  for (std::int64_t r = 0; r < m; ++r) {
    for (std::int64_t n = 0; n < 2 * rows; ++n) {
      const std::int64_t row = n % rows;
      std::vector<float> w(static_cast<std::size_t>(k));
      for (std::int64_t c = 0; c < k; ++c)
        w[static_cast<std::size_t>(c)] =
            n < rows ? kept->natural(row, c) : floats.exact[static_cast<std::size_t>(row * k + c)];
      double largest = 0.0;
      for (const float v : w) largest = std::max(largest, static_cast<double>(std::fabs(v)));
      double want = 0.0, bound = 1e-4;
      for (std::int64_t c = 0; c < k; ++c) {
        const double xv = x[static_cast<std::size_t>(r * k + c)], wv = w[static_cast<std::size_t>(c)];
        want += wv * xv;
        bound += std::fabs(xv) * largest / 254.0 + std::fabs(wv) * 2.0 / 127.0;
      }
      EXPECT_NEAR(got[static_cast<std::size_t>(r * 2 * rows + n)], want, bound) << "row " << r << " out " << n;
    }
  }
  EXPECT_THROW(device->prepare_quantized_linear(parts, {}, weight_quantization::int4), std::invalid_argument);
}

}  // namespace
}  // namespace troupe

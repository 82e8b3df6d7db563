// Linear weights whose 4-bit source reads the inputs permuted (GPTQ
// act-order, stored_code_source::input_permutation): linear() gathers x to match,
// bit for bit the same as the unpermuted codes on gathered activations,
// and stacked parts whose permutations differ are requantised correctly;
// kept codes stacked with a finer part go into int8 (a Q4_0 file's q/k
// beside its Q8_0 v).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/quantized_weights.hpp"
#include "kernels/stored_code_source.hpp"
#include "kernels/tensor.hpp"
#include "tests/kernels/cpu_test_support.hpp"
#include "tests/kernels/permuted_codes.hpp"

namespace troupe {
namespace {

using test::as_part;
using test::random_source;
using test::run_linear;

// The order a stacked linear keeps: its first part kept as codes in the
// linear's format (identity counts as natural, codes decoded into another
// format set none), and a permutation that is not one of the inputs refused by name.
TEST(PermutedLinear, StackedInputOrderIsTheFirstKeptPartsAndMustPermuteTheInputs) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t k = 64, rows = 4;
  std::vector<std::int32_t> identity(static_cast<std::size_t>(k));
  for (std::int64_t j = 0; j < k; ++j) identity[static_cast<std::size_t>(j)] = static_cast<std::int32_t>(j);
  const std::vector<std::int32_t> first = test::random_permutation(rng.engine(), k);
  const auto part_in = [&](const std::string& name, std::vector<std::int32_t> order) {
    return as_part(name, rows, k, std::make_shared<test::permuted_codes>(rng.engine(), rows, k, std::move(order)));
  };
  const auto floats = test::store_as(rng.floats(static_cast<std::size_t>(rows * k)), dtype::bf16);
  const host_tensor float_part{"float", dtype::bf16, {rows, k}, floats.bytes.data()};
  const std::vector<host_tensor> stacked = {float_part, part_in("first", first),
                                            part_in("second", test::random_permutation(rng.engine(), k))};
  EXPECT_EQ(stacked_input_order(stacked, weight_quantization::int4_asym), first);
  EXPECT_TRUE(stacked_input_order(stacked, weight_quantization::int8).empty()) << "every part decoded";
  EXPECT_TRUE(stacked_input_order(std::vector{part_in("identity", identity)}, weight_quantization::int4_asym).empty());
  EXPECT_TRUE(stacked_input_order(std::vector{float_part}, weight_quantization::int4_asym).empty());

  EXPECT_TRUE(same_input_order({}, identity));
  EXPECT_TRUE(same_input_order(first, first));
  EXPECT_FALSE(same_input_order({}, first));
  EXPECT_FALSE(same_input_order(first, identity));

  std::vector<std::int32_t> short_order(first.begin(), first.end() - 1), out_of_range = first, twice = first;
  out_of_range[3] = static_cast<std::int32_t>(k);
  twice[3] = twice[4];
  for (const auto& [order, says] : {std::pair{short_order, "of 63 entries for 64 input features"},
                                    std::pair{out_of_range, "naming input 64 of 64"}, std::pair{twice, "twice"}}) {
    try {
      stacked_input_order(std::vector{float_part, part_in("bad", order)}, weight_quantization::int4_asym);
      ADD_FAILURE() << "accepted: " << says;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("weight bad has an input permutation"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
}

// Through the integer GEMV (few rows) and the dequantised panels (many).
TEST(PermutedLinear, EqualsTheUnpermutedCodesOnGatheredActivations) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t k = 320, outs[] = {24, 40};
  const std::vector<std::int32_t> permutation = test::random_permutation(rng.engine(), k);
  std::vector<host_tensor> permuted, plain;
  for (std::int64_t out : outs) {
    auto source = std::make_shared<test::permuted_codes>(rng.engine(), out, k, permutation);
    plain.push_back(as_part("plain", out, k, std::make_shared<test::permuted_codes>(source->unpermuted())));
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
  const auto first =
      std::make_shared<test::permuted_codes>(rng.engine(), rows, k, test::random_permutation(rng.engine(), k));
  const auto second =
      std::make_shared<test::permuted_codes>(rng.engine(), rows, k, test::random_permutation(rng.engine(), k));
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
  const auto kept = std::make_shared<test::permuted_codes>(rng.engine(), rows, k, std::vector<std::int32_t>{});
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

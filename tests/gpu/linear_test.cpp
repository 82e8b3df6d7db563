// cuBLASLt linear layers against a double reference: bf16 and f32 outputs,
// fused parts, biases, strided inputs, f32 / f16 checkpoints (converted to
// bf16 on upload, so the reference rounds them the same way), and M values
// inside a bucket that were not the heuristic's.

// Built only with the CUDA backend (TROUPE_HAVE_CUDA comes with troupe_kernels).
#if defined(TROUPE_HAVE_CUDA)

#include <cmath>
#include <cstring>

#include "kernels/dtype.hpp"
#include "tests/gpu/gpu_test_support.hpp"

namespace troupe::gpu_test {
namespace {

using LinearLayer = cuda_fixture;

struct linear_case {
  std::int64_t m, k;
  std::vector<std::int64_t> parts;  // out features of each fused part
  dtype weight_type;
  dtype out_type;
  bool bias;
};

TEST_F(LinearLayer, MatchesReferenceOverShapesTypesAndBiases) {
  auto rng = fresh_rng();
  const std::vector<linear_case> cases = {
      {1, 64, {64}, dtype::bf16, dtype::bf16, false},
      {7, 2048, {2048, 256, 256}, dtype::bf16, dtype::bf16, true},
      {5, 2048, {2048, 256, 256}, dtype::bf16, dtype::bf16, true},  // same bucket as 7
      {8, 2048, {2048, 256, 256}, dtype::bf16, dtype::bf16, true},
      {300, 1024, {2816, 2816}, dtype::f32, dtype::bf16, false},
      {33, 512, {1000}, dtype::f16, dtype::f32, true},
      {3, 896, {32000}, dtype::bf16, dtype::f32, false},  // an LM head on the logits rows
  };
  for (const linear_case& c : cases) {
    std::int64_t n = 0;
    for (auto p : c.parts) n += p;
    SCOPED_TRACE("M=" + std::to_string(c.m) + " N=" + std::to_string(n) + " K=" + std::to_string(c.k));
    std::vector<std::vector<std::uint8_t>> storage;
    std::vector<host_tensor> parts, biases;
    std::vector<float> w_used, b_used;  // what the device computes with
    for (std::size_t i = 0; i < c.parts.size(); ++i) {
      const std::int64_t rows = c.parts[i];
      const auto values = random_floats(rng, static_cast<std::size_t>(rows * c.k), 1.0f / std::sqrt(float(c.k)));
      storage.emplace_back(values.size() * dtype_size(c.weight_type));
      convert_elements(values.data(), dtype::f32, storage.back().data(), c.weight_type, values.size());
      parts.push_back({"w" + std::to_string(i), c.weight_type, {rows, c.k}, storage.back().data()});
      std::vector<float> exact(values.size());
      convert_elements(storage.back().data(), c.weight_type, exact.data(), dtype::f32, values.size());
      for (float v : exact) w_used.push_back(bf16_to_float(float_to_bf16(v)));
      if (c.bias) {
        const auto bias_values = random_floats(rng, static_cast<std::size_t>(rows), 1.0f);
        storage.emplace_back(bias_values.size() * 4);
        std::memcpy(storage.back().data(), bias_values.data(), bias_values.size() * 4);
        biases.push_back({"b" + std::to_string(i), dtype::f32, {rows}, storage.back().data()});
        b_used.insert(b_used.end(), bias_values.begin(), bias_values.end());
      }
    }
    const auto weight = gpu().prepare_linear(parts, biases);
    ASSERT_EQ(weight->out_features(), n);
    ASSERT_EQ(weight->in_features(), c.k);
    const auto x_bits = random_half_bits(rng, static_cast<std::size_t>(c.m * c.k), 1.0f, dtype::bf16);
    const device_matrix x =
        upload_matrix(gpu(), {.type = dtype::bf16, .rows = c.m, .cols = c.k, .stride = c.k + 64}, x_bits.data());
    const device_matrix out = poisoned_matrix(gpu(), {.type = c.out_type, .rows = c.m, .cols = n, .stride = n + 8});
    gpu().linear(x.view, *weight, out.view);
    std::vector<double> want(static_cast<std::size_t>(c.m * n));
    for (std::int64_t r = 0; r < c.m; ++r) {
      for (std::int64_t o = 0; o < n; ++o) {
        double sum = c.bias ? b_used[o] : 0.0;
        for (std::int64_t i = 0; i < c.k; ++i) sum += double(bf16_to_float(x_bits[r * c.k + i])) * w_used[o * c.k + i];
        want[r * n + o] = sum;
      }
    }
    EXPECT_TRUE(all_close(download_floats(gpu(), out.view), want, c.out_type == dtype::f32 ? f32_rtol : bf16_rtol));
  }
}

TEST_F(LinearLayer, RejectsMismatchedShapes) {
  std::vector<float> w(64 * 32, 0.5f);
  const host_tensor part{"w", dtype::f32, {64, 32}, w.data()};
  const auto weight = gpu().prepare_linear(std::span(&part, 1), {});
  const device_matrix x = poisoned_matrix(gpu(), {.type = dtype::bf16, .rows = 4, .cols = 31});
  const device_matrix out = poisoned_matrix(gpu(), {.type = dtype::bf16, .rows = 4, .cols = 64});
  EXPECT_THROW(gpu().linear(x.view, *weight, out.view), std::invalid_argument);
  const host_tensor bad_bias{"b", dtype::f32, {63}, w.data()};
  EXPECT_THROW(gpu().prepare_linear(std::span(&part, 1), std::span(&bad_bias, 1)), std::invalid_argument);
}

}  // namespace
}  // namespace troupe::gpu_test

#endif  // TROUPE_HAVE_CUDA

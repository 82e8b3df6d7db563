#pragma once
// Shared pieces of the CUDA backend tests: the fixture that skips without a
// device, fresh random inputs (seed printed, replayable through
// TROUPE_GPU_TEST_SEED), device matrices poisoned before each run, and the
// tolerance check every kernel test uses.

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/cuda/cuda_backend.hpp"

namespace troupe::gpu_test {

/// A test on a CUDA backend; skips with "no CUDA device" only when
/// cuda::device_present() is false.
class cuda_fixture : public ::testing::Test {
 protected:
  void SetUp() override;
  /// Options of the backend the fixture creates; tests may override.
  virtual cuda::cuda_backend_options backend_options() const { return {}; }
  backend& gpu() { return *backend_; }

  std::unique_ptr<backend> backend_;
};

/// True when TROUPE_GPU_TESTS_QUICK is set (sanitizer runs): smaller shapes.
bool quick_mode();

/// A generator seeded from TROUPE_GPU_TEST_SEED or std::random_device; the
/// seed is recorded in the test's output so a failure can be replayed.
std::mt19937_64 fresh_rng();

/// Normal(0, scale) samples rounded to `type` (bf16 or f16 bits, or f32 bits).
std::vector<std::uint16_t> random_half_bits(std::mt19937_64& rng, std::size_t count, float scale, dtype type);
std::vector<float> random_floats(std::mt19937_64& rng, std::size_t count, float scale);

/// Float value of element `i` of raw `bits` of `type` (bf16 / f16).
float half_bits_to_float(std::uint16_t bits, dtype type);
/// Rounds `value` to `type` (bf16 / f16) bits.
std::uint16_t float_to_half_bits(float value, dtype type);

/// A device matrix and the memory behind it.
struct device_matrix {
  device_buffer buffer;
  tensor_view view;
};

/// The shape of a device matrix: rows × cols of `type`, row stride `stride`
/// elements (>= cols; 0 means cols).
struct matrix_layout {
  dtype type = dtype::f32;
  std::int64_t rows = 1;
  std::int64_t cols = 1;
  std::int64_t stride = 0;
};

/// A matrix of `layout` whose every byte is 0xFF (NaN in f32, f16 and bf16).
device_matrix poisoned_matrix(backend& b, const matrix_layout& layout);
/// Uploads packed host rows (rows × cols elements) into a poisoned matrix of `layout`.
device_matrix upload_matrix(backend& b, const matrix_layout& layout, const void* host);
/// A device KV cache of `spec` holding `pool`, the host image of every
/// block (spec.num_blocks × spec.block_elements() 16-bit elements), copied
/// in through a host pool as a swap-in would.
std::unique_ptr<kv_cache> upload_kv_pool(backend& b, const kv_cache_spec& spec, const std::vector<std::uint16_t>& pool);
/// The matrix's elements (stride removed) as floats.
std::vector<float> download_floats(backend& b, const tensor_view& view);
/// The matrix's elements (stride removed) as raw bytes.
std::vector<std::uint8_t> download_bytes(backend& b, const tensor_view& view);

/// Every |got - want| <= rtol * (|want| + mean |want|): relative error, with
/// the mean magnitude as the floor for elements near zero. NaN fails.
::testing::AssertionResult all_close(const std::vector<float>& got, const std::vector<double>& want, double rtol);

/// Relative tolerance of bf16 paths and of f32 paths.
constexpr double bf16_rtol = 1e-2;
constexpr double f32_rtol = 1e-3;

}  // namespace troupe::gpu_test

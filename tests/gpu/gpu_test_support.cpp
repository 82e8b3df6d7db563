// Built only with the CUDA backend (TROUPE_HAVE_CUDA comes with troupe_kernels).
#if defined(TROUPE_HAVE_CUDA)

#include "tests/gpu/gpu_test_support.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "kernels/dtype.hpp"

namespace troupe::gpu_test {

void cuda_fixture::SetUp() {
  if (!cuda::device_present()) GTEST_SKIP() << "no CUDA device";
  backend_ = cuda::make_cuda_backend(backend_options());
}

bool quick_mode() { return std::getenv("TROUPE_GPU_TESTS_QUICK") != nullptr; }

std::mt19937_64 fresh_rng() {
  std::uint64_t seed = 0;
  if (const char* fixed = std::getenv("TROUPE_GPU_TEST_SEED")) {
    seed = std::strtoull(fixed, nullptr, 10);
  } else {
    std::random_device device;
    seed = (static_cast<std::uint64_t>(device()) << 32) ^ device();
  }
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  std::printf("[ seed     ] TROUPE_GPU_TEST_SEED=%llu\n", static_cast<unsigned long long>(seed));
  return std::mt19937_64(seed);
}

float half_bits_to_float(std::uint16_t bits, dtype type) {
  return type == dtype::f16 ? f16_to_float(bits) : bf16_to_float(bits);
}

std::uint16_t float_to_half_bits(float value, dtype type) {
  return type == dtype::f16 ? float_to_f16(value) : float_to_bf16(value);
}

std::vector<std::uint16_t> random_half_bits(std::mt19937_64& rng, std::size_t count, float scale, dtype type) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<std::uint16_t> bits(count);
  for (auto& b : bits) b = float_to_half_bits(normal(rng), type);
  return bits;
}

std::vector<float> random_floats(std::mt19937_64& rng, std::size_t count, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(count);
  for (auto& v : values) v = normal(rng);
  return values;
}

device_matrix poisoned_matrix(backend& b, const matrix_layout& layout) {
  auto [type, rows, cols, stride] = layout;
  if (stride == 0) stride = cols;
  const std::size_t bytes = static_cast<std::size_t>(rows * stride) * dtype_size(type);
  device_matrix m{b.allocate(bytes), {}};
  m.view = tensor_view{m.buffer.data(), type, rows, cols, stride};
  const std::vector<std::uint8_t> poison(bytes, 0xFF);
  b.copy_to_device(m.buffer.data(), poison.data(), bytes);
  return m;
}

std::unique_ptr<kv_cache> upload_kv_pool(backend& b, const kv_cache_spec& spec,
                                         const std::vector<std::uint16_t>& pool) {
  auto cache = b.create_kv_cache(spec);
  auto host = b.create_host_pool(spec, spec.num_blocks);
  std::vector<block_copy> fill;
  for (std::int64_t i = 0; i < spec.num_blocks; ++i) {
    std::memcpy(host->block_data(i), pool.data() + i * spec.block_elements(), spec.block_bytes());
    fill.push_back(
        {block_location::host, static_cast<std::int32_t>(i), block_location::device, static_cast<std::int32_t>(i)});
  }
  b.copy_blocks(*cache, host.get(), fill);
  return cache;
}

device_matrix upload_matrix(backend& b, const matrix_layout& layout, const void* host) {
  const auto [type, rows, cols, stride] = layout;
  device_matrix m = poisoned_matrix(b, layout);
  const std::size_t row_bytes = static_cast<std::size_t>(cols) * dtype_size(type);
  const std::size_t stride_bytes = static_cast<std::size_t>(m.view.row_stride) * dtype_size(type);
  std::vector<std::uint8_t> image(static_cast<std::size_t>(rows) * stride_bytes, 0xFF);
  for (std::int64_t r = 0; r < rows; ++r)
    std::memcpy(image.data() + static_cast<std::size_t>(r) * stride_bytes,
                static_cast<const std::uint8_t*>(host) + static_cast<std::size_t>(r) * row_bytes, row_bytes);
  b.copy_to_device(m.buffer.data(), image.data(), image.size());
  return m;
}

std::vector<std::uint8_t> download_bytes(backend& b, const tensor_view& view) {
  const std::size_t element = dtype_size(view.type);
  const std::size_t stride_bytes = static_cast<std::size_t>(view.row_stride) * element;
  const std::size_t row_bytes = static_cast<std::size_t>(view.cols) * element;
  std::vector<std::uint8_t> image(view.rows == 0 ? 0
                                                 : static_cast<std::size_t>(view.rows - 1) * stride_bytes + row_bytes);
  b.copy_to_host(image.data(), view.data, image.size());
  std::vector<std::uint8_t> packed(static_cast<std::size_t>(view.rows) * row_bytes);
  for (std::int64_t r = 0; r < view.rows; ++r)
    std::memcpy(packed.data() + static_cast<std::size_t>(r) * row_bytes,
                image.data() + static_cast<std::size_t>(r) * stride_bytes, row_bytes);
  return packed;
}

std::vector<float> download_floats(backend& b, const tensor_view& view) {
  const std::vector<std::uint8_t> packed = download_bytes(b, view);
  std::vector<float> values(view.element_count());
  convert_elements(packed.data(), view.type, values.data(), dtype::f32, values.size());
  return values;
}

::testing::AssertionResult all_close(const std::vector<float>& got, const std::vector<double>& want, double rtol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "sizes differ: " << got.size() << " vs " << want.size();
  double mean = 0.0;
  for (double w : want) mean += std::fabs(w);
  mean = want.empty() ? 0.0 : mean / static_cast<double>(want.size());
  std::size_t worst = 0;
  double worst_ratio = 0.0;
  std::size_t failures = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double error = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double bound = rtol * (std::fabs(want[i]) + mean);
    const double ratio =
        std::isnan(error) ? std::numeric_limits<double>::infinity() : error / (bound > 0 ? bound : 1e-30);
    if (!(error <= bound)) ++failures;
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  if (failures == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << failures << " of " << got.size() << " elements off; worst at " << worst
                                       << ": got " << got[worst] << ", want " << want[worst] << " (bound "
                                       << rtol * (std::fabs(want[worst]) + mean) << ")";
}

}  // namespace troupe::gpu_test

#endif  // TROUPE_HAVE_CUDA

#pragma once
// Shared helpers of the CPU backend tests: backends per dispatch level,
// seeded random inputs (fresh each run; TROUPE_TEST_SEED reproduces one),
// NaN poisoning and tolerance checks.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/dtype.hpp"

namespace troupe::test {

/// A random source whose seed is fresh each run unless TROUPE_TEST_SEED is
/// set; `trace()` names it so a failure can be replayed.
class random_source {
 public:
  random_source() {
    const char* fixed = std::getenv("TROUPE_TEST_SEED");
    seed_ = fixed != nullptr ? std::strtoull(fixed, nullptr, 10) : std::random_device{}();
    engine_.seed(seed_);
  }
  std::string trace() const { return "TROUPE_TEST_SEED=" + std::to_string(seed_); }
  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(engine_); }
  int integer(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(engine_); }
  std::vector<float> floats(std::size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::vector<float> v(n);
    for (float& x : v) x = uniform(lo, hi);
    return v;
  }
  std::mt19937_64& engine() { return engine_; }

 private:
  std::uint64_t seed_ = 0;
  std::mt19937_64 engine_;
};

/// Every dispatch level this machine can run, scalar first.
inline std::vector<cpu::isa_level> supported_levels() {
  std::vector<cpu::isa_level> levels;
  for (auto level : {cpu::isa_level::scalar, cpu::isa_level::avx2, cpu::isa_level::avx512, cpu::isa_level::avx512_vnni,
                     cpu::isa_level::avx512_bf16}) {
    if (cpu::isa_supported(level)) levels.push_back(level);
  }
  return levels;
}

/// Every supported level paired with each of `settings`.
inline std::vector<std::pair<cpu::isa_level, int>> supported_levels_times(std::initializer_list<int> settings) {
  std::vector<std::pair<cpu::isa_level, int>> pairs;
  for (auto level : supported_levels()) {
    for (int setting : settings) pairs.emplace_back(level, setting);
  }
  return pairs;
}

/// The CPU backend settings the tests vary besides the dispatch level.
struct backend_knobs {
  int gemv_max_rows = -1;  ///< rows up to which linear() takes the skinny GEMM (-1: the backend's default)
  int threads = 2;
  int quantized_gemv_max_rows = -1;  ///< rows up to which quantised weights take the integer kernels
  bool bf16_panels = true;           ///< pack bf16 weights into panels where the level has the panel GEMM
};

/// A CPU backend dispatching at most at `level`.
inline std::unique_ptr<backend> make_backend_at(cpu::isa_level level, const backend_knobs& knobs = {}) {
  cpu::cpu_backend_options options;
  options.threads = knobs.threads;
  options.max_isa = level;
  options.gemv_max_rows = knobs.gemv_max_rows;
  options.quantized_gemv_max_rows = knobs.quantized_gemv_max_rows;
  options.bf16_panels = knobs.bf16_panels;
  return cpu::make_cpu_backend(options);
}

/// Values stored as `type` (raw bytes) and the exact floats they hold.
struct stored_values {
  std::vector<std::uint8_t> bytes;
  std::vector<float> exact;
};

inline stored_values store_as(const std::vector<float>& values, dtype type) {
  stored_values s;
  s.bytes.resize(values.size() * dtype_size(type));
  convert_elements(values.data(), dtype::f32, s.bytes.data(), type, values.size());
  s.exact.resize(values.size());
  convert_elements(s.bytes.data(), type, s.exact.data(), dtype::f32, values.size());
  return s;
}

inline float round_to_bf16(float x) { return bf16_to_float(float_to_bf16(x)); }

inline void poison(float* data, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) data[i] = std::numeric_limits<float>::quiet_NaN();
}

/// An f32 matrix in backend memory with a padded row stride; padding holds a
/// sentinel so writes outside the view are caught.
class padded_matrix {
 public:
  static constexpr float sentinel = -12345.0f;
  padded_matrix(backend& b, std::int64_t rows, std::int64_t cols, std::int64_t pad = 3)
      : rows_(rows),
        cols_(cols),
        stride_(cols + pad),
        buffer_(b.allocate(static_cast<std::size_t>(std::max<std::int64_t>(1, rows * (cols + pad))) * sizeof(float))) {
    for (std::int64_t i = 0; i < rows * stride_; ++i) data()[i] = sentinel;
  }
  float* data() const { return static_cast<float*>(buffer_.data()); }
  tensor_view view() const { return {buffer_.data(), dtype::f32, rows_, cols_, stride_}; }
  float& at(std::int64_t r, std::int64_t c) const { return data()[r * stride_ + c]; }
  void fill(const std::vector<float>& values) const {
    for (std::int64_t r = 0; r < rows_; ++r)
      for (std::int64_t c = 0; c < cols_; ++c) at(r, c) = values[static_cast<std::size_t>(r * cols_ + c)];
  }
  void poison_view() const {
    for (std::int64_t r = 0; r < rows_; ++r) poison(data() + r * stride_, static_cast<std::size_t>(cols_));
  }
  std::vector<float> values() const {
    std::vector<float> v(static_cast<std::size_t>(rows_ * cols_));
    for (std::int64_t r = 0; r < rows_; ++r)
      for (std::int64_t c = 0; c < cols_; ++c) v[static_cast<std::size_t>(r * cols_ + c)] = at(r, c);
    return v;
  }
  bool padding_intact() const {
    for (std::int64_t r = 0; r < rows_; ++r)
      for (std::int64_t c = cols_; c < stride_; ++c)
        if (at(r, c) != sentinel) return false;
    return true;
  }

 private:
  std::int64_t rows_, cols_, stride_;
  device_buffer buffer_;
};

/// x [m, k] (row-major values) through `weight` on `device`: y [m, out],
/// checking that linear() writes nothing outside its output view.
inline std::vector<float> run_linear(backend& device, const linear_weight& weight, const std::vector<float>& x,
                                     std::int64_t m, std::int64_t k) {
  padded_matrix xs(device, m, k), out(device, m, weight.out_features());
  xs.fill(x);
  out.poison_view();
  device.linear(xs.view(), weight, out.view());
  EXPECT_TRUE(out.padding_intact());
  return out.values();
}

/// Largest |got - want| / scale; NaN anywhere counts as infinitely wrong.
inline double max_scaled_error(const std::vector<float>& got, const std::vector<double>& want, double scale) {
  double worst = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i])) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, std::abs(got[i] - want[i]) / scale);
  }
  return worst;
}

inline double max_abs(const std::vector<double>& v) {
  double m = 0.0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

}  // namespace troupe::test

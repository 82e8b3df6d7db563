#pragma once
// A stored_code_source of random int4_asym codes whose inputs are read
// permuted (as GPTQ act-order checkpoints are), for the backends' linear
// tests: the CPU's (tests/kernels) and the CUDA one's (tests/gpu).

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/dtype.hpp"
#include "kernels/stored_code_source.hpp"
#include "kernels/tensor.hpp"

namespace troupe::test {

/// Random int4_asym codes [rows][cols] in the input order of `permutation` (empty: natural).
class permuted_codes final : public stored_code_source {
 public:
  permuted_codes(std::mt19937_64& engine, std::int64_t rows, std::int64_t cols, std::vector<std::int32_t> permutation)
      : cols_(cols), permutation_(std::move(permutation)) {
    std::uniform_int_distribution<int> code(0, 15);
    std::uniform_real_distribution<float> scale(0.01f, 0.1f), offset(-0.8f, 0.0f);
    for (std::int64_t i = 0; i < rows * cols; ++i) codes_.push_back(static_cast<std::uint8_t>(code(engine)));
    for (std::int64_t i = 0; i < rows * cols / stored_code_group; ++i) {
      scales_.push_back(float_to_f16(scale(engine)));
      offsets_.push_back(float_to_f16(offset(engine)));
    }
  }
  /// The same codes read in input order 0..cols-1 of the permuted matrix.
  permuted_codes unpermuted() const {
    permuted_codes copy = *this;
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
  std::int64_t cols_;
  std::vector<std::int32_t> permutation_;
  std::vector<std::uint8_t> codes_;
  std::vector<std::uint16_t> scales_, offsets_;
};

/// 0..n-1 shuffled.
inline std::vector<std::int32_t> random_permutation(std::mt19937_64& engine, std::int64_t n) {
  std::vector<std::int32_t> out(static_cast<std::size_t>(n));
  std::iota(out.begin(), out.end(), 0);
  std::shuffle(out.begin(), out.end(), engine);
  return out;
}

/// A [rows][cols] linear part held by `source`.
inline host_tensor as_part(const std::string& name, std::int64_t rows, std::int64_t cols,
                           std::shared_ptr<const stored_code_source> source) {
  host_tensor part{name, dtype::bf16, {rows, cols}, nullptr};
  part.stored_codes = std::move(source);
  return part;
}

}  // namespace troupe::test

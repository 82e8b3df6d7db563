#include "kernels/tensor.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/backend.hpp"
#include "kernels/row_source.hpp"
#include "kernels/stored_code_source.hpp"

namespace troupe {

device_buffer& device_buffer::operator=(device_buffer&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = std::exchange(other.owner_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void device_buffer::release() {
  if (owner_ != nullptr && data_ != nullptr) owner_->release(data_, bytes_);
  owner_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

std::vector<float> matrix_rows_as_f32(const host_tensor& part, std::int64_t begin, std::int64_t count) {
  const std::int64_t cols = part.matrix_cols();
  std::vector<float> rows(static_cast<std::size_t>(count * cols));
  if (part.rows != nullptr) {
    part.rows->read_rows(begin, count, rows.data());
  } else if (part.stored_codes != nullptr) {
    decode_stored_code_rows(*part.stored_codes, begin, count, cols, rows.data());
  } else {
    const std::size_t row_bytes = static_cast<std::size_t>(cols) * dtype_size(part.type);
    convert_elements(static_cast<const char*>(part.data) + static_cast<std::size_t>(begin) * row_bytes, part.type,
                     rows.data(), dtype::f32, rows.size());
  }
  return rows;
}

std::vector<float> matrix_rows_in_order(const host_tensor& part, std::int64_t begin, std::int64_t count,
                                        std::span<const std::int32_t> order) {
  std::vector<float> natural = matrix_rows_as_f32(part, begin, count);
  if (order.empty()) return natural;
  const std::int64_t cols = part.matrix_cols();
  if (order.size() != static_cast<std::size_t>(cols))
    throw std::invalid_argument("matrix_rows_in_order: an input order of " + std::to_string(order.size()) +
                                " entries for " + std::to_string(cols) + " columns of " + part.name);
  std::vector<float> ordered(natural.size());
  for (std::int64_t i = 0; i < count; ++i) {
    const float* row = natural.data() + i * cols;
    float* out = ordered.data() + i * cols;
    for (std::int64_t j = 0; j < cols; ++j) out[j] = row[order[static_cast<std::size_t>(j)]];
  }
  return ordered;
}

namespace {

bool natural_order(std::span<const std::int32_t> order) {
  for (std::size_t j = 0; j < order.size(); ++j)
    if (order[j] != static_cast<std::int32_t>(j)) return false;
  return true;
}

// Throws unless `permutation` is empty or holds every one of `part`'s inputs once.
void check_permutation(const host_tensor& part, std::span<const std::int32_t> permutation) {
  if (permutation.empty()) return;
  const std::int64_t cols = part.matrix_cols();
  const auto fail = [&](const std::string& what) {
    throw std::invalid_argument("prepare_quantized_linear: weight " + part.name + " has an input permutation " + what);
  };
  if (permutation.size() != static_cast<std::size_t>(cols))
    fail("of " + std::to_string(permutation.size()) + " entries for " + std::to_string(cols) + " input features");
  std::vector<bool> seen(static_cast<std::size_t>(cols), false);
  for (const std::int32_t input : permutation) {
    if (input < 0 || input >= cols) fail("naming input " + std::to_string(input) + " of " + std::to_string(cols));
    if (seen[static_cast<std::size_t>(input)]) fail("naming input " + std::to_string(input) + " twice");
    seen[static_cast<std::size_t>(input)] = true;
  }
}

}  // namespace

bool same_input_order(std::span<const std::int32_t> a, std::span<const std::int32_t> b) {
  if (a.empty() || b.empty()) return natural_order(a.empty() ? b : a);
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

std::vector<std::int32_t> stacked_input_order(std::span<const host_tensor> parts, weight_quantization format) {
  for (const host_tensor& part : parts)
    if (part.stored_codes != nullptr) check_permutation(part, part.stored_codes->input_permutation());
  for (const host_tensor& part : parts) {
    if (part.stored_codes == nullptr || part.stored_codes->format() != format) continue;
    const std::span<const std::int32_t> permutation = part.stored_codes->input_permutation();
    if (natural_order(permutation)) return {};
    return {permutation.begin(), permutation.end()};
  }
  return {};
}

}  // namespace troupe

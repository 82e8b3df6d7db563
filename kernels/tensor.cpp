#include "kernels/tensor.hpp"

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

}  // namespace troupe

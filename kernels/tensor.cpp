#include "kernels/tensor.hpp"

#include "kernels/backend.hpp"

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

}  // namespace troupe

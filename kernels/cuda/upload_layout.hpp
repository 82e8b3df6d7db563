#pragma once
// Packs host arrays back to back (16-byte aligned) so that a step's
// metadata reaches the device in one copy.

#include <cstddef>
#include <cstring>
#include <vector>

namespace troupe::cuda {

/// Offsets of host arrays inside one upload; the arrays must stay alive
/// until write_to.
class upload_layout {
 public:
  /// Reserves room for `count` elements at `data`; returns their byte offset.
  template <class T>
  std::size_t add(const T* data, std::size_t count) {
    const std::size_t offset = (total_ + alignment - 1) / alignment * alignment;
    parts_.push_back({data, count * sizeof(T), offset});
    total_ = offset + count * sizeof(T);
    return offset;
  }
  template <class T>
  std::size_t add(const std::vector<T>& values) {
    return add(values.data(), values.size());
  }
  /// Bytes the upload spans.
  std::size_t bytes() const { return total_; }
  /// Copies every array to its offset inside `destination` (bytes() long).
  void write_to(void* destination) const {
    for (const part& p : parts_) {
      if (p.bytes > 0) std::memcpy(static_cast<char*>(destination) + p.offset, p.data, p.bytes);
    }
  }

 private:
  static constexpr std::size_t alignment = 16;
  struct part {
    const void* data;
    std::size_t bytes;
    std::size_t offset;
  };
  std::vector<part> parts_;
  std::size_t total_ = 0;
};

/// Typed device address `offset` bytes into `base`.
template <class T>
T* at_offset(void* base, std::size_t offset) {
  return reinterpret_cast<T*>(static_cast<char*>(base) + offset);
}

}  // namespace troupe::cuda

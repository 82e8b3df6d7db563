#pragma once
// A whole file mapped read-only into memory, so checkpoint tensors can be
// views into the page cache instead of copies.

#include <cstddef>
#include <filesystem>
#include <span>

namespace troupe {

/// A read-only, private memory mapping of one file. Move-only; unmaps on
/// destruction. Moving keeps the mapped address, so pointers into it stay valid.
class mapped_file {
 public:
  mapped_file() = default;
  /// Maps all of `path`; throws std::runtime_error naming the file when it
  /// cannot be opened, is not a regular file, or is empty.
  explicit mapped_file(const std::filesystem::path& path);
  mapped_file(mapped_file&& other) noexcept;
  mapped_file& operator=(mapped_file&& other) noexcept;
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  ~mapped_file();

  /// The mapped bytes (the file's size at the time it was mapped).
  std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(data_), size_}; }
  std::size_t size() const { return size_; }
  /// Asks the kernel to start reading [offset, offset + length) into the page
  /// cache in the background (madvise WILLNEED); a hint, never an error.
  void prefetch(std::size_t offset, std::size_t length) const;

 private:
  void unmap();

  void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace troupe

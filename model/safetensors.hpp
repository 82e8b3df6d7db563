#pragma once
// Memory-mapped reader of the safetensors format: an 8-byte little-endian
// header length N, N bytes of JSON mapping each tensor name to
// {dtype, shape, data_offsets} (offsets relative to the data that follows the
// header) plus an optional "__metadata__" object of strings, then the data.
// Every field is bounds-checked before use; tensors are zero-copy views into
// the mapping.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/tensor.hpp"
#include "model/mapped_file.hpp"

namespace troupe {

/// Largest header accepted, in bytes (the reference implementation's limit).
inline constexpr std::size_t safetensors_max_header_bytes = 100'000'000;

/// The safetensors dtype tag of `type` ("F32", "F16", "BF16").
std::string_view safetensors_dtype_name(dtype type);

/// An I32 tensor (the packed codes of AWQ / GPTQ checkpoints): little-endian
/// int32 elements, row-major, aligned.
struct int32_tensor {
  std::string name;
  std::vector<std::int64_t> shape;
  const std::int32_t* data = nullptr;
};

/// One open, validated .safetensors file. Move-only; moving keeps every
/// tensor's `data` pointer valid.
class safetensors_file {
 public:
  /// Maps `path` and validates its header and every tensor entry. Throws
  /// std::runtime_error whose text starts with the file name and names the
  /// offending tensor or field, e.g. "model.safetensors: tensor 'model.norm.weight':
  /// data_offsets [0, 12) do not match shape [4] × F32 (16 bytes)".
  explicit safetensors_file(const std::filesystem::path& path);
  safetensors_file(safetensors_file&&) noexcept = default;
  safetensors_file& operator=(safetensors_file&&) noexcept = default;

  const std::filesystem::path& path() const { return path_; }
  /// The file name used in error messages.
  const std::string& display_name() const { return display_name_; }
  /// Every tensor, in ascending order of its data offset. `data` points into
  /// the mapping (or, for the rare tensor not aligned to its element size in
  /// the file, into an aligned copy this object owns).
  const std::vector<host_tensor>& tensors() const { return tensors_; }
  /// The tensor called `name`, or nullptr (also for an I32 tensor).
  const host_tensor* find(std::string_view name) const;
  /// The I32 tensors, which tensors() leaves out.
  const std::vector<int32_tensor>& int32_tensors() const { return int32_tensors_; }
  /// The I32 tensor called `name`, or nullptr.
  const int32_tensor* find_int32(std::string_view name) const;
  /// The "__metadata__" entries (e.g. {"format": "pt"}).
  const std::map<std::string, std::string, std::less<>>& metadata() const { return metadata_; }
  /// Size of the file in bytes.
  std::size_t file_size() const { return file_.size(); }
  /// Starts reading the whole file into the page cache (madvise WILLNEED).
  void prefetch() const { file_.prefetch(0, file_.size()); }

 private:
  void parse_header();

  std::filesystem::path path_;
  std::string display_name_;
  mapped_file file_;
  std::vector<host_tensor> tensors_;
  std::vector<int32_tensor> int32_tensors_;
  std::map<std::string, std::size_t, std::less<>> by_name_;  ///< name -> index in tensors_ (SIZE_MAX: I32)
  std::map<std::string, std::string, std::less<>> metadata_;
  std::vector<std::unique_ptr<std::byte[]>> aligned_copies_;
};

}  // namespace troupe

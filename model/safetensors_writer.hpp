#pragma once
// Streams a .safetensors file to disk: the header first (every size is known
// up front), then each tensor's bytes generated chunk by chunk, so a
// checkpoint far larger than memory can be written.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "kernels/dtype.hpp"

namespace troupe {

/// One tensor to write.
struct safetensors_entry {
  std::string name;
  dtype type = dtype::f32;
  std::vector<std::int64_t> shape;

  /// numel × element size.
  std::uint64_t byte_size() const;
};

/// Produces bytes [offset, offset + out.size()) of the data of entry `index`.
/// Called with increasing offsets from 0 for each entry, entries in order;
/// `offset` and `out.size()` are multiples of the element size.
using tensor_filler = std::function<void(std::size_t index, std::uint64_t offset, std::span<std::byte> out)>;

/// The header bytes for `entries` stored back to back in order: the 8-byte
/// little-endian length, then compact JSON ("__metadata__" first when not
/// empty) padded with spaces to a multiple of 8 bytes so data stays aligned.
std::string safetensors_header(std::span<const safetensors_entry> entries,
                               const std::map<std::string, std::string>& metadata);

/// Writes `path` (created or truncated) and flushes it to disk. `on_written`,
/// when set, is told the data bytes written so far. Throws
/// std::runtime_error naming the path on I/O errors.
void write_safetensors(const std::filesystem::path& path, std::span<const safetensors_entry> entries,
                       const std::map<std::string, std::string>& metadata, const tensor_filler& fill,
                       const std::function<void(std::uint64_t)>& on_written = {});

}  // namespace troupe

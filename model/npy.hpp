#pragma once
// NumPy .npy files (format 1.0, little-endian float32, C order): what
// `troupe score` writes and the fidelity tests read.

#include <cstdint>
#include <filesystem>
#include <vector>

namespace troupe {

/// A float32 array read from a .npy file.
struct npy_array {
  std::vector<std::int64_t> shape;
  std::vector<float> data;  ///< row-major, product(shape) elements
};

/// Writes `data` with `shape` as a float32 .npy file. Throws std::runtime_error on I/O failure.
void write_npy(const std::filesystem::path& path, const std::vector<std::int64_t>& shape, const float* data);

/// Reads a little-endian float32 C-order .npy file. Throws std::runtime_error
/// naming the file when it is not one.
npy_array read_npy(const std::filesystem::path& path);

}  // namespace troupe

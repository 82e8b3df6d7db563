#pragma once
// Helpers shared by the fuzz targets: the input as text, split in two at
// the first NUL byte (targets that take two documents, e.g. a tokenizer.json
// and a text to encode), fixture files read once at start, and a scratch
// file for the readers that map files.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <unistd.h>

namespace troupe::fuzz {

/// The fuzzer's bytes as a string view.
inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// {before, after} the first NUL; {text, ""} when there is none.
inline std::pair<std::string_view, std::string_view> split_at_nul(std::string_view text) {
  const std::size_t nul = text.find('\0');
  if (nul == std::string_view::npos) return {text, {}};
  return {text.substr(0, nul), text.substr(nul + 1)};
}

/// A whole fixture file (path relative to tests/fixtures, or absolute).
inline std::string read_fixture(const std::string& path) {
  const std::string full = path.starts_with('/') ? path : std::string(TROUPE_FIXTURES_DIR) + "/" + path;
  std::ifstream in(full, std::ios::binary);
  if (!in) throw std::runtime_error("fuzz target: cannot read " + full);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// A per-process scratch file ending in `extension`, in memory-backed
/// /dev/shm when there is one: a disk write per input would dominate the run.
inline std::filesystem::path scratch_path(const std::string& extension) {
  const std::filesystem::path shm = "/dev/shm";
  const std::filesystem::path dir = std::filesystem::is_directory(shm) ? shm : std::filesystem::temp_directory_path();
  return dir / ("troupe-fuzz-" + std::to_string(::getpid()) + extension);
}

/// Replaces the contents of `path` with the fuzzer's bytes.
inline void write_input(const std::filesystem::path& path, const std::uint8_t* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

}  // namespace troupe::fuzz

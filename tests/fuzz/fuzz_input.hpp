#pragma once
// Helpers shared by the fuzz targets: the input as text, split in two at
// the first NUL byte (targets that take two documents, e.g. a tokenizer.json
// and a text to encode), and fixture files read once at start.

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

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

}  // namespace troupe::fuzz

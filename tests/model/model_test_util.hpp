#pragma once
// Helpers shared by the model_tests suite: raw file writing and assertions
// on exception text (temporary directories: tests/temp_dir.hpp).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tests/temp_dir.hpp"

namespace troupe::testing {

/// Writes `bytes` to `path`, creating or truncating it.
inline void write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

/// Reads a whole file.
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// A safetensors file made by hand: the 8-byte little-endian `header_length`
/// (normally header.size()), the header text, then `data`.
inline std::string raw_safetensors(std::string_view header, std::string_view data, std::uint64_t header_length) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((header_length >> (8 * i)) & 0xff);
  out += header;
  out += data;
  return out;
}
inline std::string raw_safetensors(std::string_view header, std::string_view data) {
  return raw_safetensors(header, data, header.size());
}

/// max |got − reference| / max |reference| over all elements (logit comparisons).
inline double relative_max_error(const std::vector<float>& got, const std::vector<float>& reference) {
  double worst = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(double{got[i]} - double{reference[i]}));
    scale = std::max(scale, std::abs(double{reference[i]}));
  }
  return worst / scale;
}

/// The message of the std::exception `action` throws ("" when it throws none).
inline std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const std::exception& error) {
    return error.what();
  }
  return "";
}

}  // namespace troupe::testing

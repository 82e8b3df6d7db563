#include "model/npy.hpp"

#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>

namespace troupe {

namespace {

constexpr char magic[] = "\x93NUMPY";

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i)
    text += std::to_string(shape[i]) + (shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : ""));
  return text + ")";
}

std::vector<std::int64_t> parse_shape(const std::string& header, const std::string& file) {
  const auto key = header.find("'shape':");
  const auto open = header.find('(', key);
  const auto close = header.find(')', open);
  if (key == std::string::npos || open == std::string::npos || close == std::string::npos)
    throw std::runtime_error(file + ": .npy header has no shape");
  std::vector<std::int64_t> shape;
  std::size_t pos = open + 1;
  while (pos < close) {
    while (pos < close && (header[pos] == ' ' || header[pos] == ',')) ++pos;
    if (pos >= close) break;
    std::size_t used = 0;
    shape.push_back(std::stoll(header.substr(pos, close - pos), &used));
    if (shape.back() < 0) throw std::runtime_error(file + ": .npy shape is negative");
    pos += used;
  }
  return shape;
}

}  // namespace

void write_npy(const std::filesystem::path& path, const std::vector<std::int64_t>& shape, const float* data) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_text(shape) + ", }";
  // Magic (6) + version (2) + length (2) + header + '\n' is padded to 64 bytes.
  const std::size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error(path.string() + ": cannot open for writing");
  out.write(magic, 6);
  const char version[2] = {1, 0};
  out.write(version, 2);
  const auto length = static_cast<std::uint16_t>(header.size());
  const char length_bytes[2] = {static_cast<char>(length & 0xff), static_cast<char>(length >> 8)};
  out.write(length_bytes, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  std::int64_t count = 1;
  for (auto d : shape) count *= d;
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(count * sizeof(float)));
  if (!out) throw std::runtime_error(path.string() + ": write failed");
}

npy_array read_npy(const std::filesystem::path& path) {
  const std::string file = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(file + ": cannot open");
  char prefix[10];
  if (!in.read(prefix, 10) || std::memcmp(prefix, magic, 6) != 0) throw std::runtime_error(file + ": not a .npy file");
  if (prefix[6] != 1) throw std::runtime_error(file + ": unsupported .npy version");
  const std::size_t header_length =
      static_cast<unsigned char>(prefix[8]) | (static_cast<unsigned char>(prefix[9]) << 8);
  std::string header(header_length, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(header_length)))
    throw std::runtime_error(file + ": truncated header");
  if (header.find("'descr': '<f4'") == std::string::npos)
    throw std::runtime_error(file + ": only little-endian float32 is supported");
  if (header.find("'fortran_order': False") == std::string::npos)
    throw std::runtime_error(file + ": only C order is supported");
  npy_array array;
  array.shape = parse_shape(header, file);
  std::int64_t count = 1;
  for (auto d : array.shape) count *= d;
  array.data.resize(static_cast<std::size_t>(count));
  if (!in.read(reinterpret_cast<char*>(array.data.data()), static_cast<std::streamsize>(count * sizeof(float))))
    throw std::runtime_error(file + ": truncated data");
  return array;
}

}  // namespace troupe

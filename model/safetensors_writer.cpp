#include "model/safetensors_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "model/safetensors.hpp"

namespace troupe {

namespace {

constexpr std::uint64_t chunk_bytes = 8 << 20;

class output_file {
 public:
  explicit output_file(const std::filesystem::path& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("cannot create");
  }
  output_file(const output_file&) = delete;
  output_file& operator=(const output_file&) = delete;
  ~output_file() {
    if (fd_ >= 0) ::close(fd_);
  }

  void write(const void* data, std::size_t size) {
    const char* bytes = static_cast<const char*>(data);
    while (size > 0) {
      const ssize_t written = ::write(fd_, bytes, size);
      if (written < 0 && errno == EINTR) continue;
      if (written <= 0) fail("cannot write");
      bytes += written;
      size -= static_cast<std::size_t>(written);
    }
  }

  void sync_and_close() {
    if (::fsync(fd_) != 0) fail("cannot flush");
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("cannot close");
  }

 private:
  [[noreturn]] void fail(const char* what) const {
    throw std::runtime_error(path_.string() + ": " + what + ": " + std::strerror(errno));
  }

  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace

std::uint64_t safetensors_entry::byte_size() const {
  std::uint64_t elements = 1;
  for (auto dim : shape) elements *= static_cast<std::uint64_t>(dim);
  return elements * dtype_size(type);
}

std::string safetensors_header(std::span<const safetensors_entry> entries,
                               const std::map<std::string, std::string>& metadata) {
  boost::json::object header;
  if (!metadata.empty()) {
    boost::json::object meta;
    for (const auto& [key, value] : metadata) meta[key] = value;
    header["__metadata__"] = std::move(meta);
  }
  std::uint64_t offset = 0;
  for (const safetensors_entry& entry : entries) {
    boost::json::array shape;
    for (auto dim : entry.shape) shape.push_back(dim);
    const std::uint64_t end = offset + entry.byte_size();
    header[entry.name] = {{"dtype", std::string(safetensors_dtype_name(entry.type))},
                          {"shape", std::move(shape)},
                          {"data_offsets", boost::json::array{offset, end}}};
    offset = end;
  }
  std::string json = boost::json::serialize(header);
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  return out + json;
}

void write_safetensors(const std::filesystem::path& path, std::span<const safetensors_entry> entries,
                       const std::map<std::string, std::string>& metadata, const tensor_filler& fill,
                       const std::function<void(std::uint64_t)>& on_written) {
  output_file file(path);
  const std::string header = safetensors_header(entries, metadata);
  file.write(header.data(), header.size());
  auto buffer = std::make_unique<std::byte[]>(chunk_bytes);
  std::uint64_t written = 0;
  for (std::size_t index = 0; index < entries.size(); ++index) {
    const std::uint64_t size = entries[index].byte_size();
    for (std::uint64_t offset = 0; offset < size; offset += chunk_bytes) {
      const std::uint64_t length = std::min(chunk_bytes, size - offset);
      const std::span<std::byte> chunk(buffer.get(), length);
      fill(index, offset, chunk);
      file.write(chunk.data(), chunk.size());
      written += length;
      if (on_written) on_written(written);
    }
  }
  file.sync_and_close();
}

}  // namespace troupe

#include "model/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

namespace troupe {

namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what) {
  throw std::runtime_error(path.string() + ": " + what);
}

// Closes the descriptor on every path out of the constructor; the mapping
// keeps its own reference to the file.
struct file_descriptor {
  int fd = -1;
  ~file_descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

mapped_file::mapped_file(const std::filesystem::path& path) {
  file_descriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat info {};
  if (::fstat(file.fd, &info) != 0) fail(path, std::string("cannot stat: ") + std::strerror(errno));
  if (!S_ISREG(info.st_mode)) fail(path, "not a regular file");
  if (info.st_size == 0) fail(path, "file is empty");
  const auto size = static_cast<std::size_t>(info.st_size);
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file.fd, 0);
  if (data == MAP_FAILED) fail(path, std::string("cannot map: ") + std::strerror(errno));
  data_ = data;
  size_ = size;
}

mapped_file::mapped_file(mapped_file&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

mapped_file& mapped_file::operator=(mapped_file&& other) noexcept {
  if (this != &other) {
    unmap();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

mapped_file::~mapped_file() { unmap(); }

void mapped_file::unmap() {
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

void mapped_file::prefetch(std::size_t offset, std::size_t length) const {
  if (data_ == nullptr || offset >= size_) return;
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t begin = offset / page * page;  // madvise wants a page-aligned start
  const std::size_t end = std::min(size_, offset + std::min(length, size_ - offset));
  ::madvise(static_cast<char*>(data_) + begin, end - begin, MADV_WILLNEED);
}

}  // namespace troupe

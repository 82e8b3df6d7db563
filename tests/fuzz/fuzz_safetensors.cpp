// Fuzzes the safetensors header parser: the input is written to a file
// (the reader maps files) and opened; every tensor the reader accepts is
// read at both ends, so a view past the mapping trips AddressSanitizer.
// Only std::runtime_error (naming the file and field) may escape.

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "model/safetensors.hpp"

namespace {

// In memory-backed /dev/shm when there is one: a disk write per input would dominate the run.
std::filesystem::path scratch_path() {
  const std::filesystem::path shm = "/dev/shm";
  const std::filesystem::path dir = std::filesystem::is_directory(shm) ? shm : std::filesystem::temp_directory_path();
  return dir / ("troupe-fuzz-" + std::to_string(::getpid()) + ".safetensors");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path path = scratch_path();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    const troupe::safetensors_file file(path);
    volatile unsigned sum = 0;
    for (const troupe::host_tensor& tensor : file.tensors()) {
      const std::size_t bytes = tensor.byte_size();
      if (bytes == 0) continue;
      const auto* first = static_cast<const unsigned char*>(tensor.data);
      sum = sum + first[0] + first[bytes - 1];
      if (file.find(tensor.name) == nullptr) __builtin_trap();  // every listed tensor must be findable
    }
  } catch (const std::runtime_error&) {
    // refused with the file and field named
  }
  return 0;
}

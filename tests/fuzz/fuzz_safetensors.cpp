// Fuzzes the safetensors header parser: the input is written to a file
// (the reader maps files) and opened; every tensor the reader accepts is
// read at both ends, so a view past the mapping trips AddressSanitizer.
// Only std::runtime_error (naming the file and field) may escape.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <stdexcept>

#include "fuzz_input.hpp"
#include "model/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path path = troupe::fuzz::scratch_path(".safetensors");
  troupe::fuzz::write_input(path, data, size);
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

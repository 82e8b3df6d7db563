// Fuzzes the reader of Hugging Face AWQ / GPTQ checkpoints: the input is a
// config.json text, a NUL, then a .safetensors file. When the config holds
// a quantization_config that parses, every quantised projection the reader
// accepts is expanded (4 bits: to bf16 through its int4 source, with its
// act-order permutation; 8 bits: to f16 by the reader itself), so a code,
// zero, scale or g_idx read past a tensor trips AddressSanitizer. Only std::runtime_error
// (naming the file and field) may escape.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include "fuzz_input.hpp"
#include "model/hf_int4.hpp"
#include "model/model_config.hpp"
#include "model/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path path = troupe::fuzz::scratch_path(".safetensors");
  const auto [config_text, weights] = troupe::fuzz::split_at_nul(troupe::fuzz::as_text(data, size));
  try {
    const std::optional<troupe::hf_int4_config> quant = troupe::parse_hf_int4_config(config_text);
    if (!quant) return 0;
    const troupe::model_config config = troupe::parse_model_config(config_text);
    troupe::fuzz::write_input(path, reinterpret_cast<const std::uint8_t*>(weights.data()), weights.size());
    std::vector<troupe::safetensors_file> files;
    files.emplace_back(path);
    troupe::hf_tensor_map tensors;
    for (const troupe::host_tensor& tensor : files.front().tensors()) tensors.emplace(tensor.name, &tensor);
    std::vector<std::unique_ptr<std::byte[]>> storage;
    for (const troupe::host_tensor& matrix : troupe::hf_int4_weights(*quant, config, files, tensors, storage)) {
      if (matrix.stored_codes == nullptr && matrix.data == nullptr) __builtin_trap();
      if (matrix.stored_codes == nullptr) continue;
      const troupe::host_tensor expanded = troupe::expand_int4(matrix, storage);
      if (expanded.data == nullptr || expanded.stored_codes || expanded.shape != matrix.shape) __builtin_trap();
    }
  } catch (const std::runtime_error&) {
    // refused with the file and field named
  }
  return 0;
}

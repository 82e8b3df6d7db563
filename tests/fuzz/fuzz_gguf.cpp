// Fuzzes the GGUF readers: the input is written to a file (the reader maps
// files) and opened; what the reader accepts is read further the way a
// checkpoint load does: every metadata array and tensor touched at both ends,
// the model and generation configs, every tensor the forward pass reads
// converted (dequantised, RoPE rows put back) and, as a quantised model's
// load reads its matrices, the first and last rows of each through its
// stored-code source (the 4- and 5-bit types, IQ4_*, Q6_K, Q3_K) and its
// on-demand row source, the embedded tokenizer built and run on a short
// text, and the chat templates collected. Each stage may refuse the file
// with std::runtime_error (naming the file and the key or tensor); nothing
// else may escape.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fuzz_input.hpp"
#include "kernels/stored_code_source.hpp"
#include "model/gguf.hpp"
#include "model/gguf_model.hpp"
#include "model/gguf_stored_codes.hpp"
#include "model/gguf_tokenizer.hpp"

namespace {

using troupe::gguf_file;

volatile unsigned sink = 0;

void touch(const void* data, std::size_t bytes) {
  if (bytes == 0) return;
  const auto* first = static_cast<const unsigned char*>(data);
  sink = sink + first[0] + first[bytes - 1];
}

// A view past the mapping or a wrong count trips AddressSanitizer here.
void touch_views(const gguf_file& file) {
  for (const auto& [key, value] : file.metadata()) {
    if (file.find(key) != &value) __builtin_trap();  // every key must be findable
    touch(value.text.data(), value.text.size());
    for (std::string_view text : value.strings) touch(text.data(), text.size());
    touch(value.elements.data(), value.elements.size());
    if (value.type == troupe::gguf_type::array && !value.elements.empty()) {
      sink = sink + static_cast<unsigned>(value.number_at(0) != 0) +
             static_cast<unsigned>(value.number_at(value.count - 1) != 0);
    }
  }
  for (const troupe::gguf_tensor& tensor : file.tensors()) {
    if (file.find_tensor(tensor.name) != &tensor) __builtin_trap();
    touch(tensor.data, tensor.bytes);
  }
}

// Rows 0 and rows - 1 of a 2-D tensor through the readers a quantised load
// hands the backend instead of an expanded copy.
void read_end_rows(const troupe::gguf_tensor& tensor, std::int64_t rope_heads) {
  if (tensor.dims.size() != 2 || tensor.dims[0] == 0 || tensor.dims[1] == 0 || tensor.dims[0] > (1u << 20)) return;
  const auto cols = static_cast<std::int64_t>(tensor.dims[0]), rows = static_cast<std::int64_t>(tensor.dims[1]);
  std::vector<float> values(static_cast<std::size_t>(cols));
  const auto source = troupe::gguf_row_source(tensor, rope_heads);
  source->read_rows(0, 1, values.data());
  source->read_rows(rows - 1, 1, values.data());
  if (!troupe::gguf_stored_code_format(tensor.type) || cols % troupe::stored_code_group != 0) return;
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(cols));
  std::vector<std::uint16_t> scales(static_cast<std::size_t>(cols / troupe::stored_code_group)), offsets(scales.size());
  const auto stored = troupe::gguf_stored_code_source(tensor, rope_heads);
  // int6 (Q6_K) and int4_g16 (Q3_K) have a scale per 16 inputs, and
  // read_rows refuses them as a caller's mistake. (Compared here rather than
  // through quantization_half_group_scales, which this target does not link.)
  const troupe::weight_quantization format = stored->format();
  const bool half_groups =
      format == troupe::weight_quantization::int6 || format == troupe::weight_quantization::int4_g16;
  if (stored->has_block_factors()) {  // before read_rows, which refuses blocks whose f16 products overflow
    const std::int64_t blocks = cols / troupe::stored_code_factor_block;
    const std::int64_t groups = cols / (half_groups ? troupe::half_scale_group : troupe::stored_code_group);
    std::vector<std::uint16_t> block_scales(static_cast<std::size_t>(blocks)), block_offsets(block_scales.size());
    std::vector<std::uint8_t> scale_codes(static_cast<std::size_t>(groups)), offset_codes(scale_codes.size());
    for (const std::int64_t row : {std::int64_t{0}, rows - 1}) {
      stored->read_block_factors(row, 1, block_scales.data(), block_offsets.data(), scale_codes.data(),
                                 offset_codes.data());
      stored->read_codes(row, 1, codes.data());
    }
  }
  if (half_groups) return;
  stored->read_rows(0, 1, codes.data(), scales.data(), offsets.data());
  stored->read_rows(rows - 1, 1, codes.data(), scales.data(), offsets.data());
}

// As checkpoint::open_gguf: Llama's q and k rows come back from llama.cpp's RoPE order.
void convert_tensors(const gguf_file& file, const std::optional<troupe::model_config>& config) {
  const troupe::dtype target = troupe::gguf_weight_dtype(file);
  troupe::gguf_buffers storage;
  for (const troupe::gguf_tensor& tensor : file.tensors()) {
    const std::optional<std::string> name = troupe::gguf_hf_tensor_name(tensor.name);
    if (!name) continue;
    std::int64_t rope_heads = 0;
    if (config && config->architecture == troupe::model_architecture::llama) {
      if (name->ends_with("q_proj.weight")) rope_heads = config->num_attention_heads;
      if (name->ends_with("k_proj.weight")) rope_heads = config->num_key_value_heads;
    }
    try {
      const troupe::host_tensor out = troupe::convert_gguf_tensor(tensor, *name, target, rope_heads, storage);
      touch(out.data, out.byte_size());
      read_end_rows(tensor, rope_heads);
    } catch (const std::runtime_error&) {
      // refused with the tensor named
    }
  }
}

std::optional<troupe::model_config> model_config_of(const gguf_file& file) {
  try {
    return troupe::gguf_model_config(file);
  } catch (const std::runtime_error&) {
    return std::nullopt;
  }
}

void read_tokenizer(const gguf_file& file) {
  try {
    const auto tok = troupe::load_gguf_tokenizer(file);
    const auto ids = tok->encode("Hello world, 123 caf\xc3\xa9!\n", true);
    sink = sink + static_cast<unsigned>(tok->decode(ids, false).size());
  } catch (const std::runtime_error&) {
    // refused with the file and key named
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path path = troupe::fuzz::scratch_path(".gguf");
  troupe::fuzz::write_input(path, data, size);
  try {
    const gguf_file file(path);
    touch_views(file);
    const std::optional<troupe::model_config> config = model_config_of(file);
    try {
      sink = sink + static_cast<unsigned>(troupe::gguf_generation_config(file).eos_token_ids.size());
    } catch (const std::runtime_error&) {
      // refused with the key named
    }
    convert_tensors(file, config);
    read_tokenizer(file);
    sink = sink + static_cast<unsigned>(troupe::gguf_chat_template(file).templates.size());
  } catch (const std::runtime_error&) {
    // refused with the file and the key or tensor named
  }
  return 0;
}

#include "model/gguf_int4.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

#include "model/gguf_model.hpp"

namespace troupe {

namespace {

class gguf_block_source final : public int4_source {
 public:
  gguf_block_source(const gguf_tensor& tensor, std::int64_t rope_heads)
      : rows_(tensor, rope_heads), asymmetric_(tensor.type == ggml_type::q4_1) {}

  weight_quantization format() const override {
    return asymmetric_ ? weight_quantization::int4_asym : weight_quantization::int4;
  }

  void read_rows(std::int64_t first, std::int64_t count, std::uint8_t* codes, std::uint16_t* scales,
                 std::uint16_t* offsets) const override {
    const std::uint64_t blocks = rows_.row_length / 32;
    const std::size_t header = asymmetric_ ? 4 : 2;
    for (std::int64_t i = 0; i < count; ++i) {
      const std::byte* block = rows_.row(static_cast<std::uint64_t>(first + i));
      for (std::uint64_t b = 0; b < blocks; ++b, block += header + 16) {
        std::memcpy(scales++, block, 2);
        if (asymmetric_) std::memcpy(offsets++, block + 2, 2);
        // Byte j holds element j in its low nibble and element j + 16 in its
        // high one. Copied out first so that the code stores cannot alias the
        // bytes they are read from, and the loop vectorises.
        std::uint8_t packed[16];
        std::memcpy(packed, block + header, 16);
        for (int j = 0; j < 16; ++j) {
          codes[j] = packed[j] & 0x0f;
          codes[j + 16] = packed[j] >> 4;
        }
        codes += 32;
      }
    }
  }

 private:
  gguf_rows rows_;
  bool asymmetric_;
};

}  // namespace

std::optional<weight_quantization> gguf_int4_format(ggml_type type) {
  if (type == ggml_type::q4_0) return weight_quantization::int4;
  if (type == ggml_type::q4_1) return weight_quantization::int4_asym;
  return std::nullopt;
}

std::shared_ptr<const int4_source> gguf_int4_source(const gguf_tensor& tensor, std::int64_t rope_heads) {
  if (!gguf_int4_format(tensor.type) || tensor.dims.size() != 2)
    throw std::runtime_error("tensor '" + tensor.name + "': a " + std::string(ggml_type_name(tensor.type)) +
                             " tensor of " + std::to_string(tensor.dims.size()) +
                             " dimensions is not a Q4_0 / Q4_1 matrix");
  return std::make_shared<gguf_block_source>(tensor, rope_heads);
}

}  // namespace troupe

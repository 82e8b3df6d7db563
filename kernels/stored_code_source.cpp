#include "kernels/stored_code_source.hpp"

#include <vector>

#include "kernels/dtype.hpp"

namespace troupe {

namespace {

// int6 and int4_g16 (GGUF Q6_K, Q3_K): their scales per 16 inputs come only as block factors,
// block_scales[h / 16] · scale_codes[h], each product exact in f32 (an f16
// times a byte), as a kernel holding the factors makes it.
void decode_half_group_rows(const stored_code_source& source, std::int64_t first, std::int64_t count, std::int64_t cols,
                            float* out) {
  const std::int64_t groups = cols / half_scale_group, blocks = cols / stored_code_factor_block;
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(count * cols));
  std::vector<std::uint8_t> scale_codes(static_cast<std::size_t>(count * groups));
  std::vector<std::uint16_t> block_scales(static_cast<std::size_t>(count * blocks));
  source.read_codes(first, count, codes.data());
  source.read_block_factors(first, count, block_scales.data(), nullptr, scale_codes.data(), nullptr);
  const std::span<const std::int32_t> permutation = source.input_permutation();
  for (std::int64_t i = 0; i < count; ++i) {
    for (std::int64_t j = 0; j < cols; ++j) {
      const auto h = static_cast<std::size_t>(i * groups + j / half_scale_group);
      const float factor =
          f16_to_float(block_scales[static_cast<std::size_t>(i * blocks + j / stored_code_factor_block)]);
      const float scale = factor * static_cast<float>(static_cast<std::int8_t>(scale_codes[h]));
      const std::int64_t k = permutation.empty() ? j : permutation[static_cast<std::size_t>(j)];
      out[i * cols + k] =
          stored_code_value(source.format(), codes[static_cast<std::size_t>(i * cols + j)], scale, 0.0f);
    }
  }
}

}  // namespace

void decode_stored_code_rows(const stored_code_source& source, std::int64_t first, std::int64_t count,
                             std::int64_t cols, float* out) {
  const weight_quantization format = source.format();
  if (quantization_half_group_scales(format)) return decode_half_group_rows(source, first, count, cols, out);
  const std::int64_t groups = cols / stored_code_group;
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(count * cols));
  std::vector<std::uint16_t> scales(static_cast<std::size_t>(count * groups)), offsets(scales.size());
  source.read_rows(first, count, codes.data(), scales.data(), offsets.data());
  const std::span<const std::int32_t> permutation = source.input_permutation();
  for (std::int64_t i = 0; i < count; ++i) {
    for (std::int64_t j = 0; j < cols; ++j) {
      const auto g = static_cast<std::size_t>(i * groups + j / stored_code_group);
      const std::int64_t k = permutation.empty() ? j : permutation[static_cast<std::size_t>(j)];
      // offsets[g] is left as it was for the formats without offsets: unread.
      const float offset = quantization_group_offsets(format) ? f16_to_float(offsets[g]) : 0.0f;
      out[i * cols + k] =
          stored_code_value(format, codes[static_cast<std::size_t>(i * cols + j)], f16_to_float(scales[g]), offset);
    }
  }
}

}  // namespace troupe

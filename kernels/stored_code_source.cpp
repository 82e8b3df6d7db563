#include "kernels/stored_code_source.hpp"

#include <vector>

#include "kernels/dtype.hpp"

namespace troupe {

void decode_stored_code_rows(const stored_code_source& source, std::int64_t first, std::int64_t count,
                             std::int64_t cols, float* out) {
  const std::int64_t groups = cols / stored_code_group;
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(count * cols));
  std::vector<std::uint16_t> scales(static_cast<std::size_t>(count * groups)), offsets(scales.size());
  source.read_rows(first, count, codes.data(), scales.data(), offsets.data());
  const weight_quantization format = source.format();
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

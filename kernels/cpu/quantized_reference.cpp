#include "kernels/cpu/quantized_weights.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

// The scalar references of quantized_weights.hpp: the weights a layout
// holds, decoded one at a time, activation rows quantised by the kernels'
// rule, and the quantised dot product in double. The kernels (their own
// code, in each ISA's namespace) are tested against these.

namespace troupe::cpu {

float group_scale(const quantized_matrix& w, std::int64_t g) {
  if (half_group_scales(w.format))
    throw std::logic_error("group_scale: an int6 or int4_g16 group has two scales (half_group_scale)");
  if (w.block_scales == nullptr) return f16_to_float(w.group_scales[g]);
  const int code =
      signed_scale_codes(w.format) ? static_cast<std::int8_t>(w.scale_codes[g]) : static_cast<int>(w.scale_codes[g]);
  return f16_to_float(w.block_scales[g / groups_per_factor_block]) * static_cast<float>(code);
}

float half_group_scale(const quantized_matrix& w, std::int64_t g, int half) {
  const auto code = static_cast<std::int8_t>(w.scale_codes[half_scale_code_index(g, half)]);
  return f16_to_float(w.block_scales[g / groups_per_factor_block]) * static_cast<float>(code);
}

float group_offset(const quantized_matrix& w, std::int64_t g) {
  if (w.block_offsets != nullptr)
    return f16_to_float(w.block_offsets[g / groups_per_factor_block]) * static_cast<float>(w.offset_codes[g]);
  return w.group_offsets != nullptr ? f16_to_float(w.group_offsets[g]) : 0.0f;
}

float dequantized_weight(const quantized_matrix& w, std::int64_t n, std::int64_t k) {
  const int code = stored_code(w, n, k);
  if (w.format == qformat::int8) return w.row_scales[n] * static_cast<float>(code - 128);
  const std::int64_t group = n * (w.padded_cols / quant_group) + k / quant_group;
  const auto format = static_cast<weight_quantization>(w.format);
  if (half_group_scales(w.format))
    return stored_code_value(format, code, half_group_scale(w, group, static_cast<int>(k % quant_group / 16)), 0.0f);
  return stored_code_value(format, code, group_scale(w, group), group_offset(w, group));
}

reference_rows quantize_rows_reference(const float* x, std::int64_t m, std::int64_t cols, std::int64_t stride,
                                       std::int64_t padded_cols) {
  reference_rows out;
  out.padded_cols = padded_cols;
  const std::int64_t groups = padded_cols / quant_group;
  out.codes.assign(static_cast<std::size_t>(m * padded_cols), 0);
  out.scales.assign(static_cast<std::size_t>(m * groups), 0.0f);
  out.sums.assign(static_cast<std::size_t>(m * groups), 0.0f);
  out.code_sums.assign(static_cast<std::size_t>(m * groups), 0);
  out.half_starts.assign(static_cast<std::size_t>(m * 2 * groups), 0);
  for (std::int64_t r = 0; r < m; ++r) {
    for (std::int64_t g = 0; g < groups; ++g) {
      float amax = 0.0f;
      for (std::int64_t k = g * quant_group; k < std::min(cols, (g + 1) * quant_group); ++k)
        amax = std::max(amax, std::fabs(x[r * stride + k]));
      // 0 where 127 / amax overflows (0 < amax < 127 / FLT_MAX): such a group codes as zeros.
      const float quotient = amax > 0.0f ? 127.0f / amax : 0.0f;
      const float inverse = quotient <= std::numeric_limits<float>::max() ? quotient : 0.0f;
      int sum = 0, low_sum = 0;
      for (std::int64_t k = g * quant_group; k < std::min(cols, (g + 1) * quant_group); ++k) {
        // A non-finite input (NaN, or ±inf times a zero inverse) codes as 0.
        const float scaled = x[r * stride + k] * inverse;
        const int code = std::fabs(scaled) < 128.0f ? static_cast<int>(std::rint(scaled)) : 0;
        out.codes[static_cast<std::size_t>(r * padded_cols + interleaved_position(k))] = static_cast<std::int8_t>(code);
        sum += code;
        low_sum += k % quant_group < 16 ? code : 0;
      }
      out.scales[static_cast<std::size_t>(r * groups + g)] = amax / 127.0f;
      out.sums[static_cast<std::size_t>(r * groups + g)] = amax / 127.0f * static_cast<float>(sum);
      out.code_sums[static_cast<std::size_t>(r * groups + g)] = sum;
      out.half_starts[static_cast<std::size_t>(r * 2 * groups + g)] = -32 * low_sum;
      out.half_starts[static_cast<std::size_t>(r * 2 * groups + groups + g)] = -32 * (sum - low_sum);
    }
  }
  return out;
}

double quantized_dot_reference(const quantized_matrix& w, const reference_rows& x, std::int64_t m, std::int64_t n) {
  double total = 0.0;
  const std::int64_t groups = x.padded_cols / quant_group;
  for (std::int64_t k = 0; k < w.cols; ++k) {
    const double activation = static_cast<double>(x.scales[static_cast<std::size_t>(m * groups + k / quant_group)]) *
                              x.codes[static_cast<std::size_t>(m * x.padded_cols + interleaved_position(k))];
    total += static_cast<double>(dequantized_weight(w, n, k)) * activation;
  }
  return total;
}

}  // namespace troupe::cpu

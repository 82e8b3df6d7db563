// The device layout of quantised matrices and the host packing into it.
// The codes come from the CPU backend's quantiser (round to nearest, f16
// scales rounded before the codes are chosen; int4's block factors, whose
// products the device holds rounded to f16), read back one at a time, or
// from a checkpoint's stored codes as they are, and are rewritten in the
// natural feature order the CUDA kernels walk.

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/quantized_weights.hpp"
#include "kernels/cuda/quantized_linear.hpp"

namespace troupe::cuda {

namespace {

// Rows quantised by the CPU quantiser at a time (bounds the scratch buffer).
constexpr std::int64_t rows_per_chunk = 64;

bool nibbles(weight_quantization format) { return format != weight_quantization::int8; }

std::uint16_t f16_at(const void* image, std::size_t offset, std::int64_t index) {
  std::uint16_t bits = 0;
  std::memcpy(&bits, static_cast<const char*>(image) + offset + static_cast<std::size_t>(index) * 2, 2);
  return bits;
}

// Row n's bytes of int5_asym's plane of fifth bits (bit k % 8 of byte k / 8: feature k's).
std::size_t fifth_bits_of_row(const quantized_device_layout& layout, std::int64_t n) {
  return layout.fifth_bits_at + static_cast<std::size_t>(n * layout.padded_cols / 8);
}

// Writes one row of 4- or 5-bit `codes` ([padded_cols], one per byte in
// input order), its f16 group `scales` and, for the formats with offsets,
// `offsets` as row `n` of the image.
void write_code_row(const std::uint8_t* codes, const std::uint16_t* scales, const std::uint16_t* offsets,
                    const quantized_device_layout& layout, unsigned char* image, std::int64_t n) {
  unsigned char* nibble_bytes = image + static_cast<std::size_t>(n) * layout.row_bytes;
  const bool five_bits = layout.format == weight_quantization::int5_asym;
  unsigned char* fifth_bits = five_bits ? image + fifth_bits_of_row(layout, n) : nullptr;
  for (std::int64_t k = 0; k < layout.padded_cols; k += 2) {
    const int low = codes[k], high = codes[k + 1];
    nibble_bytes[k / 2] = static_cast<unsigned char>((low & 0x0f) | (high & 0x0f) << 4);
    if (!five_bits) continue;
    if (k % 8 == 0) fifth_bits[k / 8] = 0;  // each byte written whole, whatever the image held
    fifth_bits[k / 8] |= static_cast<unsigned char>((low >> 4) << (k % 8) | (high >> 4) << (k % 8 + 1));
  }
  const std::size_t group_bytes = static_cast<std::size_t>(layout.groups) * 2;
  const std::size_t at = static_cast<std::size_t>(n) * group_bytes;
  std::memcpy(image + layout.scales_at + at, scales, group_bytes);
  if (quantization_group_offsets(layout.format)) std::memcpy(image + layout.offsets_at + at, offsets, group_bytes);
}

// Rewrites row `row` of a CPU-quantised chunk as row `n` of the image;
// `codes` is room for padded_cols 4- or 5-bit codes, `scales` for a row's
// f16 group scales (made from block factors).
void copy_row(const cpu::quantized_matrix& cpu_rows, std::int64_t row, const quantized_device_layout& layout,
              unsigned char* image, std::int64_t n, std::vector<std::uint8_t>& codes,
              std::vector<std::uint16_t>& scales) {
  if (!nibbles(layout.format)) {
    unsigned char* codes = image + static_cast<std::size_t>(n) * layout.row_bytes;
    for (std::int64_t k = 0; k < layout.padded_cols; ++k)
      codes[k] = static_cast<unsigned char>(static_cast<std::int8_t>(cpu::stored_code(cpu_rows, row, k) - 128));
    std::memcpy(image + layout.scales_at + static_cast<std::size_t>(n) * 4, cpu_rows.row_scales + row, 4);
    return;
  }
  for (std::int64_t k = 0; k < layout.padded_cols; ++k)
    codes[static_cast<std::size_t>(k)] = static_cast<std::uint8_t>(cpu::stored_code(cpu_rows, row, k));
  const std::int64_t cpu_groups = cpu_rows.padded_cols / cpu::quant_group;
  if (cpu_rows.block_scales != nullptr) {  // int4: each group's product rounded once to f16
    scales.resize(static_cast<std::size_t>(cpu_groups));
    for (std::int64_t g = 0; g < cpu_groups; ++g)
      scales[static_cast<std::size_t>(g)] = float_to_f16(cpu::group_scale(cpu_rows, row * cpu_groups + g));
    write_code_row(codes.data(), scales.data(), nullptr, layout, image, n);
    return;
  }
  write_code_row(codes.data(), cpu_rows.group_scales + row * cpu_groups,
                 cpu_rows.group_offsets != nullptr ? cpu_rows.group_offsets + row * cpu_groups : nullptr, layout, image,
                 n);
}

}  // namespace

quantized_device_layout device_layout_for(weight_quantization format, std::int64_t rows, std::int64_t cols) {
  static_assert(device_quant_group == cpu::quant_group, "the CPU quantiser's groups are the device's");
  constexpr std::size_t alignment = 256;
  // int5_asym: int4_asym's nibbles, scales and offsets, then the plane of fifth bits.
  const bool five_bits = format == weight_quantization::int5_asym;
  const cpu::quantized_layout parts = cpu::padded_layout_for(five_bits ? weight_quantization::int4_asym : format, rows,
                                                             cols, device_quant_group, alignment);
  quantized_device_layout layout;
  layout.format = format;
  layout.rows = rows;
  layout.cols = cols;
  layout.padded_cols = parts.padded_cols;
  layout.groups = parts.groups;
  layout.row_bytes = parts.row_code_bytes;
  layout.scales_at = parts.scales_at;
  layout.offsets_at = parts.offsets_at;
  layout.fifth_bits_at = parts.total_bytes;
  const std::size_t fifth_bit_bytes = five_bits ? static_cast<std::size_t>(rows * parts.padded_cols / 8) : 0;
  layout.total_bytes = (parts.total_bytes + fifth_bit_bytes + alignment - 1) / alignment * alignment;
  return layout;
}

void pack_quantized_rows(const void* source, dtype type, std::int64_t count, const quantized_device_layout& layout,
                         void* image, std::int64_t first_row) {
  if (first_row < 0 || count < 0 || first_row + count > layout.rows)
    throw std::invalid_argument("pack_quantized_rows: rows outside the matrix");
  const std::size_t row_source_bytes = static_cast<std::size_t>(layout.cols) * dtype_size(type);
  std::vector<unsigned char> scratch;
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(layout.padded_cols));
  std::vector<std::uint16_t> scales;
  for (std::int64_t done = 0; done < count; done += rows_per_chunk) {
    const std::int64_t rows = std::min(rows_per_chunk, count - done);
    const cpu::quantized_layout cpu_layout =
        cpu::layout_for(layout.format, rows, layout.cols, layout.format == weight_quantization::int4);
    scratch.assign(cpu_layout.total_bytes, 0);
    cpu::quantize_rows(static_cast<const char*>(source) + static_cast<std::size_t>(done) * row_source_bytes, type, rows,
                       cpu_layout, scratch.data(), 0);
    const cpu::quantized_matrix cpu_rows = cpu::view_of(cpu_layout, scratch.data());
    for (std::int64_t row = 0; row < rows; ++row)
      copy_row(cpu_rows, row, layout, static_cast<unsigned char*>(image), first_row + done + row, codes, scales);
  }
}

void pack_stored_code_rows(const std::uint8_t* codes, const std::uint16_t* scales, const std::uint16_t* offsets,
                           std::int64_t count, const quantized_device_layout& layout, void* image,
                           std::int64_t first_row) {
  if (!nibbles(layout.format) || layout.cols % device_quant_group != 0)
    throw std::invalid_argument("pack_stored_code_rows: stored codes fill 4- or 5-bit groups of 32 inputs");
  if (first_row < 0 || count < 0 || first_row + count > layout.rows)
    throw std::invalid_argument("pack_stored_code_rows: rows outside the matrix");
  for (std::int64_t row = 0; row < count; ++row)
    write_code_row(codes + row * layout.cols, scales + row * layout.groups,
                   offsets != nullptr ? offsets + row * layout.groups : nullptr, layout,
                   static_cast<unsigned char*>(image), first_row + row);
}

float packed_weight(const quantized_device_layout& layout, const void* image, std::int64_t n, std::int64_t k) {
  const auto* codes = static_cast<const unsigned char*>(image) + static_cast<std::size_t>(n) * layout.row_bytes;
  if (!nibbles(layout.format)) {
    float scale = 0.0f;
    std::memcpy(&scale, static_cast<const char*>(image) + layout.scales_at + static_cast<std::size_t>(n) * 4, 4);
    return scale * static_cast<float>(static_cast<std::int8_t>(codes[k]));
  }
  int code = k % 2 == 0 ? codes[k / 2] & 0x0f : codes[k / 2] >> 4;
  if (layout.format == weight_quantization::int5_asym) {
    const auto* fifth_bits = static_cast<const unsigned char*>(image) + fifth_bits_of_row(layout, n);
    code |= (fifth_bits[k / 8] >> (k % 8) & 1) << 4;
  }
  const std::int64_t group = n * layout.groups + k / device_quant_group;
  const float scale = f16_to_float(f16_at(image, layout.scales_at, group));
  const float offset =
      quantization_group_offsets(layout.format) ? f16_to_float(f16_at(image, layout.offsets_at, group)) : 0.0f;
  return stored_code_value(layout.format, code, scale, offset);
}

quantized_weight_view weight_view_of(const quantized_device_layout& layout, const void* base) {
  const auto* bytes = static_cast<const char*>(base);
  quantized_weight_view view;
  view.format = layout.format;
  view.codes = bytes;
  view.scales = bytes + layout.scales_at;
  view.offsets = quantization_group_offsets(layout.format) ? bytes + layout.offsets_at : nullptr;
  view.fifth_bits = layout.format == weight_quantization::int5_asym ? bytes + layout.fifth_bits_at : nullptr;
  view.rows = layout.rows;
  view.cols = layout.cols;
  view.padded_cols = layout.padded_cols;
  view.groups = layout.groups;
  return view;
}

}  // namespace troupe::cuda

#include "kernels/cpu/quantized_weights.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/code_packing.hpp"

namespace troupe::cpu {

namespace {

std::size_t aligned(std::size_t bytes, std::size_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

constexpr bool biased_levels_match() {
  for (int code = 0; code < 16; ++code) {
    if (int4_nl_biased_levels[code] != int4_nl_levels[code] + 128) return false;
  }
  return true;
}
static_assert(biased_levels_match(), "isa_kernels.hpp's int4_nl bytes are the levels + 128");

// The layout written here, read back by stored_code: the reference the
// kernels (which decode it with their own code, in each ISA's namespace)
// are tested against.

// The interleaved order (interleaved_position) puts input 32g + 4v + l of a
// superblock at position 64v + 4g + l: each group owns one 4-byte run in
// each of the superblock's eight 64-position vectors. For int4, the byte at
// p < 256 holds positions p (low nibble) and p + 256 (high), so group g's
// inputs j and j + 16 share a byte and a group fills 16 whole bytes. Storing
// whole groups this way writes exactly the bytes a per-code writer would.

// Group `g` (0..15) of a superblock whose codes start at `superblock`: int8
// codes[t] at 64 (t / 4) + 4g + t % 4.
void store_int8_group(const std::uint8_t* codes, std::int64_t g, std::uint8_t* superblock) {
  for (int v = 0; v < quant_group / 4; ++v) std::memcpy(superblock + 64 * v + 4 * g, codes + 4 * v, 4);
}

// Group `g` of an int4 superblock: codes[j] | codes[j + 16] << 4 at byte 64 (j / 4) + 4g + j % 4.
void store_int4_group(const std::uint8_t* codes, std::int64_t g, std::uint8_t* superblock) {
  std::uint8_t bytes[quant_group / 2];
  for (int j = 0; j < quant_group / 2; ++j)
    bytes[j] = static_cast<std::uint8_t>((codes[j] & 0x0f) | (codes[j + quant_group / 2] & 0x0f) << 4);
  for (int v = 0; v < quant_group / 8; ++v) std::memcpy(superblock + 64 * v + 4 * g, bytes + 4 * v, 4);
}

// Group `g` of an int5_asym superblock: the low four bits as int4, the fifth
// bit of codes[t] at bit p % 8 of byte 256 + p / 8, p = 64 (t / 4) + 4g + t % 4.
void store_int5_group(const std::uint8_t* codes, std::int64_t g, std::uint8_t* superblock) {
  store_int4_group(codes, g, superblock);
  std::uint8_t* bits = superblock + quant_superblock / 2;
  for (int t = 0; t < quant_group; ++t) {
    const std::int64_t p = 64 * (t / 4) + 4 * g + t % 4;
    const auto bit = static_cast<std::uint8_t>(1u << (p % 8));
    bits[p / 8] = static_cast<std::uint8_t>((codes[t] & 0x10) != 0 ? bits[p / 8] | bit : bits[p / 8] & ~bit);
  }
}

// Group `g` of an int6 superblock: the low four bits as int4, bits 4-5 of
// codes[t] at bits 2 (p / 128) .. + 1 of byte 256 + p % 128, p = 64 (t / 4)
// + 4g + t % 4.
void store_int6_group(const std::uint8_t* codes, std::int64_t g, std::uint8_t* superblock) {
  store_int4_group(codes, g, superblock);
  std::uint8_t* plane = superblock + quant_superblock / 2;
  for (int t = 0; t < quant_group; ++t) {
    const std::int64_t p = 64 * (t / 4) + 4 * g + t % 4;
    const int shift = 2 * static_cast<int>(p / 128);
    std::uint8_t& byte = plane[p % 128];
    byte = static_cast<std::uint8_t>((byte & ~(3u << shift)) | ((codes[t] >> 4) & 3u) << shift);
  }
}

}  // namespace

std::int64_t superblock_bytes(weight_quantization format) {
  if (format == weight_quantization::int8) return quant_superblock;
  if (format == weight_quantization::int6) return quant_superblock / 2 + quant_superblock / 4;
  return quant_superblock / 2 + (format == weight_quantization::int5_asym ? quant_superblock / 8 : 0);
}

void store_group(const std::uint8_t* codes, const quantized_layout& layout, std::int64_t first_k, std::uint8_t* row) {
  const std::int64_t sb = first_k / quant_superblock, g = first_k % quant_superblock / quant_group;
  std::uint8_t* superblock = row + sb * superblock_bytes(layout.format);
  if (layout.format == weight_quantization::int5_asym) {
    store_int5_group(codes, g, superblock);
  } else if (layout.format == weight_quantization::int6) {
    store_int6_group(codes, g, superblock);
  } else if (nibble_codes(layout.format)) {
    store_int4_group(codes, g, superblock);
  } else {
    store_int8_group(codes, g, superblock);
  }
}

std::int64_t interleaved_position(std::int64_t k) {
  const std::int64_t within = k % quant_superblock;
  const std::int64_t group = within / quant_group, lane_byte = within % 4, vector = (within % quant_group) / 4;
  return k - within + 64 * vector + 4 * group + lane_byte;
}

quantized_layout padded_layout_for(weight_quantization format, std::int64_t rows, std::int64_t cols,
                                   std::int64_t column_multiple, std::size_t alignment) {
  if (format == weight_quantization::none) throw std::invalid_argument("layout_for: not a quantised format");
  quantized_layout layout;
  layout.format = format;
  layout.rows = rows;
  layout.cols = cols;
  layout.padded_cols = (cols + column_multiple - 1) / column_multiple * column_multiple;
  layout.groups = layout.padded_cols / quant_group;
  // A CUDA layout (padded to its own multiple) is never int5_asym: superblock_bytes / 512 is 1 or 1/2 there.
  layout.row_code_bytes = static_cast<std::size_t>(layout.padded_cols * superblock_bytes(format) / quant_superblock);
  layout.scales_at = aligned(layout.row_code_bytes * static_cast<std::size_t>(rows), alignment);
  const std::size_t scale_bytes =
      nibble_codes(format) ? 2 * static_cast<std::size_t>(rows * layout.groups) : 4 * static_cast<std::size_t>(rows);
  layout.offsets_at = aligned(layout.scales_at + scale_bytes, alignment);
  const std::size_t offset_bytes =
      quantization_group_offsets(format) ? 2 * static_cast<std::size_t>(rows * layout.groups) : 0;
  layout.total_bytes = aligned(layout.offsets_at + offset_bytes, alignment);
  return layout;
}

quantized_layout layout_for(weight_quantization format, std::int64_t rows, std::int64_t cols, bool block_factors) {
  quantized_layout layout = padded_layout_for(format, rows, cols, quant_superblock, 64);
  const bool half_groups = quantization_half_group_scales(format);
  if (!block_factors && !half_groups) return layout;  // int6 and int4_g16 have no other
  if (!nibble_codes(format)) throw std::invalid_argument("layout_for: int8 holds no block factors");
  constexpr std::size_t alignment = 64;
  const auto blocks = static_cast<std::size_t>(rows * layout.groups / groups_per_factor_block);
  // A scale code a group; int6's and int4_g16's a half group.
  const auto groups = static_cast<std::size_t>(rows * layout.groups * (half_groups ? 2 : 1));
  const bool offsets = quantization_group_offsets(format);
  layout.block_factors = true;
  layout.block_scales_at = layout.scales_at;  // the first free byte after the codes
  std::size_t end = layout.block_scales_at + 2 * blocks;
  if (offsets) {
    layout.block_offsets_at = aligned(end, alignment);
    end = layout.block_offsets_at + 2 * blocks;
  }
  layout.scale_codes_at = aligned(end, alignment);
  end = layout.scale_codes_at + groups;
  if (offsets) {
    layout.offset_codes_at = aligned(end, alignment);
    end = layout.offset_codes_at + groups;
  }
  layout.scales_at = layout.offsets_at = 0;  // no f16 group scales or offsets
  layout.total_bytes = aligned(end, alignment);
  return layout;
}

quantized_matrix view_of(const quantized_layout& layout, const void* buffer) {
  const auto* bytes = static_cast<const std::uint8_t*>(buffer);
  quantized_matrix view;
  view.format = static_cast<qformat>(layout.format);
  view.rows = layout.rows;
  view.cols = layout.cols;
  view.padded_cols = layout.padded_cols;
  view.codes = bytes;
  if (layout.block_factors) {
    view.block_scales = reinterpret_cast<const std::uint16_t*>(bytes + layout.block_scales_at);
    view.scale_codes = bytes + layout.scale_codes_at;
    if (quantization_group_offsets(layout.format)) {
      view.block_offsets = reinterpret_cast<const std::uint16_t*>(bytes + layout.block_offsets_at);
      view.offset_codes = bytes + layout.offset_codes_at;
    }
  } else if (nibble_codes(layout.format)) {
    view.group_scales = reinterpret_cast<const std::uint16_t*>(bytes + layout.scales_at);
    if (quantization_group_offsets(layout.format))
      view.group_offsets = reinterpret_cast<const std::uint16_t*>(bytes + layout.offsets_at);
  } else {
    view.row_scales = reinterpret_cast<const float*>(bytes + layout.scales_at);
  }
  return view;
}

void pack_stored_code_rows(const std::uint8_t* codes, const std::uint16_t* scales, const std::uint16_t* offsets,
                           std::int64_t count, const quantized_layout& layout, void* buffer, std::int64_t first_row) {
  if (!nibble_codes(layout.format) || layout.cols % quant_group != 0)
    throw std::invalid_argument("pack_stored_code_rows: needs a 4-, 5- or 6-bit layout with whole groups of 32 inputs");
  auto* bytes = static_cast<std::uint8_t*>(buffer);
  const std::int64_t groups = layout.cols / quant_group;
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t n = first_row + i;
    std::uint8_t* row = bytes + static_cast<std::size_t>(n) * layout.row_code_bytes;
    for (std::int64_t k = 0; k < layout.cols; k += quant_group)
      store_group(codes + i * layout.cols + k, layout, k, row);
    if (layout.block_factors) continue;
    auto* row_scales = reinterpret_cast<std::uint16_t*>(bytes + layout.scales_at) + n * layout.groups;
    std::copy_n(scales + i * groups, groups, row_scales);
    if (quantization_group_offsets(layout.format)) {
      auto* row_offsets = reinterpret_cast<std::uint16_t*>(bytes + layout.offsets_at) + n * layout.groups;
      std::copy_n(offsets + i * groups, groups, row_offsets);
    }
  }
}

void pack_block_factor_rows(const std::uint16_t* block_scales, const std::uint16_t* block_offsets,
                            const std::uint8_t* scale_codes, const std::uint8_t* offset_codes, std::int64_t count,
                            const quantized_layout& layout, void* buffer, std::int64_t first_row) {
  const std::int64_t block = groups_per_factor_block * quant_group;
  if (!layout.block_factors || layout.cols % block != 0)
    throw std::invalid_argument(
        "pack_block_factor_rows: needs a block-factored layout with whole blocks of 256 inputs");
  auto* bytes = static_cast<std::uint8_t*>(buffer);
  const std::int64_t blocks = layout.cols / block, groups = layout.cols / quant_group;
  const std::int64_t row_blocks = layout.groups / groups_per_factor_block;
  const bool half_groups = quantization_half_group_scales(layout.format);
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t n = first_row + i;
    std::copy_n(block_scales + i * blocks, blocks,
                reinterpret_cast<std::uint16_t*>(bytes + layout.block_scales_at) + n * row_blocks);
    if (half_groups) {
      // Input order (half group h: inputs 16 h ..) to each superblock's first halves, then second halves.
      std::uint8_t* row = bytes + layout.scale_codes_at + 2 * n * layout.groups;
      for (std::int64_t h = 0; h < 2 * groups; ++h)
        row[half_scale_code_index(h / 2, static_cast<int>(h % 2))] = scale_codes[i * 2 * groups + h];
      continue;
    }
    std::copy_n(scale_codes + i * groups, groups, bytes + layout.scale_codes_at + n * layout.groups);
    if (!quantization_group_offsets(layout.format)) continue;
    std::copy_n(block_offsets + i * blocks, blocks,
                reinterpret_cast<std::uint16_t*>(bytes + layout.block_offsets_at) + n * row_blocks);
    std::copy_n(offset_codes + i * groups, groups, bytes + layout.offset_codes_at + n * layout.groups);
  }
}

void pack_source_rows(const stored_code_source& source, std::int64_t begin, std::int64_t count,
                      const quantized_layout& layout, void* buffer, std::int64_t to_row) {
  const std::int64_t groups = layout.cols / stored_code_group;
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(count * layout.cols));
  if (!layout.block_factors) {
    std::vector<std::uint16_t> scales(static_cast<std::size_t>(count * groups)), offsets(scales.size());
    source.read_rows(begin, count, codes.data(), scales.data(), offsets.data());
    pack_stored_code_rows(codes.data(), scales.data(), offsets.data(), count, layout, buffer, to_row);
    return;
  }
  source.read_codes(begin, count, codes.data());
  pack_stored_code_rows(codes.data(), nullptr, nullptr, count, layout, buffer, to_row);
  const std::int64_t blocks = layout.cols / stored_code_factor_block;
  std::vector<std::uint16_t> block_scales(static_cast<std::size_t>(count * blocks)), block_offsets(block_scales.size());
  const std::int64_t scales = quantization_half_group_scales(layout.format) ? layout.cols / half_scale_group : groups;
  std::vector<std::uint8_t> scale_codes(static_cast<std::size_t>(count * scales)), offset_codes(scale_codes.size());
  source.read_block_factors(begin, count, block_scales.data(), block_offsets.data(), scale_codes.data(),
                            offset_codes.data());
  pack_block_factor_rows(block_scales.data(), block_offsets.data(), scale_codes.data(), offset_codes.data(), count,
                         layout, buffer, to_row);
}

int stored_code(const quantized_matrix& w, std::int64_t n, std::int64_t k) {
  const std::int64_t position = interleaved_position(k);
  if (w.format == qformat::int8) return w.codes[static_cast<std::size_t>(n * w.padded_cols + position)];
  const std::int64_t sb = position / quant_superblock, p = position % quant_superblock;
  const auto format = static_cast<weight_quantization>(w.format);
  const std::uint8_t* superblock =
      w.codes + static_cast<std::size_t>((n * (w.padded_cols / quant_superblock) + sb) * superblock_bytes(format));
  const int nibble = p < 256 ? superblock[p % 256] & 0x0f : superblock[p % 256] >> 4;
  if (format == weight_quantization::int6) return nibble | ((superblock[256 + p % 128] >> (2 * (p / 128))) & 3) << 4;
  const int fifth = format == weight_quantization::int5_asym ? (superblock[256 + p / 8] >> (p % 8)) & 1 : 0;
  return nibble | fifth << 4;
}

}  // namespace troupe::cpu

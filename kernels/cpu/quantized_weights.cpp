#include "kernels/cpu/quantized_weights.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace troupe::cpu {

namespace {

std::size_t aligned(std::size_t bytes, std::size_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

bool nibbles(weight_quantization format) { return format != weight_quantization::int8; }

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

// Bytes of one row's codes per superblock (isa_kernels.hpp, quantized_matrix::codes).
std::int64_t superblock_bytes(weight_quantization format) {
  if (format == weight_quantization::int8) return quant_superblock;
  return quant_superblock / 2 + (format == weight_quantization::int5_asym ? quant_superblock / 8 : 0);
}

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

// The 32 codes of inputs [first_k, first_k + 32) (first_k a multiple of 32) into `row`.
void store_group(const std::uint8_t* codes, const quantized_layout& layout, std::int64_t first_k, std::uint8_t* row) {
  const std::int64_t sb = first_k / quant_superblock, g = first_k % quant_superblock / quant_group;
  std::uint8_t* superblock = row + sb * superblock_bytes(layout.format);
  if (layout.format == weight_quantization::int5_asym) {
    store_int5_group(codes, g, superblock);
  } else if (nibbles(layout.format)) {
    store_int4_group(codes, g, superblock);
  } else {
    store_int8_group(codes, g, superblock);
  }
}

// The largest |w[k]|, k < count. A maximum is exact and does not depend on
// the order (NaNs are skipped in any order), so sixteen lanes of partial
// maxima give what one running maximum would, without its serial chain,
// and the fixed-width inner loop vectorises.
float largest_magnitude(const float* w, std::int64_t count) {
  constexpr std::int64_t lanes = 16;
  float partial[lanes] = {};
  std::int64_t k = 0;
  for (; k + lanes <= count; k += lanes) {
    for (std::int64_t j = 0; j < lanes; ++j) partial[j] = std::max(partial[j], std::fabs(w[k + j]));
  }
  for (; k < count; ++k) partial[0] = std::max(partial[0], std::fabs(w[k]));
  return *std::max_element(partial, partial + lanes);
}

// std::rint(x) for |x| < 2^31 in the default rounding mode (to nearest,
// ties to even), from operations every x86-64 has in vector form (SSE2 has
// no vector rounding, so a loop calling rint stays scalar): truncate, then
// step away from zero when the remainder is past one half, or is one half
// and the truncation is odd.
int round_half_even(float x) {
  const int truncated = static_cast<int>(x);
  const float remainder = x - static_cast<float>(truncated);  // exact
  const int odd = truncated & 1;
  const int up = static_cast<int>(remainder > 0.5f) | (static_cast<int>(remainder == 0.5f) & odd);
  const int down = static_cast<int>(remainder < -0.5f) | (static_cast<int>(remainder == -0.5f) & odd);
  return truncated + up - down;
}

// One row of int8: a symmetric scale from the largest magnitude. Each group
// is rounded by one fixed-width loop over locals, which vectorises; the
// partial last group reads a zero-padded copy.
void quantize_int8_row(const float* w, const quantized_layout& layout, std::uint8_t* codes, float* scale) {
  const float amax = largest_magnitude(w, layout.cols);
  *scale = amax / 127.0f;
  const float inverse = amax > 0.0f ? 127.0f / amax : 0.0f;
  float tail[quant_group];
  std::uint8_t group[quant_group];
  for (std::int64_t first = 0; first < layout.padded_cols; first += quant_group) {
    const std::int64_t valid = std::clamp<std::int64_t>(layout.cols - first, 0, quant_group);
    const float* values = w + first;
    if (valid < quant_group) {
      std::fill(std::copy_n(w + std::min(first, layout.cols), valid, tail), tail + quant_group, 0.0f);
      values = tail;
    }
    // |w · inverse| <= 127 for finite weights; a NaN weight has no defined
    // code (it had none before either: rint(NaN) converted to int).
    for (std::int64_t t = 0; t < quant_group; ++t)
      group[t] = static_cast<std::uint8_t>(std::clamp(round_half_even(values[t] * inverse), -127, 127) + 128);
    store_group(group, layout, first, codes);
  }
}

// One group of int4 or int5. Symmetric (int4): the value of largest
// magnitude becomes code 0 (-8 · scale), so all 16 levels are used.
// Asymmetric: [min, max] spans 0..15 (int4_asym) or 0..31 (int5_asym).
// Codes use the f16-rounded scale and offset the kernels will read. Every
// loop runs the fixed group width over a local copy (a partial group padded
// with its first weight, which moves no extreme), so each vectorises.
void quantize_group(const float* w, std::int64_t count, const quantized_layout& layout, std::uint8_t* codes,
                    std::int64_t first_k, std::uint16_t* scale_out, std::uint16_t* offset_out) {
  constexpr int lanes = 8;
  float values[quant_group];
  std::fill(std::copy_n(w, count, values), values + quant_group, count > 0 ? w[0] : 0.0f);
  float lows[lanes], highs[lanes];
  std::copy_n(values, lanes, lows);
  std::copy_n(values, lanes, highs);
  for (int v = lanes; v < quant_group; v += lanes) {
    for (int j = 0; j < lanes; ++j) {
      lows[j] = std::min(lows[j], values[v + j]);
      highs[j] = std::max(highs[j], values[v + j]);
    }
  }
  const float low = *std::min_element(lows, lows + lanes), high = *std::max_element(highs, highs + lanes);
  // The first weight of the largest magnitude (the order matters only when +m and -m both occur).
  float extreme = high > -low ? high : low;
  if (high == -low)
    extreme = high == 0.0f
                  ? 0.0f
                  : *std::find_if(values, values + quant_group, [&](float x) { return x == high || x == low; });
  const bool asymmetric = quantization_group_offsets(layout.format);
  const int top = (1 << quantization_code_bits(layout.format)) - 1;
  *scale_out = float_to_f16(asymmetric ? (high - low) / static_cast<float>(top) : extreme / -8.0f);
  const float scale = f16_to_float(*scale_out);
  float offset = -8.0f * scale;
  if (asymmetric) {
    *offset_out = float_to_f16(low);
    offset = f16_to_float(*offset_out);
  }
  const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
  std::uint8_t group[quant_group];
  for (int t = 0; t < quant_group; ++t)
    group[t] = static_cast<std::uint8_t>(std::clamp(round_half_even((values[t] - offset) * inverse), 0, top));
  std::fill(group + count, group + quant_group, std::uint8_t{0});  // padding decodes to the offset
  store_group(group, layout, first_k, codes);
}

// Index of the int4_nl level nearest `v` (in units of the scale; the lower
// on a tie). Every midpoint between consecutive levels is a multiple of one
// half, so within each half-open step (k/2, (k+1)/2] one level is nearest:
// a table over those steps, built once, answers with one lookup.
constexpr int nl_steps_below_zero = 256;  // steps of 1/2 from -128; the table spans (-128, 128]
struct nl_step_table {
  std::uint8_t level[2 * nl_steps_below_zero] = {};
  constexpr nl_step_table() {
    for (int k = 0; k < 2 * nl_steps_below_zero; ++k) {
      const int top = k - nl_steps_below_zero + 1;  // the step's upper end, in halves
      int index = 0;
      for (int j = 0; j < 15; ++j) index += top > int4_nl_levels[j] + int4_nl_levels[j + 1] ? 1 : 0;
      level[k] = static_cast<std::uint8_t>(index);
    }
  }
};
constexpr nl_step_table nl_steps;

int nearest_level(float v) {
  const float halves = std::ceil(2.0f * v);        // v lies in the step (halves - 1, halves] / 2
  if (!(halves > -nl_steps_below_zero)) return 0;  // below the table, or NaN
  if (halves > nl_steps_below_zero) return 15;
  return nl_steps.level[static_cast<int>(halves) + nl_steps_below_zero - 1];
}

// int4_nl's scale search: the weight of largest magnitude on levels −127 ± this.
constexpr int nl_search_steps = 7;

// Codes of `values` for the f16 scale `scale_bits` into `codes`; returns the squared error.
float nl_codes(const float* values, std::uint16_t scale_bits, std::uint8_t* codes) {
  const float scale = f16_to_float(scale_bits), inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
  float error = 0.0f;
  for (int t = 0; t < quant_group; ++t) {
    codes[t] = static_cast<std::uint8_t>(nearest_level(values[t] * inverse));
    const float miss = values[t] - scale * static_cast<float>(int4_nl_levels[codes[t]]);
    error += miss * miss;
  }
  return error;
}

// One group of int4_nl: a search over the scales that put the weight of
// largest magnitude on −127 + step, step in [−7, 7] (the neighbourhood
// llama.cpp's IQ4_NL quantiser searches). Each picks its nearest levels l,
// whose least-squares scale Σ w·l / Σ l² leaves a squared error of Σ w² −
// (Σ w·l)² / Σ l², so the step with the largest (Σ w·l)² / Σ l² wins (the
// first on a tie). Its scale, rounded to f16, then picks the codes the
// kernels read, and stays if that errs less than the plain start (the
// extreme on −127 exactly).
void quantize_nl_group(const float* w, std::int64_t count, const quantized_layout& layout, std::uint8_t* codes,
                       std::int64_t first_k, std::uint16_t* scale_out) {
  float values[quant_group];
  std::fill(std::copy_n(w, count, values), values + quant_group, 0.0f);
  float extreme = 0.0f;
  for (float v : values) extreme = std::fabs(v) > std::fabs(extreme) ? v : extreme;
  float best_fit = 0.0f, best_score = -1.0f;
  for (int step = -nl_search_steps; step <= nl_search_steps && extreme != 0.0f; ++step) {
    const float inverse = static_cast<float>(-127 + step) / extreme;
    float products = 0.0f, squares = 0.0f;
    for (int t = 0; t < quant_group; ++t) {
      const auto level = static_cast<float>(int4_nl_levels[nearest_level(values[t] * inverse)]);
      products += values[t] * level;
      squares += level * level;
    }
    const float score = squares > 0.0f ? products * products / squares : 0.0f;
    if (score > best_score) {
      best_score = score;
      best_fit = squares > 0.0f ? products / squares : 0.0f;
    }
  }
  std::uint8_t start_codes[quant_group], fitted_codes[quant_group];
  const std::uint16_t start = float_to_f16(extreme / -127.0f), fitted = float_to_f16(best_fit);
  const bool better = nl_codes(values, fitted, fitted_codes) < nl_codes(values, start, start_codes);
  *scale_out = better ? fitted : start;
  std::uint8_t* group = better ? fitted_codes : start_codes;
  std::fill(group + count, group + quant_group, std::uint8_t{8});  // padding: level 1, times zero activations
  store_group(group, layout, first_k, codes);
}

}  // namespace

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
      nibbles(format) ? 2 * static_cast<std::size_t>(rows * layout.groups) : 4 * static_cast<std::size_t>(rows);
  layout.offsets_at = aligned(layout.scales_at + scale_bytes, alignment);
  const std::size_t offset_bytes =
      quantization_group_offsets(format) ? 2 * static_cast<std::size_t>(rows * layout.groups) : 0;
  layout.total_bytes = aligned(layout.offsets_at + offset_bytes, alignment);
  return layout;
}

quantized_layout layout_for(weight_quantization format, std::int64_t rows, std::int64_t cols, bool block_factors) {
  quantized_layout layout = padded_layout_for(format, rows, cols, quant_superblock, 64);
  if (!block_factors) return layout;
  if (!quantization_group_offsets(format))
    throw std::invalid_argument("layout_for: only int4_asym and int5_asym hold block factors");
  constexpr std::size_t alignment = 64;
  const auto blocks = static_cast<std::size_t>(rows * layout.groups / groups_per_factor_block);
  const auto groups = static_cast<std::size_t>(rows * layout.groups);
  layout.block_factors = true;
  layout.block_scales_at = layout.scales_at;  // the first free byte after the codes
  layout.block_offsets_at = aligned(layout.block_scales_at + 2 * blocks, alignment);
  layout.scale_codes_at = aligned(layout.block_offsets_at + 2 * blocks, alignment);
  layout.offset_codes_at = aligned(layout.scale_codes_at + groups, alignment);
  layout.scales_at = layout.offsets_at = 0;  // no f16 group scales or offsets
  layout.total_bytes = aligned(layout.offset_codes_at + groups, alignment);
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
    view.block_offsets = reinterpret_cast<const std::uint16_t*>(bytes + layout.block_offsets_at);
    view.scale_codes = bytes + layout.scale_codes_at;
    view.offset_codes = bytes + layout.offset_codes_at;
  } else if (nibbles(layout.format)) {
    view.group_scales = reinterpret_cast<const std::uint16_t*>(bytes + layout.scales_at);
    if (quantization_group_offsets(layout.format))
      view.group_offsets = reinterpret_cast<const std::uint16_t*>(bytes + layout.offsets_at);
  } else {
    view.row_scales = reinterpret_cast<const float*>(bytes + layout.scales_at);
  }
  return view;
}

void quantize_rows(const void* source, dtype type, std::int64_t count, const quantized_layout& layout, void* buffer,
                   std::int64_t first_row) {
  if (layout.block_factors)
    throw std::invalid_argument("quantize_rows: a block-factored layout holds only codes a checkpoint stores");
  auto* bytes = static_cast<std::uint8_t*>(buffer);
  std::vector<float> row(static_cast<std::size_t>(layout.cols));
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t n = first_row + i;
    const auto* src = static_cast<const char*>(source) + static_cast<std::size_t>(i * layout.cols) * dtype_size(type);
    convert_elements(src, type, row.data(), dtype::f32, row.size());
    std::uint8_t* codes = bytes + static_cast<std::size_t>(n) * layout.row_code_bytes;
    if (!nibbles(layout.format)) {
      quantize_int8_row(row.data(), layout, codes, reinterpret_cast<float*>(bytes + layout.scales_at) + n);
      continue;
    }
    auto* scales = reinterpret_cast<std::uint16_t*>(bytes + layout.scales_at) + n * layout.groups;
    auto* offsets = reinterpret_cast<std::uint16_t*>(bytes + layout.offsets_at) + n * layout.groups;
    for (std::int64_t g = 0; g < layout.groups; ++g) {
      const std::int64_t first = g * quant_group, valid = std::clamp<std::int64_t>(layout.cols - first, 0, quant_group);
      const float* group = row.data() + std::min(first, layout.cols);
      if (layout.format == weight_quantization::int4_nl) {
        quantize_nl_group(group, valid, layout, codes, first, scales + g);
      } else {
        quantize_group(group, valid, layout, codes, first, scales + g, offsets + g);
      }
    }
  }
}

void pack_stored_code_rows(const std::uint8_t* codes, const std::uint16_t* scales, const std::uint16_t* offsets,
                           std::int64_t count, const quantized_layout& layout, void* buffer, std::int64_t first_row) {
  if (!nibbles(layout.format) || layout.cols % quant_group != 0)
    throw std::invalid_argument("pack_stored_code_rows: needs an int4 or int5 layout with whole groups of 32 inputs");
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
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t n = first_row + i;
    std::copy_n(block_scales + i * blocks, blocks,
                reinterpret_cast<std::uint16_t*>(bytes + layout.block_scales_at) + n * row_blocks);
    std::copy_n(block_offsets + i * blocks, blocks,
                reinterpret_cast<std::uint16_t*>(bytes + layout.block_offsets_at) + n * row_blocks);
    std::copy_n(scale_codes + i * groups, groups, bytes + layout.scale_codes_at + n * layout.groups);
    std::copy_n(offset_codes + i * groups, groups, bytes + layout.offset_codes_at + n * layout.groups);
  }
}

void pack_source_rows(const stored_code_source& source, std::int64_t begin, std::int64_t count,
                      const quantized_layout& layout, void* buffer, std::int64_t to_row) {
  const std::int64_t groups = layout.cols / stored_code_group;
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(count * layout.cols));
  std::vector<std::uint16_t> scales(static_cast<std::size_t>(count * groups)), offsets(scales.size());
  source.read_rows(begin, count, codes.data(), scales.data(), offsets.data());
  pack_stored_code_rows(codes.data(), scales.data(), offsets.data(), count, layout, buffer, to_row);
  if (!layout.block_factors) return;
  const std::int64_t blocks = layout.cols / stored_code_factor_block;
  std::vector<std::uint16_t> block_scales(static_cast<std::size_t>(count * blocks)), block_offsets(block_scales.size());
  std::vector<std::uint8_t> scale_codes(scales.size()), offset_codes(scales.size());
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
  const int fifth = format == weight_quantization::int5_asym ? (superblock[256 + p / 8] >> (p % 8)) & 1 : 0;
  return nibble | fifth << 4;
}

}  // namespace troupe::cpu

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/code_packing.hpp"
#include "kernels/cpu/quantized_weights.hpp"

// Round-to-nearest quantisation of checkpoint rows into the CPU layouts
// (quantized_weights.hpp's quantize_rows): int8 per row, int4 / int4_asym /
// int5_asym / int4_nl per group of 32 with f16 scales, and int4, int6 and
// int4_g16 (the last two per 16) with block factors (signed byte scale
// codes under an f16 factor per 256 inputs).

namespace troupe::cpu {

namespace {

constexpr int half_group_inputs = static_cast<int>(half_scale_group);

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

// A group's 32 weights as a local copy (a partial group padded with its
// first weight, which moves no extreme), so that every loop over it runs
// the fixed group width and vectorises, with their range and the first
// weight of the largest magnitude (the order matters only when +m and -m
// both occur).
struct group_weights {
  float values[quant_group];
  float low = 0.0f, high = 0.0f, extreme = 0.0f;
};

void gather_group(const float* w, std::int64_t count, group_weights& out) {
  constexpr int lanes = 8;
  float* values = out.values;
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
  out.low = *std::min_element(lows, lows + lanes);
  out.high = *std::max_element(highs, highs + lanes);
  out.extreme = out.high > -out.low ? out.high : out.low;
  if (out.high == -out.low)
    out.extreme = out.high == 0.0f ? 0.0f : *std::find_if(values, values + quant_group, [&](float x) {
      return x == out.high || x == out.low;
    });
}

// One group of int4 or int5. Symmetric (int4): the value of largest
// magnitude becomes code 0 (-8 · scale), so all 16 levels are used.
// Asymmetric: [min, max] spans 0..15 (int4_asym) or 0..31 (int5_asym).
// Codes use the f16-rounded scale and offset the kernels will read.
void quantize_group(const float* w, std::int64_t count, const quantized_layout& layout, std::uint8_t* codes,
                    std::int64_t first_k, std::uint16_t* scale_out, std::uint16_t* offset_out) {
  group_weights group_in;
  gather_group(w, count, group_in);
  const bool asymmetric = quantization_group_offsets(layout.format);
  const int top = (1 << quantization_code_bits(layout.format)) - 1;
  *scale_out =
      float_to_f16(asymmetric ? (group_in.high - group_in.low) / static_cast<float>(top) : group_in.extreme / -8.0f);
  const float scale = f16_to_float(*scale_out);
  float offset = -8.0f * scale;
  if (asymmetric) {
    *offset_out = float_to_f16(group_in.low);
    offset = f16_to_float(*offset_out);
  }
  const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
  std::uint8_t group[quant_group];
  for (int t = 0; t < quant_group; ++t)
    group[t] = static_cast<std::uint8_t>(std::clamp(round_half_even((group_in.values[t] - offset) * inverse), 0, top));
  std::fill(group + count, group + quant_group, std::uint8_t{0});  // padding decodes to the offset
  store_group(group, layout, first_k, codes);
}

// int4 codes of `values` for the scale `scale` (w = scale · (code − 8))
// into `codes`; returns the squared error over the first `count`. The
// loops work on locals (a byte store through `codes` could alias
// `values`), and the errors are summed in eight lanes added in a fixed
// order, so that each vectorises (one running sum of floats would not).
float int4_codes(const float* values, std::int64_t count, float scale, std::uint8_t* codes) {
  constexpr int lanes = 8;
  const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
  float in[quant_group], errors[quant_group], partial[lanes] = {};
  std::copy_n(values, quant_group, in);
  std::uint8_t out[quant_group];
  for (int t = 0; t < quant_group; ++t) {
    const int code = std::clamp(round_half_even(in[t] * inverse) + 8, 0, 15);
    out[t] = static_cast<std::uint8_t>(code);
    const float miss = in[t] - scale * static_cast<float>(code - 8);
    errors[t] = miss * miss;
  }
  std::fill(errors + count, errors + quant_group, 0.0f);
  for (int v = 0; v < quant_group; v += lanes) {
    for (int j = 0; j < lanes; ++j) partial[j] += errors[v + j];
  }
  std::copy_n(out, quant_group, codes);
  float error = 0.0f;
  for (float lane : partial) error += lane;
  return error;
}

// One block of 8 int4 groups (the 256 inputs from `first_k` of a row of
// `cols`) with block factors. Each group's own scale would put its
// extreme on code 0, as quantize_group's; the block's f16 factor d is the
// largest of those over 127, and each group takes the signed byte c
// nearest its own scale / d, or the next one toward zero where that
// leaves its codes less squared error (the nearest byte alone errs about
// as much as f16 group scales; the byte one larger seldom helps, as it
// only coarsens the grid). A subnormal d (a block whose weights are all
// below about 5e-4) is rounded up to the next f16 at or above largest /
// 127: rounded to nearest it could lose a third of its value and clip the
// largest group's extreme, and a block far smaller still would get d = 0.
void quantize_int4_block(const float* row, std::int64_t cols, std::int64_t first_k, const quantized_layout& layout,
                         std::uint8_t* codes, std::uint16_t* block_scale, std::uint8_t* scale_codes) {
  group_weights groups[groups_per_factor_block];
  float own_scales[groups_per_factor_block], largest = 0.0f;
  for (int g = 0; g < groups_per_factor_block; ++g) {
    const std::int64_t first = first_k + g * quant_group;
    gather_group(row + std::min(first, cols), std::clamp<std::int64_t>(cols - first, 0, quant_group), groups[g]);
    own_scales[g] = groups[g].extreme / -8.0f;
    largest = std::max(largest, std::fabs(own_scales[g]));
  }
  *block_scale = float_to_f16(largest / 127.0f);
  // Positive finite f16 bits order as their values: the next one up is bits
  // + 1. Only subnormal factors (bits below 0x0400) are moved: a normal one
  // falls short by at most 2^-11, which clips nothing measurable.
  if (*block_scale < 0x0400 && f16_to_float(*block_scale) * 127.0f < largest) ++*block_scale;
  const float d = f16_to_float(*block_scale);
  for (int g = 0; g < groups_per_factor_block; ++g) {
    const std::int64_t first = first_k + g * quant_group,
                       valid = std::clamp<std::int64_t>(cols - first, 0, quant_group);
    const int nearest = d > 0.0f ? std::clamp(round_half_even(own_scales[g] / d), -127, 127) : 0;
    // The next byte toward zero; from zero (a group far smaller than its
    // block's largest), the first of its own scale's sign instead.
    const int other = nearest > 0 ? nearest - 1 : nearest < 0 ? nearest + 1 : own_scales[g] > 0.0f ? 1 : -1;
    std::uint8_t nearest_codes[quant_group], other_codes[quant_group];
    const float nearest_error = int4_codes(groups[g].values, valid, d * static_cast<float>(nearest), nearest_codes);
    const float other_error = int4_codes(groups[g].values, valid, d * static_cast<float>(other), other_codes);
    const bool take_other = other_error < nearest_error;
    scale_codes[g] = static_cast<std::uint8_t>(static_cast<std::int8_t>(take_other ? other : nearest));
    store_group(take_other ? other_codes : nearest_codes, layout, first, codes);
  }
}

// Codes of a half group's 16 `values` for the scale `scale` (w = scale ·
// (code − offset), codes 0..2 offset − 1: int6's offset 32, int4_g16's 8)
// into `codes`; returns their squared error.
float half_group_codes(const float* values, float scale, int offset, std::uint8_t* codes) {
  const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
  float error = 0.0f;
  for (int t = 0; t < half_group_inputs; ++t) {
    const int code = std::clamp(round_half_even(values[t] * inverse) + offset, 0, 2 * offset - 1);
    codes[t] = static_cast<std::uint8_t>(code);
    const float miss = values[t] - scale * static_cast<float>(code - offset);
    error += miss * miss;
  }
  return error;
}

// One block of 16 half groups of int6 or int4_g16 (the 256 inputs from
// `first_k` of a row of `cols`), as quantize_int4_block does 8 int4 groups:
// each half group's own scale puts its first weight of largest magnitude on
// code 0, the f16 factor d is the largest of those over 127 (a subnormal
// one rounded up), and each half group takes the signed byte nearest its
// own scale / d or the next one toward zero, whichever leaves its codes
// less squared error.
// `scale_codes` is the row's (half_scale_code_index order).
void quantize_half_group_block(const float* row, std::int64_t cols, std::int64_t first_k,
                               const quantized_layout& layout, std::uint8_t* codes, std::uint16_t* block_scale,
                               std::uint8_t* scale_codes) {
  constexpr int halves = stored_code_factor_block / half_group_inputs;
  const int offset = half_group_code_offset(layout.format);
  float values[halves][half_group_inputs] = {}, own_scales[halves], largest = 0.0f;
  for (int h = 0; h < halves; ++h) {
    const std::int64_t first = first_k + h * half_group_inputs;
    const std::int64_t valid = std::clamp<std::int64_t>(cols - first, 0, half_group_inputs);
    float extreme = 0.0f;
    for (std::int64_t t = 0; t < valid; ++t) {
      values[h][t] = row[first + t];
      extreme = std::fabs(values[h][t]) > std::fabs(extreme) ? values[h][t] : extreme;
    }
    own_scales[h] = extreme / static_cast<float>(-offset);
    largest = std::max(largest, std::fabs(own_scales[h]));
  }
  *block_scale = float_to_f16(largest / 127.0f);
  if (*block_scale < 0x0400 && f16_to_float(*block_scale) * 127.0f < largest) ++*block_scale;
  const float d = f16_to_float(*block_scale);
  std::uint8_t group[quant_group];
  for (int h = 0; h < halves; ++h) {
    const int nearest = d > 0.0f ? std::clamp(round_half_even(own_scales[h] / d), -127, 127) : 0;
    const int other = nearest > 0 ? nearest - 1 : nearest < 0 ? nearest + 1 : own_scales[h] > 0.0f ? 1 : -1;
    std::uint8_t nearest_codes[half_group_inputs], other_codes[half_group_inputs];
    const float nearest_error = half_group_codes(values[h], d * static_cast<float>(nearest), offset, nearest_codes);
    const float other_error = half_group_codes(values[h], d * static_cast<float>(other), offset, other_codes);
    const bool take_other = other_error < nearest_error;
    const std::int64_t g = first_k / quant_group + h / 2;
    scale_codes[half_scale_code_index(g, h % 2)] =
        static_cast<std::uint8_t>(static_cast<std::int8_t>(take_other ? other : nearest));
    std::copy_n(take_other ? other_codes : nearest_codes, half_group_inputs, group + h % 2 * half_group_inputs);
    if (h % 2 == 1) store_group(group, layout, g * quant_group, codes);
  }
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

void quantize_rows(const void* source, dtype type, std::int64_t count, const quantized_layout& layout, void* buffer,
                   std::int64_t first_row) {
  if (layout.block_factors && layout.format != weight_quantization::int4 &&
      !quantization_half_group_scales(layout.format))
    throw std::invalid_argument(
        "quantize_rows: a block-factored layout other than int4's, int6's and int4_g16's holds only codes a "
        "checkpoint stores");
  auto* bytes = static_cast<std::uint8_t*>(buffer);
  std::vector<float> row(static_cast<std::size_t>(layout.cols));
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t n = first_row + i;
    const auto* src = static_cast<const char*>(source) + static_cast<std::size_t>(i * layout.cols) * dtype_size(type);
    convert_elements(src, type, row.data(), dtype::f32, row.size());
    std::uint8_t* codes = bytes + static_cast<std::size_t>(n) * layout.row_code_bytes;
    if (!nibble_codes(layout.format)) {
      quantize_int8_row(row.data(), layout, codes, reinterpret_cast<float*>(bytes + layout.scales_at) + n);
      continue;
    }
    if (layout.block_factors) {
      auto* block_scales = reinterpret_cast<std::uint16_t*>(bytes + layout.block_scales_at) +
                           n * (layout.groups / groups_per_factor_block);
      if (quantization_half_group_scales(layout.format)) {
        std::uint8_t* scale_codes = bytes + layout.scale_codes_at + 2 * n * layout.groups;
        for (std::int64_t g = 0; g < layout.groups; g += groups_per_factor_block)
          quantize_half_group_block(row.data(), layout.cols, g * quant_group, layout, codes,
                                    block_scales + g / groups_per_factor_block, scale_codes);
        continue;
      }
      std::uint8_t* scale_codes = bytes + layout.scale_codes_at + n * layout.groups;
      for (std::int64_t g = 0; g < layout.groups; g += groups_per_factor_block)
        quantize_int4_block(row.data(), layout.cols, g * quant_group, layout, codes,
                            block_scales + g / groups_per_factor_block, scale_codes + g);
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

}  // namespace troupe::cpu

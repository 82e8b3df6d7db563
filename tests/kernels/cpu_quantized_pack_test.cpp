// The CPU int4/int8 weight writers store whole 32-input groups at once;
// these tests hold them to the per-code placement interleaved_position
// defines: pack_stored_code_rows byte for byte against a one-nibble-at-a-time
// reference, and quantize_rows code for code (padding included, int8 ties
// rounded to even, int4_nl's nearest level and refit scale).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/isa_kernels.hpp"
#include "kernels/cpu/quantized_weights.hpp"
#include "tests/kernels/cpu_test_support.hpp"

namespace troupe {
namespace {

using cpu::quant_group;
using cpu::quant_superblock;
using test::random_source;

// The index of the int4_nl level nearest v, by distance to each level (the
// lower on a tie).
int nearest_nl_level_at(float v) {
  int best = 0;
  for (int j = 1; j < 16; ++j) {
    if (std::fabs(v - static_cast<float>(int4_nl_levels[j])) < std::fabs(v - static_cast<float>(int4_nl_levels[best])))
      best = j;
  }
  return best;
}

// The index of the int4_nl level nearest w / scale (as the quantiser divides: w · (1 / scale)).
int nearest_nl_level(float w, float scale) { return nearest_nl_level_at(scale != 0.0f ? w * (1.0f / scale) : 0.0f); }

// The writer pack_stored_code_rows used before it stored whole groups: each code
// read-modify-written into its nibble at interleaved_position(k); for
// int5_asym (superblocks of 320 bytes) its fifth bit into bit p % 8 of byte
// 256 + p / 8 of the superblock, as isa_kernels.hpp documents.
void reference_pack_int4_rows(const std::uint8_t* codes, const std::uint16_t* scales, const std::uint16_t* offsets,
                              std::int64_t count, const cpu::quantized_layout& layout, std::uint8_t* buffer,
                              std::int64_t first_row) {
  const std::int64_t groups = layout.cols / quant_group;
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t n = first_row + i;
    std::uint8_t* row = buffer + static_cast<std::size_t>(n) * layout.row_code_bytes;
    for (std::int64_t k = 0; k < layout.cols; ++k) {
      const std::int64_t position = cpu::interleaved_position(k);
      const std::int64_t sb = position / quant_superblock, p = position % quant_superblock;
      const bool five_bits = layout.format == weight_quantization::int5_asym;
      std::uint8_t* superblock = row + sb * (five_bits ? 320 : quant_superblock / 2);
      std::uint8_t& byte = superblock[p % 256];
      const int code = codes[i * layout.cols + k] & 0x0f;
      byte = p < 256 ? static_cast<std::uint8_t>((byte & 0xf0) | code)
                     : static_cast<std::uint8_t>((byte & 0x0f) | code << 4);
      if (five_bits) {
        std::uint8_t& bits = superblock[256 + p / 8];
        const int fifth = (codes[i * layout.cols + k] >> 4) & 1;
        bits = static_cast<std::uint8_t>((bits & ~(1 << (p % 8))) | fifth << (p % 8));
      }
    }
    std::copy_n(scales + i * groups, groups,
                reinterpret_cast<std::uint16_t*>(buffer + layout.scales_at) + n * layout.groups);
    if (layout.format == weight_quantization::int4_asym || layout.format == weight_quantization::int5_asym)
      std::copy_n(offsets + i * groups, groups,
                  reinterpret_cast<std::uint16_t*>(buffer + layout.offsets_at) + n * layout.groups);
  }
}

// Byte for byte, in buffers that start out holding a pattern, so bytes
// neither writer touches (padding groups, alignment) must match as well;
// codes carry junk in their high bits (above the fourth, or for int5_asym
// the fifth), which both must ignore; rows are written in two calls, the
// second at a nonzero first_row.
TEST(QuantizedPack, Int4RowsAreByteIdenticalToThePerCodeWriter) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  for (auto format : {weight_quantization::int4, weight_quantization::int4_asym, weight_quantization::int5_asym,
                      weight_quantization::int4_nl}) {
    for (std::int64_t rows : {1, 7, 13}) {
      for (std::int64_t cols : {32, 96, 480, 512, 544, 1024, 2080}) {
        const cpu::quantized_layout layout = cpu::layout_for(format, rows, cols);
        const std::int64_t groups = cols / quant_group;
        std::vector<std::uint8_t> codes(static_cast<std::size_t>(rows * cols));
        for (auto& code : codes) code = static_cast<std::uint8_t>(rng.integer(0, 255));
        std::vector<std::uint16_t> scales(static_cast<std::size_t>(rows * groups)), offsets(scales.size());
        for (auto& scale : scales) scale = static_cast<std::uint16_t>(rng.integer(0, 0xffff));
        for (auto& offset : offsets) offset = static_cast<std::uint16_t>(rng.integer(0, 0xffff));
        std::vector<std::uint8_t> expected(layout.total_bytes, 0xa5), got(layout.total_bytes, 0xa5);
        const std::int64_t split = rows / 2;
        for (const auto& [first, count] : {std::pair{std::int64_t{0}, split}, std::pair{split, rows - split}}) {
          const std::uint8_t* c = codes.data() + first * cols;
          const std::uint16_t *s = scales.data() + first * groups, *o = offsets.data() + first * groups;
          reference_pack_int4_rows(c, s, o, count, layout, expected.data(), first);
          cpu::pack_stored_code_rows(c, s, o, count, layout, got.data(), first);
        }
        ASSERT_EQ(got, expected) << quantization_name(format) << " " << rows << " x " << cols;
      }
    }
  }
}

// Every stored code, padding included, is the one the row's stored scale
// (and offset) gives its weight: the rule quantize_rows documents, read
// back one code at a time through interleaved_position.
TEST(QuantizedPack, QuantizedRowsHoldEveryCodeWhereInterleavingPutsIt) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  for (auto format : {weight_quantization::int8, weight_quantization::int4, weight_quantization::int4_asym,
                      weight_quantization::int5_asym, weight_quantization::int4_nl}) {
    for (std::int64_t cols : {32, 100, 512, 1000}) {
      const std::int64_t rows = 3;
      const std::vector<float> w = rng.floats(static_cast<std::size_t>(rows * cols));
      const cpu::quantized_layout layout = cpu::layout_for(format, rows, cols);
      std::vector<std::uint8_t> buffer(layout.total_bytes, 0xa5);
      cpu::quantize_rows(w.data(), dtype::f32, rows, layout, buffer.data(), 0);
      const cpu::quantized_matrix view = cpu::view_of(layout, buffer.data());
      for (std::int64_t n = 0; n < rows; ++n) {
        const float* row = w.data() + n * cols;
        const float amax =
            std::fabs(*std::max_element(row, row + cols, [](float a, float b) { return std::fabs(a) < std::fabs(b); }));
        for (std::int64_t k = 0; k < layout.padded_cols; ++k) {
          int expected = 0;
          if (format == weight_quantization::int8) {
            expected = k < cols ? static_cast<int>(std::rint(row[k] * (127.0f / amax))) + 128 : 128;
          } else if (format == weight_quantization::int4_nl) {
            expected = k < cols ? nearest_nl_level(row[k],
                                                   f16_to_float(view.group_scales[n * layout.groups + k / quant_group]))
                                : 8;  // padding: level 1
          } else {
            const std::int64_t group = n * layout.groups + k / quant_group;
            const float scale = f16_to_float(view.group_scales[group]);
            const float offset =
                format == weight_quantization::int4 ? -8.0f * scale : f16_to_float(view.group_offsets[group]);
            const float value = k < cols ? row[k] : offset, inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
            const float top = format == weight_quantization::int5_asym ? 31.0f : 15.0f;
            expected = static_cast<int>(std::clamp(std::rint((value - offset) * inverse), 0.0f, top));
          }
          ASSERT_EQ(cpu::stored_code(view, n, k), expected)
              << quantization_name(format) << " row " << n << " col " << k << " of " << cols;
        }
      }
    }
  }
}

// A group's scale (and offset) follow from its extremes: symmetric, the
// first weight of the largest magnitude over -8 (so +m before -m gives a
// negative scale, -m before +m a positive one); asymmetric, (max - min) / 15
// from min; a partial group's padding moves neither; an all-zero group has
// scale -0 (0 / -8). Ties of the codes round to even, as std::rint does.
TEST(QuantizedPack, Int4ScalesComeFromTheFirstExtremeOfEachGroup) {
  std::vector<float> w(32 + 32 + 32 + 20, 0.0f);
  w[3] = 4.0f, w[9] = -4.0f, w[20] = 1.0f;                                       // group 0: +4 first
  w[32 + 5] = -4.0f, w[32 + 30] = 4.0f;                                          // group 1: -4 first
  w[64 + 7] = 0.0f;                                                              // group 2: all zero
  for (int t = 0; t < 20; ++t) w[96 + t] = 1.0f + 0.5f * static_cast<float>(t);  // group 3: 20 of 32, 1 .. 10.5
  const auto cols = static_cast<std::int64_t>(w.size());
  for (auto format : {weight_quantization::int4, weight_quantization::int4_asym}) {
    const cpu::quantized_layout layout = cpu::layout_for(format, 1, cols);
    std::vector<std::uint8_t> buffer(layout.total_bytes, 0xa5);
    cpu::quantize_rows(w.data(), dtype::f32, 1, layout, buffer.data(), 0);
    const cpu::quantized_matrix view = cpu::view_of(layout, buffer.data());
    if (format == weight_quantization::int4) {
      EXPECT_EQ(view.group_scales[0], float_to_f16(-0.5f));
      EXPECT_EQ(view.group_scales[1], float_to_f16(0.5f));
      EXPECT_EQ(view.group_scales[2], float_to_f16(-0.0f));
      EXPECT_EQ(view.group_scales[3], float_to_f16(10.5f / -8.0f));
      EXPECT_EQ(cpu::stored_code(view, 0, 3), 0) << "+4 at scale -0.5 is the bottom level";
      EXPECT_EQ(cpu::stored_code(view, 0, 9), 15) << "-4 at scale -0.5 is level 16, clamped to the top";
      EXPECT_EQ(cpu::stored_code(view, 0, 20), 6) << "8 - 1 / 0.5";
      EXPECT_EQ(cpu::stored_code(view, 0, 32 + 5), 0);
    } else {
      EXPECT_EQ(view.group_scales[0], float_to_f16(8.0f / 15.0f));
      EXPECT_EQ(view.group_offsets[0], float_to_f16(-4.0f));
      EXPECT_EQ(view.group_scales[2], float_to_f16(0.0f));
      EXPECT_EQ(view.group_scales[3], float_to_f16(9.5f / 15.0f));
      EXPECT_EQ(view.group_offsets[3], float_to_f16(1.0f));
    }
    for (std::int64_t k = 96 + 20; k < 128; ++k) EXPECT_EQ(cpu::stored_code(view, 0, k), 0) << "padding at " << k;
  }
  // Exact ties: weights -8 .. 7 and the half steps between, at scale 1 (the
  // group's first extreme is -8); x + 8 = n + 0.5 rounds to the even n.
  std::vector<float> ties(32);
  ties[0] = -8.0f;
  for (int t = 1; t < 32; ++t) ties[static_cast<std::size_t>(t)] = -8.0f + 0.5f * static_cast<float>(t - 1);
  const cpu::quantized_layout layout = cpu::layout_for(weight_quantization::int4, 1, 32);
  std::vector<std::uint8_t> buffer(layout.total_bytes, 0);
  cpu::quantize_rows(ties.data(), dtype::f32, 1, layout, buffer.data(), 0);
  const cpu::quantized_matrix view = cpu::view_of(layout, buffer.data());
  ASSERT_EQ(f16_to_float(view.group_scales[0]), 1.0f);
  for (std::int64_t k = 0; k < 32; ++k) {
    const float shifted = ties[static_cast<std::size_t>(k)] + 8.0f;
    EXPECT_EQ(cpu::stored_code(view, 0, k), std::min(15, static_cast<int>(std::rint(shifted))))
        << "weight " << shifted - 8;
  }
}

// Squared error of a group of int4_nl at `scale` with every weight on its nearest level.
float nl_group_error(const float* w, float scale) {
  float error = 0.0f;
  for (int t = 0; t < quant_group; ++t) {
    const float miss = w[t] - scale * static_cast<float>(int4_nl_levels[nearest_nl_level(w[t], scale)]);
    error += miss * miss;
  }
  return error;
}

// The least-squares scale Σ w·l / Σ l² over the levels nearest w / (extreme
// / (-127 + step)), and (Σ w·l)² / Σ l², which is larger the less it errs.
std::pair<float, float> nl_fit(const float* w, float extreme, int step) {
  const float inverse = static_cast<float>(-127 + step) / extreme;  // as the quantiser scales
  float products = 0.0f, squares = 0.0f;
  for (int t = 0; t < quant_group; ++t) {
    const auto level = static_cast<float>(int4_nl_levels[nearest_nl_level_at(w[t] * inverse)]);
    products += w[t] * level;
    squares += level * level;
  }
  return {products / squares, products * products / squares};
}

// An int4_nl group's scale: the weight of largest magnitude on level -127
// (exact when the weights lie on the levels), or, where it errs less, the
// least-squares scale of the best of the levels the scales putting it on
// -127 + step pick, step in [-7, 7] (the first best on a tie).
TEST(QuantizedPack, Int4NlScaleIsTheSearchedFitWhereItErrsLess) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t groups = 64, cols = groups * quant_group;
  std::vector<float> w = rng.floats(static_cast<std::size_t>(cols), -1.0f, 1.0f);
  for (int t = 0; t < quant_group; ++t) w[static_cast<std::size_t>(t)] = 0.01f * int4_nl_levels[t % 16];
  for (std::int64_t g = 2; g < groups; g += 3) w[static_cast<std::size_t>(g * quant_group + g % 32)] *= 8.0f;
  const cpu::quantized_layout layout = cpu::layout_for(weight_quantization::int4_nl, 1, cols);
  std::vector<std::uint8_t> buffer(layout.total_bytes, 0);
  cpu::quantize_rows(w.data(), dtype::f32, 1, layout, buffer.data(), 0);
  const cpu::quantized_matrix view = cpu::view_of(layout, buffer.data());
  EXPECT_EQ(view.group_scales[0], float_to_f16(0.01f));
  for (int t = 0; t < quant_group; ++t) EXPECT_EQ(cpu::stored_code(view, 0, t), t % 16) << t;
  int moved = 0;
  for (std::int64_t g = 0; g < groups; ++g) {
    const float* group = w.data() + g * quant_group;
    const float extreme =
        *std::max_element(group, group + quant_group, [](float a, float b) { return std::fabs(a) < std::fabs(b); });
    const float start = f16_to_float(float_to_f16(extreme / -127.0f));
    std::pair<float, float> best{0.0f, -1.0f};
    for (int step = -7; step <= 7; ++step) {
      const std::pair<float, float> fit = nl_fit(group, extreme, step);
      if (fit.second > best.second) best = fit;
    }
    const float fitted = f16_to_float(float_to_f16(best.first));
    const bool better = nl_group_error(group, fitted) < nl_group_error(group, start);
    const float stored = f16_to_float(view.group_scales[g]);
    EXPECT_EQ(stored, better ? fitted : start) << "group " << g;
    EXPECT_LE(nl_group_error(group, stored), nl_group_error(group, start)) << "group " << g;
    moved += stored != start ? 1 : 0;
  }
  EXPECT_GT(moved, groups / 2) << "random groups mostly gain from the search";
}

// int8 codes round half to even, as std::rint does: with a largest
// magnitude of 127 the scale is 1, so these weights are exact ties.
TEST(QuantizedPack, Int8TiesRoundToEven) {
  const std::vector<float> w = {127.0f, 0.5f, -0.5f, 1.5f,   -1.5f,   2.5f,
                                -2.5f,  3.5f, -3.5f, 126.5f, -126.5f, 0.49999997f};
  const auto cols = static_cast<std::int64_t>(w.size());
  const cpu::quantized_layout layout = cpu::layout_for(weight_quantization::int8, 1, cols);
  std::vector<std::uint8_t> buffer(layout.total_bytes, 0);
  cpu::quantize_rows(w.data(), dtype::f32, 1, layout, buffer.data(), 0);
  const cpu::quantized_matrix view = cpu::view_of(layout, buffer.data());
  ASSERT_EQ(view.row_scales[0], 1.0f);
  for (std::int64_t k = 0; k < cols; ++k)
    EXPECT_EQ(cpu::stored_code(view, 0, k) - 128, static_cast<int>(std::rint(w[static_cast<std::size_t>(k)])))
        << "weight " << w[static_cast<std::size_t>(k)];
}

}  // namespace
}  // namespace troupe

#pragma once
// Helpers of the CPU quantised-kernel tests: a matrix quantised to nearest or
// packed from block-factored codes, the quantised GEMV at one dispatch level,
// and the scale of a dot product's rounding error.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/isa_kernels.hpp"
#include "kernels/cpu/quantized_weights.hpp"
#include "kernels/dtype.hpp"
#include "kernels/stored_code_source.hpp"

namespace troupe::test {

/// A quantised matrix and its bytes.
struct quantized_buffer {
  cpu::quantized_layout layout;
  std::vector<std::uint8_t> bytes;
  cpu::quantized_matrix view() const { return cpu::view_of(layout, bytes.data()); }
};

/// w [rows][cols] quantised to nearest in `format`.
inline quantized_buffer quantize(const std::vector<float>& w, weight_quantization format, std::int64_t rows,
                                 std::int64_t cols) {
  quantized_buffer q;
  q.layout = cpu::layout_for(format, rows, cols);
  q.bytes.assign(q.layout.total_bytes, 0);
  cpu::quantize_rows(w.data(), dtype::f32, rows, q.layout, q.bytes.data(), 0);
  return q;
}

/// Random 4-, 5- or 6-bit codes with block factors, as a GGUF file holds
/// them (int4_asym / int5_asym: Q4_K / Q5_K; int4_nl: IQ4_XS; int6: Q6_K
/// and int4_g16: Q3_K (every 4-bit code, where Q3_K uses 4..11), a scale
/// code per 16 inputs; int4: as the backend quantises at load):
/// every code value, block factors of both signs in f16, and scale codes
/// over the whole byte: u8 0..255 beside offsets, s8 −128..127 without (so
/// a kernel that widened one kind as the other would read 200 as −56).
/// read_rows gives the products rounded to f16, as the GGUF sources do
/// (int6, int4_g16: refused, as its contract says).
class block_factored_codes final : public stored_code_source {
 public:
  block_factored_codes(std::mt19937_64& engine, weight_quantization format, std::int64_t rows, std::int64_t cols)
      : format_(format), cols_(cols) {
    const int top = (1 << quantization_code_bits(format)) - 1;
    const bool offsets = quantization_group_offsets(format);
    std::uniform_int_distribution<int> code(0, top), factor_code(offsets ? 0 : -128, offsets ? 255 : 127);
    std::uniform_real_distribution<float> factor(-2e-3f, 2e-3f);
    for (std::int64_t i = 0; i < rows * cols; ++i) codes_.push_back(static_cast<std::uint8_t>(code(engine)));
    for (std::int64_t i = 0; i < rows * cols / stored_code_factor_block; ++i) {
      block_scales_.push_back(float_to_f16(factor(engine)));
      block_offsets_.push_back(offsets ? float_to_f16(factor(engine)) : std::uint16_t{0});
    }
    for (std::int64_t i = 0; i < rows * cols / scale_inputs(); ++i) {
      scale_codes_.push_back(factor_code(engine));
      offset_codes_.push_back(offsets ? factor_code(engine) : 0);
    }
  }

  weight_quantization format() const override { return format_; }
  bool has_block_factors() const override { return true; }

  void read_rows(std::int64_t first, std::int64_t count, std::uint8_t* codes, std::uint16_t* scales,
                 std::uint16_t* offsets) const override {
    if (quantization_half_group_scales(format_))
      throw std::logic_error("read_rows: int6 and int4_g16 have a scale per 16 inputs");
    const std::int64_t groups = cols_ / stored_code_group;
    std::copy_n(codes_.begin() + first * cols_, count * cols_, codes);
    for (std::int64_t g = first * groups; g < (first + count) * groups; ++g) {
      *scales++ = float_to_f16(scale(g));
      if (quantization_group_offsets(format_)) *offsets++ = float_to_f16(offset(g));
    }
  }

  void read_codes(std::int64_t first, std::int64_t count, std::uint8_t* codes) const override {
    std::copy_n(codes_.begin() + first * cols_, count * cols_, codes);
  }

  void read_block_factors(std::int64_t first, std::int64_t count, std::uint16_t* block_scales,
                          std::uint16_t* block_offsets, std::uint8_t* scale_codes,
                          std::uint8_t* offset_codes) const override {
    const std::int64_t blocks = cols_ / stored_code_factor_block, groups = cols_ / scale_inputs();
    const auto byte = [](int code) { return static_cast<std::uint8_t>(code); };  // s8 as two's complement
    std::copy_n(block_scales_.begin() + first * blocks, count * blocks, block_scales);
    std::transform(scale_codes_.begin() + first * groups, scale_codes_.begin() + (first + count) * groups, scale_codes,
                   byte);
    if (!quantization_group_offsets(format_)) return;
    std::copy_n(block_offsets_.begin() + first * blocks, count * blocks, block_offsets);
    std::transform(offset_codes_.begin() + first * groups, offset_codes_.begin() + (first + count) * groups,
                   offset_codes, byte);
  }

  /// Weight (n, k) from the exact products (`f16_products` false) or from
  /// read_rows' f16 ones, in double.
  double weight(std::int64_t n, std::int64_t k, bool f16_products = false) const {
    const std::int64_t g = (n * cols_ + k) / scale_inputs();
    const auto rounded = [&](float v) { return f16_products ? f16_to_float(float_to_f16(v)) : v; };
    const int code = codes_[static_cast<std::size_t>(n * cols_ + k)];
    if (quantization_half_group_scales(format_))
      return static_cast<double>(scale(g)) * (code - half_group_code_offset(format_));
    if (format_ == weight_quantization::int4) return static_cast<double>(rounded(scale(g))) * (code - 8);
    if (format_ == weight_quantization::int4_nl) return static_cast<double>(rounded(scale(g))) * int4_nl_levels[code];
    return static_cast<double>(rounded(scale(g))) * code + rounded(offset(g));
  }

 private:
  // Inputs per scale code: 16 for int6 and int4_g16, a group of 32 for the others.
  std::int64_t scale_inputs() const {
    return quantization_half_group_scales(format_) ? half_scale_group : stored_code_group;
  }
  // Scale g's products in f32 (exact: an f16 times a byte).
  float scale(std::int64_t g) const {
    return f16_to_float(block_scales_[static_cast<std::size_t>(g * scale_inputs() / stored_code_factor_block)]) *
           static_cast<float>(scale_codes_[static_cast<std::size_t>(g)]);
  }
  float offset(std::int64_t g) const {
    return f16_to_float(block_offsets_[static_cast<std::size_t>(g / 8)]) *
           static_cast<float>(offset_codes_[static_cast<std::size_t>(g)]);
  }

  weight_quantization format_;
  std::int64_t cols_;
  std::vector<std::uint8_t> codes_;
  std::vector<int> scale_codes_, offset_codes_;
  std::vector<std::uint16_t> block_scales_, block_offsets_;
};

/// `source`'s [rows][cols] packed as the CPU backend packs block-factored codes.
inline quantized_buffer pack_block_factored(const stored_code_source& source, std::int64_t rows, std::int64_t cols) {
  quantized_buffer q;
  q.layout = cpu::layout_for(source.format(), rows, cols, true);
  q.bytes.assign(q.layout.total_bytes, 0);
  cpu::pack_source_rows(source, 0, rows, q.layout, q.bytes.data(), 0);
  return q;
}

/// Row i of the quantised activation rows `all` alone (padded_cols inputs).
inline cpu::quantized_rows activation_row(const cpu::quantized_rows& all, std::int64_t i) {
  const std::int64_t groups = all.padded_cols / cpu::quant_group;
  cpu::quantized_rows one = all;
  one.codes += i * all.padded_cols;
  one.scales += i * groups;
  one.sums += i * groups;
  one.code_sums += i * groups;
  one.half_starts += i * 2 * groups;
  return one;
}

/// Σ_k |w_k · x_k|: the scale of a dot product's rounding error.
inline double magnitude(const cpu::quantized_matrix& w, const cpu::reference_rows& x, std::int64_t m, std::int64_t n) {
  const std::int64_t groups = x.padded_cols / cpu::quant_group;
  double total = 0.0;
  for (std::int64_t k = 0; k < w.cols; ++k)
    total += std::fabs(cpu::dequantized_weight(w, n, k) *
                       x.scales[static_cast<std::size_t>(m * groups + k / cpu::quant_group)] *
                       x.codes[static_cast<std::size_t>(m * x.padded_cols + cpu::interleaved_position(k))]);
  return total;
}

/// qgemv at `level` of m activation rows by weight rows [n_begin, w.rows):
/// out [m][w.rows], NaN where nothing was written. `code_scratch`: give the
/// GEMM tiles room to expand 4-, 5- and 6-bit codes, as the backend does.
inline std::vector<float> run_qgemv(cpu::isa_level level, const cpu::quantized_matrix& w, const cpu::quantized_rows& x,
                                    std::int64_t m, std::int64_t n_begin, const float* bias = nullptr,
                                    bool code_scratch = true) {
  std::vector<float> out(static_cast<std::size_t>(m * w.rows), std::nanf(""));
  std::vector<std::uint8_t> scratch(code_scratch ? static_cast<std::size_t>(cpu::quant_tile_scratch_bytes) : 0);
  cpu::qgemv_args args;
  args.code_scratch = code_scratch ? scratch.data() : nullptr;
  args.weights = &w;
  args.x = &x;
  args.bias = bias;
  args.m_rows = m;
  args.out = out.data();
  args.out_stride = w.rows;
  args.n_begin = n_begin;
  args.n_end = w.rows;
  cpu::kernels_for(level).qgemv(args);
  return out;
}

}  // namespace troupe::test

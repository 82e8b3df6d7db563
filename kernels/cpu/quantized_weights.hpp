#pragma once
// Weight-only quantisation for the CPU backend: the buffer layout of a
// quantised matrix, round-to-nearest quantisation of checkpoint rows into
// it, and scalar references of the formats and of the quantised dot product
// that the kernel tests compare against. Layouts: isa_kernels.hpp.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/isa_kernels.hpp"
#include "kernels/dtype.hpp"
#include "kernels/quantization.hpp"
#include "kernels/stored_code_source.hpp"

namespace troupe::cpu {

/// Where the parts of one quantised [rows][cols] matrix lie in its buffer (bytes).
struct quantized_layout {
  weight_quantization format = weight_quantization::int8;
  std::int64_t rows = 0, cols = 0;
  std::int64_t padded_cols = 0;  ///< cols rounded up to quant_superblock
  std::int64_t groups = 0;       ///< padded_cols / quant_group
  std::size_t row_code_bytes = 0;
  std::size_t scales_at = 0, offsets_at = 0, total_bytes = 0;
  /// Block-factored (quantized_matrix::block_scales): the factor arrays
  /// (block scales and scale codes, and for the formats with offsets block
  /// offsets and offset codes) follow the codes in place of the group scales
  /// and offsets.
  bool block_factors = false;
  std::size_t block_scales_at = 0, block_offsets_at = 0, scale_codes_at = 0, offset_codes_at = 0;
};

/// The layout of a `format` (not none) matrix of rows × cols with cols
/// padded to a multiple of `column_multiple` (a multiple of quant_group) and
/// each part starting at a multiple of `alignment` bytes. The CUDA backend
/// lays its own code order out this way.
quantized_layout padded_layout_for(weight_quantization format, std::int64_t rows, std::int64_t cols,
                                   std::int64_t column_multiple, std::size_t alignment);

/// The CPU layout of a `format` (not none) matrix of rows × cols; with
/// `block_factors` (4- and 5-bit formats) its group scales (and offsets)
/// are held as block factors (quantized_matrix::block_scales): 40 bytes a
/// row per 512 inputs where int4_asym's f16 scales and offsets take 64, 20
/// where int4's f16 scales take 32. int6 and int4_g16 are always
/// block-factored (36 bytes a row per 512 inputs: a scale code per 16).
quantized_layout layout_for(weight_quantization format, std::int64_t rows, std::int64_t cols,
                            bool block_factors = false);

/// The kernel's view of a matrix laid out by `layout` in `buffer`.
quantized_matrix view_of(const quantized_layout& layout, const void* buffer);

/// Quantises `count` rows of a [*, layout.cols] matrix of `type` at `source`
/// (round to nearest) into rows [first_row, first_row + count) of `buffer`.
/// Of the block-factored layouts only int4's, int6's and int4_g16's are quantised here
/// (signed byte scale codes under an f16 factor per 256 inputs); the others
/// hold codes a checkpoint stores, and throw std::invalid_argument.
void quantize_rows(const void* source, dtype type, std::int64_t count, const quantized_layout& layout, void* buffer,
                   std::int64_t first_row);

/// Packs rows [first_row, first_row + count) of `buffer` (an int4, int4_asym,
/// int5_asym, int4_nl, int6 or int4_g16 `layout` whose cols are a multiple of quant_group)
/// from codes a checkpoint already holds (stored_code_source::read_rows): `codes`
/// [count][cols] 0..15 (0..31 for int5_asym, 0..63 for int6) in input order, `scales` and
/// (int4_asym, int5_asym) `offsets` [count][cols / 32] f16, unread for a
/// block-factored layout, whose rows then also need pack_block_factor_rows
/// (until then their scales are zero).
/// Exact: the values stay the ones the checkpoint stores.
void pack_stored_code_rows(const std::uint8_t* codes, const std::uint16_t* scales, const std::uint16_t* offsets,
                           std::int64_t count, const quantized_layout& layout, void* buffer, std::int64_t first_row);

/// Writes the block factors (stored_code_source::read_block_factors: f16
/// [count][cols / 256] block scales and offsets, [count][cols / 32] scale
/// and offset codes, int6's and int4_g16's scale codes [count][cols / 16]
/// in input order; the offsets unread for int4, int4_nl, int6 and
/// int4_g16) of rows
/// [first_row, first_row + count) of a block-factored `layout` whose cols
/// are a multiple of 256; the codes go through pack_stored_code_rows.
void pack_block_factor_rows(const std::uint16_t* block_scales, const std::uint16_t* block_offsets,
                            const std::uint8_t* scale_codes, const std::uint8_t* offset_codes, std::int64_t count,
                            const quantized_layout& layout, void* buffer, std::int64_t first_row);

/// Rows [begin, begin + count) of `source` (codes in layout.format, read in
/// the layout's input order) packed into rows [to_row, to_row + count) of
/// `buffer`: their codes with f16 scales and offsets (read_rows), or with
/// the source's block factors where `layout` holds them (read_codes and
/// read_block_factors, no f16 product made). Exact, as pack_stored_code_rows.
void pack_source_rows(const stored_code_source& source, std::int64_t begin, std::int64_t count,
                      const quantized_layout& layout, void* buffer, std::int64_t to_row);

/// Group g's scale (g counted over the whole matrix, n · groups + group in
/// the row; f32): block-factored or f16 as the matrix holds it. Throws
/// std::logic_error for int6 and int4_g16, whose groups have two (half_group_scale).
float group_scale(const quantized_matrix& w, std::int64_t g);

/// The scale of half `half` (0: its first 16 inputs) of group g of an int6
/// or int4_g16 matrix (f32, exact).
float half_group_scale(const quantized_matrix& w, std::int64_t g, int half);

/// Group g's offset (int4_asym, int5_asym; 0 for the formats without one).
float group_offset(const quantized_matrix& w, std::int64_t g);

/// The code stored for weight (n, k), k < padded_cols: int8 q + 128 (0..255),
/// int4 and int4_g16 0..15, int5_asym 0..31, int4_nl its level's index 0..15, int6 0..63.
int stored_code(const quantized_matrix& w, std::int64_t n, std::int64_t k);

/// The value weight (n, k) stands for (k < cols), decoded one element at a time.
float dequantized_weight(const quantized_matrix& w, std::int64_t n, std::int64_t k);

/// Position of input feature k in the interleaved order.
std::int64_t interleaved_position(std::int64_t k);

/// Activation rows quantised by the scalar reference (the same rule as the kernels).
struct reference_rows {
  std::vector<std::int8_t> codes;
  std::vector<float> scales, sums;
  std::vector<std::int32_t> code_sums, half_starts;
  std::int64_t padded_cols = 0;
  /// The view the kernels take.
  quantized_rows view() const {
    return {codes.data(), scales.data(), sums.data(), code_sums.data(), half_starts.data(), padded_cols};
  }
};

/// Quantises x [m][cols] (row stride `stride`) for a matrix of `padded_cols` inputs.
reference_rows quantize_rows_reference(const float* x, std::int64_t m, std::int64_t cols, std::int64_t stride,
                                       std::int64_t padded_cols);

/// Σ_k dequantised w[n, k] · (scale_g · code) in double: what the kernels
/// compute up to f32 rounding (bias not included).
double quantized_dot_reference(const quantized_matrix& w, const reference_rows& x, std::int64_t m, std::int64_t n);

}  // namespace troupe::cpu

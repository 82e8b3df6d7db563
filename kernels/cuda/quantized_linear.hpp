#pragma once
// Weight-only quantised linear layers on the device: the layout of a
// quantised matrix, the host packing of the CPU quantiser's codes into it,
// the fused dequantising GEMV (few activation rows) and the expansion of
// weight rows to bf16 (for cuBLASLt when there are many). Formats and the
// choice between the two paths: kernels/cuda/README.md.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/dtype.hpp"
#include "kernels/quantization.hpp"

namespace troupe::cuda {

/// Input features per int4 group (the CPU's quant_group; one GEMV lane load).
constexpr std::int64_t device_quant_group = 32;
/// Activation rows one GEMV launch multiplies (its accumulators stay in registers).
constexpr std::int64_t gemv_max_rows = 8;

/// Where the parts of one quantised [rows][cols] matrix lie in its device
/// allocation (bytes). Codes are row-major with input features padded to a
/// multiple of 32: int8 as signed bytes q (w = row_scale · q), 4-bit codes
/// two per byte, feature 2j in the low nibble of byte j and 2j + 1 in the
/// high one (w = scale · code + offset, offset = −8 · scale for symmetric
/// int4; scale · int4_nl_levels[code] for int4_nl). int5_asym keeps its low
/// four bits as int4_asym does and its fifth bits in a plane of their own: bit j % 8 of
/// byte j / 8 of the row's padded_cols / 8 bytes is feature j's.
struct quantized_device_layout {
  weight_quantization format = weight_quantization::int8;
  std::int64_t rows = 0, cols = 0;
  std::int64_t padded_cols = 0;  ///< cols rounded up to device_quant_group
  std::int64_t groups = 0;       ///< padded_cols / device_quant_group
  std::size_t row_bytes = 0;     ///< code bytes per row (a multiple of 16)
  std::size_t scales_at = 0;     ///< int8: f32 [rows]; int4: f16 [rows][groups]
  std::size_t offsets_at = 0;    ///< int4_asym, int5_asym: f16 [rows][groups]
  std::size_t fifth_bits_at = 0;  ///< int5_asym: [rows][padded_cols / 8]
  std::size_t total_bytes = 0;
};

/// The device layout of a `format` (not none) matrix of rows × cols.
quantized_device_layout device_layout_for(weight_quantization format, std::int64_t rows, std::int64_t cols);

/// Quantises `count` rows of a [*, layout.cols] host matrix of `type` at
/// `source` with the CPU backend's quantiser (so both backends hold the same
/// codes) and writes them as rows [first_row, first_row + count) of the
/// host image `image` (layout.total_bytes) of the device allocation.
void pack_quantized_rows(const void* source, dtype type, std::int64_t count, const quantized_device_layout& layout,
                         void* image, std::int64_t first_row);

/// Writes rows [first_row, first_row + count) of the host image from codes
/// a checkpoint stores in layout.format (stored_code_source::read_rows, no
/// input permutation): `codes` [count][cols] one per byte in input order,
/// `scales` and, for int4_asym / int5_asym, `offsets` [count][cols / 32]
/// f16. cols must be a multiple of 32. Exact: the checkpoint's values.
void pack_stored_code_rows(const std::uint8_t* codes, const std::uint16_t* scales, const std::uint16_t* offsets,
                           std::int64_t count, const quantized_device_layout& layout, void* image,
                           std::int64_t first_row);

/// The value of weight (n, k) in a host image of the layout (k < cols).
float packed_weight(const quantized_device_layout& layout, const void* image, std::int64_t n, std::int64_t k);

/// A quantised matrix in device memory.
struct quantized_weight_view {
  weight_quantization format = weight_quantization::int8;
  const void* codes = nullptr;    ///< [rows][row_bytes]
  const void* scales = nullptr;   ///< see quantized_device_layout::scales_at
  const void* offsets = nullptr;  ///< int4_asym, int5_asym
  const void* fifth_bits = nullptr;  ///< int5_asym only
  std::int64_t rows = 0, cols = 0, padded_cols = 0, groups = 0;
};

/// The view of an allocation at `base` laid out by `layout`.
quantized_weight_view weight_view_of(const quantized_device_layout& layout, const void* base);

/// out[r, n] = Σ_k x[r, k] · w[n, k] (+ bias[n]) for r < m ≤ gemv_max_rows.
struct quantized_gemv_params {
  quantized_weight_view w;
  const void* x = nullptr;  ///< bf16 [m][w.padded_cols]: 16-byte aligned rows, zero past w.cols
  std::int64_t x_stride = 0;
  const float* bias = nullptr;  ///< [w.rows] or nullptr
  void* out = nullptr;          ///< [m][w.rows] of out_type
  std::int64_t out_stride = 0;
  dtype out_type = dtype::bf16;  ///< bf16 or f32
  std::int64_t m = 0;
};

/// out = bf16(w[first_row + i, k]) for i < count, k < w.cols.
struct dequantize_params {
  quantized_weight_view w;
  std::int64_t first_row = 0, count = 0;
  void* out = nullptr;  ///< bf16 [count][w.cols], packed
};

/// dst[r, k] = src[r, columns[k]] (src[r, k] without `columns`) for k <
/// cols, 0 for cols ≤ k < dst_cols (bf16).
struct pad_rows_params {
  const void* src = nullptr;
  std::int64_t src_stride = 0;
  void* dst = nullptr;
  std::int64_t dst_cols = 0;  ///< also dst's row stride
  std::int64_t rows = 0, cols = 0;
  const std::int32_t* columns = nullptr;  ///< [cols] device, or null
};

/// Enqueues the fused GEMV on `stream`.
void launch_quantized_gemv(const quantized_gemv_params& params, cudaStream_t stream);
/// Enqueues the expansion to bf16 on `stream`.
void launch_dequantize(const dequantize_params& params, cudaStream_t stream);
/// Enqueues the padded copy on `stream`.
void launch_pad_rows(const pad_rows_params& params, cudaStream_t stream);

}  // namespace troupe::cuda

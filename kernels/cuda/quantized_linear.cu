// The quantised linear kernels (layout and choice of path:
// quantized_linear.hpp, kernels/cuda/README.md).

#include <cstring>
#include <stdexcept>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/quantized_linear.hpp"

namespace troupe::cuda {

namespace {

constexpr int gemv_threads = 256;
constexpr int gemv_rows_per_block = gemv_threads / 32;  // one weight row per warp
constexpr int dequantize_threads = 256;
constexpr int features_per_thread = 8;  // one 32-bit word of int4 codes, two of int8
constexpr int pad_threads = 256;

// 2^23 as a float: adding a code below 2^23 to it only sets mantissa bits.
constexpr unsigned float_two_23_bits = 0x4B000000u;
constexpr float float_two_23 = 8388608.0f;

__device__ __forceinline__ float bits_as_float(unsigned bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
#endif
}

/// `code` (< 2^23) as a float without the quarter-rate integer conversion.
__device__ __forceinline__ float code_as_float(unsigned code) {
  return bits_as_float(float_two_23_bits | code) - float_two_23;
}

/// Signed byte j of `word` as a float (biased to unsigned, converted, unbiased).
__device__ __forceinline__ float signed_byte_as_float(unsigned word, int j) {
  return bits_as_float(float_two_23_bits | (((word >> (8 * j)) & 0xffu) ^ 0x80u)) - (float_two_23 + 128.0f);
}

/// int4_nl_levels as bytes, four to a word: what level_of selects from.
constexpr unsigned level_word(int first) {
  unsigned word = 0;
  for (int j = 0; j < 4; ++j)
    word |= static_cast<unsigned>(static_cast<unsigned char>(int4_nl_levels[first + j])) << (8 * j);
  return word;
}
constexpr unsigned levels_0_3 = level_word(0), levels_4_7 = level_word(4), levels_8_11 = level_word(8),
                   levels_12_15 = level_word(12);

/// Byte `index` (0..7) of the eight bytes high_word:low_word, in the low byte.
__device__ __forceinline__ unsigned select_byte(unsigned low_word, unsigned high_word, unsigned index) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(low_word, high_word, index);
#else
  return static_cast<unsigned>((static_cast<unsigned long long>(high_word) << 32 | low_word) >> (8 * index)) & 0xffu;
#endif
}

/// int4_nl_levels[code] as a float: a byte lookup in registers (two
/// permutes and a select) where a table in memory would serialise a warp's
/// different codes.
__device__ __forceinline__ float level_of(unsigned code) {
  const unsigned low = select_byte(levels_0_3, levels_4_7, code & 7u);
  const unsigned high = select_byte(levels_8_11, levels_12_15, code & 7u);
  return signed_byte_as_float((code & 8u) != 0 ? high : low, 0);
}

/// The weight a 4- or 5-bit `code` stands for: scale · code + offset, or
/// for int4_nl scale · its level.
template <weight_quantization Format>
__device__ __forceinline__ float nibble_value(unsigned code, float2 scale_offset) {
  if constexpr (Format == weight_quantization::int4_nl) return level_of(code) * scale_offset.x;
  return fmaf(code_as_float(code), scale_offset.x, scale_offset.y);
}

__device__ __forceinline__ float half_at(const void* values, std::int64_t index) {
  return __half2float(static_cast<const __half*>(values)[index]);
}

/// Scale and offset of 4- or 5-bit group g of row n (offset −8 · scale for
/// int4; int4_nl's levels carry none).
template <weight_quantization Format>
__device__ __forceinline__ float2 group_scale_offset(const quantized_weight_view& w, std::int64_t n, std::int64_t g) {
  const std::int64_t at = n * w.groups + g;
  const float scale = half_at(w.scales, at);
  if constexpr (Format == weight_quantization::int4_asym || Format == weight_quantization::int5_asym)
    return make_float2(scale, half_at(w.offsets, at));
  if constexpr (Format == weight_quantization::int4_nl) return make_float2(scale, 0.0f);
  return make_float2(scale, -8.0f * scale);
}

/// The 32 weights of group g of row n as floats; int8 leaves out the row scale
/// (applied once to the dot product).
template <weight_quantization Format>
__device__ __forceinline__ void load_group(const quantized_weight_view& w, std::int64_t n, std::int64_t g,
                                           float (&out)[32]) {
  const auto* codes = static_cast<const unsigned char*>(w.codes);
  if constexpr (Format == weight_quantization::int8) {
    const auto* vectors = reinterpret_cast<const uint4*>(codes + n * w.padded_cols + g * device_quant_group);
    for (int v = 0; v < 2; ++v) {
      const uint4 raw = vectors[v];
      const unsigned words[4] = {raw.x, raw.y, raw.z, raw.w};
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) out[16 * v + 4 * i + j] = signed_byte_as_float(words[i], j);
    }
  } else {
    const uint4 raw = *reinterpret_cast<const uint4*>(codes + n * (w.padded_cols / 2) + g * (device_quant_group / 2));
    const unsigned words[4] = {raw.x, raw.y, raw.z, raw.w};
    const float2 scale_offset = group_scale_offset<Format>(w, n, g);
    unsigned fifth_bits = 0;  // bit t: feature 32 g + t's
    if constexpr (Format == weight_quantization::int5_asym)
      fifth_bits = static_cast<const unsigned*>(w.fifth_bits)[n * (w.padded_cols / 32) + g];
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 8; ++j) {
        const unsigned code = ((words[i] >> (4 * j)) & 0xfu) | ((fifth_bits >> (8 * i + j)) & 1u) << 4;
        out[8 * i + j] = nibble_value<Format>(code, scale_offset);
      }
  }
}

/// Σ x[i] · w[i] over one group: x is 32 bf16 at a 16-byte aligned address.
__device__ __forceinline__ float dot_group(const __nv_bfloat16* x, const float (&w)[32]) {
  const auto* vectors = reinterpret_cast<const uint4*>(x);
  float sum = 0.0f;
  for (int v = 0; v < 4; ++v) {
    const uint4 raw = vectors[v];
    const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
    for (int j = 0; j < 4; ++j) {
      const float2 f = __bfloat1622float2(pairs[j]);
      sum = fmaf(f.x, w[8 * v + 2 * j], sum);
      sum = fmaf(f.y, w[8 * v + 2 * j + 1], sum);
    }
  }
  return sum;
}

// One warp per weight row: each lane takes whole groups (16 or 32 bytes of
// codes in one or two vector loads), expands them once and multiplies them
// with every activation row; the warp then sums its lanes.
template <weight_quantization Format, int Rows>
__global__ void __launch_bounds__(gemv_threads) quantized_gemv_kernel(quantized_gemv_params p) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const std::int64_t n = static_cast<std::int64_t>(blockIdx.x) * gemv_rows_per_block + (threadIdx.x >> 5);
  if (n >= p.w.rows) return;  // the whole warp leaves: no barrier follows
  const auto* x = static_cast<const __nv_bfloat16*>(p.x);
  float acc[Rows];
  for (int r = 0; r < Rows; ++r) acc[r] = 0.0f;
  for (std::int64_t g = lane; g < p.w.groups; g += 32) {
    float w[32];
    load_group<Format>(p.w, n, g, w);
    for (int r = 0; r < Rows; ++r)
      if (r < p.m) acc[r] += dot_group(x + r * p.x_stride + g * device_quant_group, w);
  }
  float row_scale = 1.0f;
  if constexpr (Format == weight_quantization::int8) row_scale = static_cast<const float*>(p.w.scales)[n];
  const float bias = p.bias != nullptr ? p.bias[n] : 0.0f;
  for (int r = 0; r < Rows; ++r) {
    const float total = warp_sum(acc[r]);
    if (lane == 0 && r < p.m) store_from_float(p.out, p.out_type, r * p.out_stride + n, fmaf(total, row_scale, bias));
  }
}

// One thread per 8 consecutive features of a row.
template <weight_quantization Format>
__global__ void __launch_bounds__(dequantize_threads) dequantize_kernel(dequantize_params p) {
  const std::int64_t chunks = p.w.padded_cols / features_per_thread;
  const std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * dequantize_threads + threadIdx.x;
  if (index >= p.count * chunks) return;
  const std::int64_t i = index / chunks, chunk = index % chunks, n = p.first_row + i;
  const auto* codes = static_cast<const unsigned char*>(p.w.codes);
  float values[features_per_thread];
  if constexpr (Format == weight_quantization::int8) {
    const uint2 raw = *reinterpret_cast<const uint2*>(codes + n * p.w.padded_cols + chunk * features_per_thread);
    const float scale = static_cast<const float*>(p.w.scales)[n];
    for (int j = 0; j < features_per_thread; ++j) {
      const unsigned word = j < 4 ? raw.x : raw.y;
      values[j] = scale * signed_byte_as_float(word, j % 4);
    }
  } else {
    const unsigned word = *reinterpret_cast<const unsigned*>(codes + n * (p.w.padded_cols / 2) + chunk * 4);
    const float2 scale_offset = group_scale_offset<Format>(p.w, n, chunk * features_per_thread / device_quant_group);
    unsigned fifth_bits = 0;  // bit j: the chunk's feature j's
    if constexpr (Format == weight_quantization::int5_asym)
      fifth_bits = static_cast<const unsigned char*>(p.w.fifth_bits)[n * (p.w.padded_cols / 8) + chunk];
    for (int j = 0; j < features_per_thread; ++j)
      values[j] = nibble_value<Format>(((word >> (4 * j)) & 0xfu) | ((fifth_bits >> j) & 1u) << 4, scale_offset);
  }
  auto* out = static_cast<__nv_bfloat16*>(p.out) + i * p.w.cols;
  for (int j = 0; j < features_per_thread; ++j) {
    const std::int64_t k = chunk * features_per_thread + j;
    if (k < p.w.cols) out[k] = __float2bfloat16_rn(values[j]);
  }
}

__global__ void __launch_bounds__(pad_threads) pad_rows_kernel(pad_rows_params p) {
  const std::int64_t row = blockIdx.x;
  const auto* src = static_cast<const unsigned short*>(p.src) + row * p.src_stride;
  auto* dst = static_cast<unsigned short*>(p.dst) + row * p.dst_cols;
  for (std::int64_t k = threadIdx.x; k < p.dst_cols; k += pad_threads)
    dst[k] = k < p.cols ? src[p.columns != nullptr ? p.columns[k] : k] : 0;
}

template <weight_quantization Format>
void launch_gemv_rows(const quantized_gemv_params& params, cudaStream_t stream) {
  const unsigned blocks = blocks_for(params.w.rows, gemv_rows_per_block);
  if (params.m <= 1) {
    quantized_gemv_kernel<Format, 1><<<blocks, gemv_threads, 0, stream>>>(params);
  } else if (params.m <= 2) {
    quantized_gemv_kernel<Format, 2><<<blocks, gemv_threads, 0, stream>>>(params);
  } else if (params.m <= 4) {
    quantized_gemv_kernel<Format, 4><<<blocks, gemv_threads, 0, stream>>>(params);
  } else {
    quantized_gemv_kernel<Format, 8><<<blocks, gemv_threads, 0, stream>>>(params);
  }
  TROUPE_CUDA_CHECK_LAUNCH();
}

template <weight_quantization Format>
void launch_dequantize_rows(const dequantize_params& params, cudaStream_t stream) {
  const unsigned blocks = blocks_for(params.count * (params.w.padded_cols / features_per_thread), dequantize_threads);
  dequantize_kernel<Format><<<blocks, dequantize_threads, 0, stream>>>(params);
  TROUPE_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_quantized_gemv(const quantized_gemv_params& params, cudaStream_t stream) {
  if (params.m == 0 || params.w.rows == 0) return;
  switch (params.w.format) {
    case weight_quantization::int8:
      return launch_gemv_rows<weight_quantization::int8>(params, stream);
    case weight_quantization::int4:
      return launch_gemv_rows<weight_quantization::int4>(params, stream);
    case weight_quantization::int4_asym:
      return launch_gemv_rows<weight_quantization::int4_asym>(params, stream);
    case weight_quantization::int4_nl:
      return launch_gemv_rows<weight_quantization::int4_nl>(params, stream);
    case weight_quantization::int5_asym:
      return launch_gemv_rows<weight_quantization::int5_asym>(params, stream);
    case weight_quantization::int6:  // held as int8 (prepare_quantized_linear)
    case weight_quantization::int4_g16:
    case weight_quantization::none:
      break;
  }
  throw std::invalid_argument("launch_quantized_gemv: the weight is not in a CUDA quantised format");
}

void launch_dequantize(const dequantize_params& params, cudaStream_t stream) {
  if (params.count == 0 || params.w.cols == 0) return;
  switch (params.w.format) {
    case weight_quantization::int8:
      return launch_dequantize_rows<weight_quantization::int8>(params, stream);
    case weight_quantization::int4:
      return launch_dequantize_rows<weight_quantization::int4>(params, stream);
    case weight_quantization::int4_asym:
      return launch_dequantize_rows<weight_quantization::int4_asym>(params, stream);
    case weight_quantization::int4_nl:
      return launch_dequantize_rows<weight_quantization::int4_nl>(params, stream);
    case weight_quantization::int5_asym:
      return launch_dequantize_rows<weight_quantization::int5_asym>(params, stream);
    case weight_quantization::int6:  // held as int8 (prepare_quantized_linear)
    case weight_quantization::int4_g16:
    case weight_quantization::none:
      break;
  }
  throw std::invalid_argument("launch_dequantize: the weight is not in a CUDA quantised format");
}

void launch_pad_rows(const pad_rows_params& params, cudaStream_t stream) {
  if (params.rows == 0) return;
  pad_rows_kernel<<<static_cast<unsigned>(params.rows), pad_threads, 0, stream>>>(params);
  TROUPE_CUDA_CHECK_LAUNCH();
}

}  // namespace troupe::cuda

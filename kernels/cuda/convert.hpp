#pragma once
// Element-type conversion (checkpoint tensors to their device types) and the
// bias add used when cuBLASLt offers no bias epilogue for a shape.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/dtype.hpp"

namespace troupe::cuda {

/// dst[i] = convert(src[i]) for i < count, rounding to nearest even.
struct convert_params {
  const void* src = nullptr;  ///< [count] of from
  dtype from = dtype::f32;
  void* dst = nullptr;  ///< [count] of to; must not overlap src
  dtype to = dtype::bf16;
  std::int64_t count = 0;
};

/// out[r, c] += bias[c] (out and bias of the same type: bf16 or f32).
struct add_bias_params {
  void* out = nullptr;          ///< [rows, cols] of type
  std::int64_t out_stride = 0;  ///< elements between rows
  const void* bias = nullptr;   ///< [cols] of type
  dtype type = dtype::bf16;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

/// Enqueues the conversion on `stream`.
void launch_convert(const convert_params& params, cudaStream_t stream);
/// Enqueues the bias add on `stream`.
void launch_add_bias(const add_bias_params& params, cudaStream_t stream);

}  // namespace troupe::cuda

#pragma once
// RMSNorm over rows (optionally fused with the residual add) and over each
// head of a row (Qwen3's q/k norm). Activations are bf16; statistics and
// products are computed in float and rounded once.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/dtype.hpp"

namespace troupe::cuda {

/// out[r, c] = v[r, c] / sqrt(mean_c(v[r, :]²) + eps) * weight[c], where
/// v = x, or, when `residual` is set, residual[r, :] += x[r, :] first (the
/// sum is rounded to bf16 and stored) and v = the updated residual.
struct rms_norm_params {
  void* residual = nullptr;          ///< bf16 [rows, cols] or nullptr; updated in place
  std::int64_t residual_stride = 0;  ///< elements between rows
  const void* x = nullptr;           ///< bf16 [rows, cols]
  std::int64_t x_stride = 0;
  const void* weight = nullptr;  ///< [cols] of weight_type
  dtype weight_type = dtype::f32;
  void* out = nullptr;  ///< bf16 [rows, cols]; may alias x
  std::int64_t out_stride = 0;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  float eps = 1e-6f;
};

/// In place: every head_dim-long slice x[t, h*head_dim : (h+1)*head_dim] is
/// RMS-normalised and multiplied by weight[head_dim].
struct head_rms_norm_params {
  void* x = nullptr;          ///< bf16 [rows, heads * head_dim]
  std::int64_t x_stride = 0;  ///< elements between rows
  std::int64_t rows = 0;
  int heads = 0;
  int head_dim = 0;
  const void* weight = nullptr;  ///< [head_dim] of weight_type
  dtype weight_type = dtype::f32;
  float eps = 1e-6f;
};

/// Enqueues the row norm on `stream`.
void launch_rms_norm(const rms_norm_params& params, cudaStream_t stream);
/// Enqueues the per-head norm on `stream`.
void launch_head_rms_norm(const head_rms_norm_params& params, cudaStream_t stream);

}  // namespace troupe::cuda

#pragma once
// The gated MLP activation of the Llama family.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace troupe::cuda {

/// out[r, f] = silu(gate_up[r, f]) * gate_up[r, features + f], silu(g) = g / (1 + e^-g).
struct silu_mul_params {
  const void* gate_up = nullptr;    ///< bf16 [rows, 2 * features]
  std::int64_t gate_up_stride = 0;  ///< elements between rows
  void* out = nullptr;              ///< bf16 [rows, features]; may alias the gate half
  std::int64_t out_stride = 0;
  std::int64_t rows = 0;
  std::int64_t features = 0;
};

/// Enqueues silu-and-multiply on `stream`.
void launch_silu_mul(const silu_mul_params& params, cudaStream_t stream);

}  // namespace troupe::cuda

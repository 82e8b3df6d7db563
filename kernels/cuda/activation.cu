#include "kernels/cuda/activation.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_utils.cuh"

namespace troupe::cuda {

namespace {

constexpr int silu_threads = 256;

// One block per row; a thread reads gate and up of column f before it writes
// out[f], so an output that aliases the gate half is safe.
__global__ void __launch_bounds__(silu_threads) silu_mul_kernel(silu_mul_params p) {
  const std::int64_t row = blockIdx.x;
  const __nv_bfloat16* gate = static_cast<const __nv_bfloat16*>(p.gate_up) + row * p.gate_up_stride;
  const __nv_bfloat16* up = gate + p.features;
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out) + row * p.out_stride;
  for (std::int64_t f = threadIdx.x; f < p.features; f += blockDim.x) {
    const float g = to_float(gate[f]);
    const float u = to_float(up[f]);
    out[f] = from_float<__nv_bfloat16>(g / (1.0f + expf(-g)) * u);
  }
}

}  // namespace

void launch_silu_mul(const silu_mul_params& params, cudaStream_t stream) {
  if (params.rows == 0 || params.features == 0) return;
  silu_mul_kernel<<<static_cast<unsigned>(params.rows), silu_threads, 0, stream>>>(params);
  TROUPE_CUDA_CHECK_LAUNCH();
}

}  // namespace troupe::cuda

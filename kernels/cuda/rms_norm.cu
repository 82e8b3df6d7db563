#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/rms_norm.hpp"

namespace troupe::cuda {

namespace {

constexpr int norm_threads = 256;
constexpr int head_norm_warps = 4;

// One block per row. Each thread revisits exactly the columns it touched in
// the first pass, so `out` may alias `x` without a race.
__global__ void __launch_bounds__(norm_threads) rms_norm_kernel(rms_norm_params p) {
  __shared__ float scratch[32];
  const std::int64_t row = blockIdx.x;
  const __nv_bfloat16* x = static_cast<const __nv_bfloat16*>(p.x) + row * p.x_stride;
  __nv_bfloat16* residual =
      p.residual == nullptr ? nullptr : static_cast<__nv_bfloat16*>(p.residual) + row * p.residual_stride;
  float sum_squares = 0.0f;
  for (std::int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) {
    float v = to_float(x[c]);
    if (residual != nullptr) {
      const __nv_bfloat16 updated = from_float<__nv_bfloat16>(to_float(residual[c]) + v);
      residual[c] = updated;
      v = to_float(updated);
    }
    sum_squares += v * v;
  }
  const float total = block_sum(sum_squares, scratch);
  const float inverse_rms = 1.0f / sqrtf(total / static_cast<float>(p.cols) + p.eps);
  const __nv_bfloat16* source = residual != nullptr ? residual : x;
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out) + row * p.out_stride;
  for (std::int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) {
    const float v = to_float(source[c]) * inverse_rms * load_as_float(p.weight, p.weight_type, c);
    out[c] = from_float<__nv_bfloat16>(v);
  }
}

// One warp per (row, head); each lane owns the same elements in both passes.
__global__ void __launch_bounds__(head_norm_warps * 32) head_rms_norm_kernel(head_rms_norm_params p) {
  const std::int64_t pair = static_cast<std::int64_t>(blockIdx.x) * head_norm_warps + (threadIdx.x >> 5);
  if (pair >= p.rows * p.heads) return;  // warp-uniform: the whole warp leaves together
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const std::int64_t row = pair / p.heads;
  const int head = static_cast<int>(pair % p.heads);
  __nv_bfloat16* x = static_cast<__nv_bfloat16*>(p.x) + row * p.x_stride + static_cast<std::int64_t>(head) * p.head_dim;
  float sum_squares = 0.0f;
  for (int d = lane; d < p.head_dim; d += 32) {
    const float v = to_float(x[d]);
    sum_squares += v * v;
  }
  const float total = warp_sum(sum_squares);
  const float inverse_rms = 1.0f / sqrtf(total / static_cast<float>(p.head_dim) + p.eps);
  for (int d = lane; d < p.head_dim; d += 32) {
    x[d] = from_float<__nv_bfloat16>(to_float(x[d]) * inverse_rms * load_as_float(p.weight, p.weight_type, d));
  }
}

}  // namespace

void launch_rms_norm(const rms_norm_params& params, cudaStream_t stream) {
  if (params.rows == 0) return;
  rms_norm_kernel<<<static_cast<unsigned>(params.rows), norm_threads, 0, stream>>>(params);
  TROUPE_CUDA_CHECK_LAUNCH();
}

void launch_head_rms_norm(const head_rms_norm_params& params, cudaStream_t stream) {
  const std::int64_t pairs = params.rows * params.heads;
  if (pairs == 0) return;
  head_rms_norm_kernel<<<blocks_for(pairs, head_norm_warps), head_norm_warps * 32, 0, stream>>>(params);
  TROUPE_CUDA_CHECK_LAUNCH();
}

}  // namespace troupe::cuda

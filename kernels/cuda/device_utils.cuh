#pragma once
// Device-side helpers shared by the kernels: element conversions, warp and
// block reductions, and the launch geometry conventions. Included only by
// .cu files.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/dtype.hpp"

namespace troupe::cuda {

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

/// Rounds to nearest even, like the host's float_to_bf16 / float_to_f16.
template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}

/// Element `index` of an array of runtime type `type`, as float (for small
/// operands such as norm weights whose type follows the checkpoint).
__device__ __forceinline__ float load_as_float(const void* data, dtype type, std::int64_t index) {
  switch (type) {
    case dtype::f32:
      return static_cast<const float*>(data)[index];
    case dtype::f16:
      return __half2float(static_cast<const __half*>(data)[index]);
    case dtype::bf16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(data)[index]);
  }
  return 0.0f;
}

/// Stores `value` rounded to the runtime type `type` at element `index`.
__device__ __forceinline__ void store_from_float(void* data, dtype type, std::int64_t index, float value) {
  switch (type) {
    case dtype::f32:
      static_cast<float*>(data)[index] = value;
      return;
    case dtype::f16:
      static_cast<__half*>(data)[index] = __float2half_rn(value);
      return;
    case dtype::bf16:
      static_cast<__nv_bfloat16*>(data)[index] = __float2bfloat16_rn(value);
      return;
  }
}

constexpr unsigned full_warp_mask = 0xffffffffu;

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(full_warp_mask, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(full_warp_mask, v, offset));
  return v;
}

/// Sum of `v` over the block, returned to every thread in the same order of
/// additions (deterministic). All threads must call it; blockDim.x is a
/// multiple of 32 and `scratch` holds 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const int warps = static_cast<int>(blockDim.x) >> 5;
  v = warp_sum(v);
  __syncthreads();  // an earlier call may still be reading scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < warps; ++w) total += scratch[w];
  return total;
}

/// Maximum of `v` over the block (NaN ignored), returned to every thread.
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const int warps = static_cast<int>(blockDim.x) >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = scratch[0];
  for (int w = 1; w < warps; ++w) total = fmaxf(total, scratch[w]);
  return total;
}

/// Number of blocks of `per_block` covering `count` items.
inline unsigned blocks_for(std::int64_t count, std::int64_t per_block) {
  return static_cast<unsigned>((count + per_block - 1) / per_block);
}

}  // namespace troupe::cuda

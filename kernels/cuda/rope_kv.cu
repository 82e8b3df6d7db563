#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/rope_kv.hpp"

namespace troupe::cuda {

namespace {

constexpr int rope_threads = 128;

// One block per token. The token's cos/sin table is computed once into
// shared memory; every rotated pair is owned by one thread, which reads both
// elements before writing either, so the in-place update has no race.
template <class CacheT>
__global__ void __launch_bounds__(rope_threads) rope_kv_kernel(rope_kv_params p) {
  extern __shared__ float trig[];  // [half] cos then [half] sin
  const int half = p.rotary_dim / 2;
  float* cos_table = trig;
  float* sin_table = trig + half;
  const std::int64_t t = blockIdx.x;
  const float position = static_cast<float>(p.positions[t]);
  const int table = p.token_table == nullptr ? 0 : p.token_table[t];
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    // Full-precision sincosf (no fast math): angles reach 1e5 radians.
    sincosf(position * p.inv_freq[static_cast<std::int64_t>(table) * half + i], &sin_table[i], &cos_table[i]);
  }
  __syncthreads();

  const int head_dim = p.cache.head_dim;
  __nv_bfloat16* q = static_cast<__nv_bfloat16*>(p.q) + t * p.q_stride;
  for (int index = threadIdx.x; index < p.num_q_heads * half; index += blockDim.x) {
    __nv_bfloat16* x = q + (index / half) * head_dim;
    const int i = index % half;
    const float x1 = to_float(x[i]);
    const float x2 = to_float(x[i + half]);
    x[i] = from_float<__nv_bfloat16>(x1 * cos_table[i] - x2 * sin_table[i]);
    x[i + half] = from_float<__nv_bfloat16>(x2 * cos_table[i] + x1 * sin_table[i]);
  }

  const std::int64_t slot = p.slot_mapping[t];
  const std::int64_t block = slot / p.cache.block_size;
  const int offset = static_cast<int>(slot % p.cache.block_size);
  CacheT* pool = static_cast<CacheT*>(p.cache.pool);
  __nv_bfloat16* k = static_cast<__nv_bfloat16*>(p.k) + t * p.k_stride;
  for (int index = threadIdx.x; index < p.cache.num_kv_heads * half; index += blockDim.x) {
    const int head = index / half;
    const int i = index % half;
    __nv_bfloat16* x = k + head * head_dim;
    const float x1 = to_float(x[i]);
    const float x2 = to_float(x[i + half]);
    const float y1 = x1 * cos_table[i] - x2 * sin_table[i];
    const float y2 = x2 * cos_table[i] + x1 * sin_table[i];
    x[i] = from_float<__nv_bfloat16>(y1);
    x[i + half] = from_float<__nv_bfloat16>(y2);
    CacheT* dst = pool + p.cache.key_offset(block, head, offset);
    dst[i] = from_float<CacheT>(y1);
    dst[i + half] = from_float<CacheT>(y2);
  }
  // Dimensions past the rotary part (partial rotary) go to the cache as they are.
  const int pass_dims = head_dim - p.rotary_dim;
  for (int index = threadIdx.x; index < p.cache.num_kv_heads * pass_dims; index += blockDim.x) {
    const int head = index / pass_dims;
    const int d = p.rotary_dim + index % pass_dims;
    pool[p.cache.key_offset(block, head, offset) + d] = from_float<CacheT>(to_float(k[head * head_dim + d]));
  }
  const __nv_bfloat16* v = static_cast<const __nv_bfloat16*>(p.v) + t * p.v_stride;
  for (int index = threadIdx.x; index < p.cache.num_kv_heads * head_dim; index += blockDim.x) {
    const int head = index / head_dim;
    const int d = index % head_dim;
    pool[p.cache.key_offset(block, head, offset) + p.cache.tile_elements + d] = from_float<CacheT>(to_float(v[index]));
  }
}

}  // namespace

void launch_rope_kv(const rope_kv_params& params, cudaStream_t stream) {
  if (params.num_tokens == 0) return;
  const dim3 grid(static_cast<unsigned>(params.num_tokens));
  const std::size_t shared = sizeof(float) * static_cast<std::size_t>(params.rotary_dim);
  if (params.cache_type == dtype::f16) {
    rope_kv_kernel<__half><<<grid, rope_threads, shared, stream>>>(params);
  } else {
    rope_kv_kernel<__nv_bfloat16><<<grid, rope_threads, shared, stream>>>(params);
  }
  TROUPE_CUDA_CHECK_LAUNCH();
}

}  // namespace troupe::cuda

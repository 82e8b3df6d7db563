#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/logit_refinement.hpp"

namespace troupe::cuda {

namespace {

constexpr int refine_threads = 256;
constexpr int refine_warps = refine_threads / 32;
/// Entries each thread keeps of its own slice of the row, best first.
constexpr int kept_per_thread = 8;
/// Logits a thread loads before ranking them, so that as many loads are in
/// flight rather than one at a time.
constexpr int loads_in_flight = 4;

/// (logit, id) as one integer that orders candidates: a larger logit first,
/// the lower id among equal ones (−0 equal to +0), NaN below every number.
/// Never 0, which marks an empty place.
__device__ __forceinline__ unsigned long long rank_key(float logit, std::int64_t id) {
  unsigned order = 0;  // NaN
  if (logit == logit) {
    const unsigned bits = logit == 0.0f ? 0u : __float_as_uint(logit);
    order = (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
  }
  return static_cast<unsigned long long>(order) << 32 | (0xffffffffu - static_cast<unsigned>(id));
}

__device__ __forceinline__ std::int32_t id_of(unsigned long long key) {
  return static_cast<std::int32_t>(0xffffffffu - static_cast<unsigned>(key & 0xffffffffu));
}

/// Puts `key` into `kept` (sorted, best first) if it beats the last place.
/// Unrolled so that `kept` stays in registers.
__device__ __forceinline__ void keep(unsigned long long (&kept)[kept_per_thread], unsigned long long key) {
  if (key <= kept[kept_per_thread - 1]) return;
  kept[kept_per_thread - 1] = key;
#pragma unroll
  for (int i = kept_per_thread - 1; i > 0; --i) {
    if (kept[i] > kept[i - 1]) {
      const unsigned long long swapped = kept[i];
      kept[i] = kept[i - 1];
      kept[i - 1] = swapped;
    }
  }
}

/// The best `kept_per_thread` entries of this thread's slice (ids ≡ thread
/// mod blockDim) that rank below `below`.
__device__ __forceinline__ void fill_kept(const float* row, std::int64_t vocab, unsigned long long below,
                                          unsigned long long (&kept)[kept_per_thread]) {
#pragma unroll
  for (int i = 0; i < kept_per_thread; ++i) kept[i] = 0;
  const std::int64_t stride = blockDim.x;
  for (std::int64_t v = threadIdx.x; v < vocab; v += loads_in_flight * stride) {
    float logits[loads_in_flight];
#pragma unroll
    for (int j = 0; j < loads_in_flight; ++j) logits[j] = v + j * stride < vocab ? row[v + j * stride] : 0.0f;
#pragma unroll
    for (int j = 0; j < loads_in_flight; ++j) {
      if (v + j * stride >= vocab) break;
      const unsigned long long key = rank_key(logits[j], v + j * stride);
      if (key < below) keep(kept, key);
    }
  }
}

__device__ __forceinline__ unsigned long long warp_max_key(unsigned long long v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const unsigned long long other = __shfl_xor_sync(full_warp_mask, v, offset);
    v = other > v ? other : v;
  }
  return v;
}

// One block per row. The candidates are picked in `candidates` rounds of a
// block-wide maximum over each thread's best remaining entry: every thread
// keeps its slice's best few in registers and rescans its slice only when
// all of those were taken, so a row is read about once. Then one warp per
// candidate computes its exact dot product.
__global__ void __launch_bounds__(refine_threads) refine_logits_kernel(refine_logits_params p) {
  __shared__ std::int32_t chosen[max_refined_candidates];
  __shared__ unsigned long long warp_best[2][refine_warps];
  const std::int64_t r = blockIdx.x;
  float* row = p.logits + r * p.logits_stride;
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  unsigned long long kept[kept_per_thread];
  fill_kept(row, p.vocab, ~0ull, kept);
  int left = kept_per_thread;  // places of `kept` not yet taken
  for (int c = 0; c < p.candidates; ++c) {
    // Two buffers: round c + 1 writes the other one while a slow thread may
    // still read this one; round c + 2 comes after c + 1's barrier.
    unsigned long long* best = warp_best[c & 1];
    const unsigned long long mine = warp_max_key(kept[0]);
    if (lane == 0) best[warp] = mine;
    __syncthreads();
    unsigned long long winner = best[0];
    for (int w = 1; w < refine_warps; ++w) winner = best[w] > winner ? best[w] : winner;
    if (threadIdx.x == 0) chosen[c] = id_of(winner);
    if (kept[0] == winner) {  // keys are unique: exactly one thread took it
#pragma unroll
      for (int i = 0; i + 1 < kept_per_thread; ++i) kept[i] = kept[i + 1];
      kept[kept_per_thread - 1] = 0;
      if (--left == 0) {
        fill_kept(row, p.vocab, winner, kept);
        left = kept_per_thread;
      }
    }
  }
  __syncthreads();  // every logit read before any is overwritten
  const auto* x = static_cast<const __nv_bfloat16*>(p.x) + r * p.x_stride;
  for (int c = warp; c < p.candidates; c += refine_warps) {
    const std::int32_t id = chosen[c];
    const auto* embedding = static_cast<const __nv_bfloat16*>(p.table) + id * p.table_stride;
    float sum = 0.0f;
    for (std::int64_t k = lane; k < p.hidden; k += 32) sum += to_float(x[k]) * to_float(embedding[k]);
    sum = warp_sum(sum);
    if (lane == 0) row[id] = sum;
  }
}

}  // namespace

void launch_refine_logits(const refine_logits_params& params, cudaStream_t stream) {
  if (params.rows == 0) return;
  refine_logits_kernel<<<static_cast<unsigned>(params.rows), refine_threads, 0, stream>>>(params);
  TROUPE_CUDA_CHECK_LAUNCH();
}

}  // namespace troupe::cuda

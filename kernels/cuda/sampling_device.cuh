#pragma once
// Device pieces shared by the sampling kernels: the block shape, the value
// orderings the semantics fix (larger first, ties to the lower id), and the
// temperature-scaled logit every stage must compute bit-identically.

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <climits>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/sampling_kernels.hpp"

namespace troupe::cuda {

constexpr int sampling_threads = 512;

/// A logit with its id, ordered larger value first and then lower id.
struct ranked_logit {
  float value;
  std::int32_t id;
};

/// NaN reads as -inf so that orderings stay total.
__device__ __forceinline__ float sanitized(float v) { return isnan(v) ? -INFINITY : v; }

/// logit / temperature with -0 folded into +0 (so that the radix sort and
/// value comparisons agree on ties); NaN as -inf.
__device__ __forceinline__ float scaled_logit(float logit, float temperature) {
  return sanitized(logit / temperature) + 0.0f;
}

/// True when a ranks before b: larger value, or equal value and lower id.
__device__ __forceinline__ bool ranks_before(const ranked_logit& a, const ranked_logit& b) {
  return a.value > b.value || (a.value == b.value && a.id < b.id);
}

struct ranked_first {
  __device__ __forceinline__ ranked_logit operator()(const ranked_logit& a, const ranked_logit& b) const {
    return ranks_before(a, b) ? a : b;
  }
};

struct int_min {
  __device__ __forceinline__ std::int32_t operator()(std::int32_t a, std::int32_t b) const { return a < b ? a : b; }
};

struct int_max {
  __device__ __forceinline__ std::int32_t operator()(std::int32_t a, std::int32_t b) const { return a > b ? a : b; }
};

struct int_sum {
  __device__ __forceinline__ std::int32_t operator()(std::int32_t a, std::int32_t b) const { return a + b; }
};

struct float_sum {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

using ranked_reduce = cub::BlockReduce<ranked_logit, sampling_threads>;
using int_reduce = cub::BlockReduce<std::int32_t, sampling_threads>;
using float_reduce = cub::BlockReduce<float, sampling_threads>;
using float_scan = cub::BlockScan<float, sampling_threads>;

/// Shared scratch of one sampling block; members are reused one at a time,
/// with a barrier between uses.
struct sampling_shared {
  union {
    ranked_reduce::TempStorage ranked;
    int_reduce::TempStorage ints;
    float_reduce::TempStorage floats;
    float_scan::TempStorage scan;
  } temp;
  ranked_logit ranked_result;
  std::int32_t int_result;
  float float_result;
};

/// The block's best-ranked logit, returned to every thread.
__device__ __forceinline__ ranked_logit block_ranked_first(ranked_logit v, sampling_shared& shared) {
  __syncthreads();
  const ranked_logit best = ranked_reduce(shared.temp.ranked).Reduce(v, ranked_first{});
  if (threadIdx.x == 0) shared.ranked_result = best;
  __syncthreads();
  return shared.ranked_result;
}

/// Sum over the block, returned to every thread.
__device__ __forceinline__ float block_float_sum(float v, sampling_shared& shared) {
  __syncthreads();
  const float total = float_reduce(shared.temp.floats).Reduce(v, float_sum{});
  if (threadIdx.x == 0) shared.float_result = total;
  __syncthreads();
  return shared.float_result;
}

/// Integer reduction (int_min / int_max / int_sum) over the block, returned to every thread.
template <class Op>
__device__ __forceinline__ std::int32_t block_int_reduce(std::int32_t v, Op op, sampling_shared& shared) {
  __syncthreads();
  const std::int32_t total = int_reduce(shared.temp.ints).Reduce(v, op);
  if (threadIdx.x == 0) shared.int_result = total;
  __syncthreads();
  return shared.int_result;
}

}  // namespace troupe::cuda

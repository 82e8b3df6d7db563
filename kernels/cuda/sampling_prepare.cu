// Sampling stages 1, 2 and 4: processed logits and their statistics, the
// segmented sort of truncating rows, and the top-n logprobs.

#include <cub/device/device_segmented_radix_sort.cuh>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/sampling_device.cuh"

namespace troupe::cuda {

namespace {

// Steps 1-3 of sampling.hpp on one row: bias (in list order, by one thread,
// so repeated ids add up exactly as a sequential loop would), suppression
// and the allowed-token mask,
// penalties (one entry per distinct id, so threads never share an id), then
// max / argmax / log-normaliser, and the sort keys of a truncating row.
__global__ void __launch_bounds__(sampling_threads) sampling_prepare_kernel(sampler_params p) {
  __shared__ sampling_shared shared;
  const std::int64_t row = blockIdx.x;
  const sampling_row_params rp = p.row_params[row];
  const float* src = p.logits + row * p.logits_stride;
  float* work = p.work + row * p.vocab;
  for (std::int64_t i = threadIdx.x; i < p.vocab; i += sampling_threads) work[i] = src[i];
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int b = rp.bias_begin; b < rp.bias_end; ++b) work[p.biases[b].token] += p.biases[b].bias;
  }
  __syncthreads();
  for (int s = rp.suppressed_begin + static_cast<int>(threadIdx.x); s < rp.suppressed_end; s += sampling_threads)
    work[p.suppressed[s]] = -INFINITY;
  if (rp.mask_begin >= 0) {
    for (std::int64_t i = threadIdx.x; i < p.vocab; i += sampling_threads) {
      const std::int64_t word = i / 32;
      const std::uint32_t bits = word < rp.mask_words ? p.masks[rp.mask_begin + word] : 0u;
      if (((bits >> (i % 32)) & 1u) == 0) work[i] = -INFINITY;
    }
  }
  __syncthreads();
  for (int e = rp.penalty_begin + static_cast<int>(threadIdx.x); e < rp.penalty_end; e += sampling_threads) {
    const penalty_entry entry = p.penalties[e];
    float logit = work[entry.token];
    logit = logit > 0.0f ? logit / rp.repetition_penalty : logit * rp.repetition_penalty;
    const float appeared = entry.output_count > 0 ? 1.0f : 0.0f;
    // Explicitly rounded operations (no fused multiply-add), so the result is
    // bit-identical to the plain float arithmetic of the host reference.
    const float penalty = __fadd_rn(__fmul_rn(rp.frequency_penalty, static_cast<float>(entry.output_count)),
                                    __fmul_rn(rp.presence_penalty, appeared));
    work[entry.token] = __fsub_rn(logit, penalty);
  }
  __syncthreads();

  ranked_logit best{-INFINITY, INT_MAX};
  for (std::int64_t i = threadIdx.x; i < p.vocab; i += sampling_threads) {
    const ranked_logit candidate{sanitized(work[i]), static_cast<std::int32_t>(i)};
    if (ranks_before(candidate, best)) best = candidate;
  }
  best = block_ranked_first(best, shared);
  float sum = 0.0f;
  if (best.value != -INFINITY) {
    for (std::int64_t i = threadIdx.x; i < p.vocab; i += sampling_threads) sum += expf(sanitized(work[i]) - best.value);
  }
  sum = block_float_sum(sum, shared);
  if (threadIdx.x == 0) {
    row_statistics stats;
    stats.max = best.value;
    stats.argmax = best.value == -INFINITY ? 0 : best.id;
    stats.log_normalizer = best.value == -INFINITY ? INFINITY : best.value + logf(sum);
    p.stats[row] = stats;
  }
  if (rp.sort_row >= 0) {
    float* keys = p.sort_keys_in + static_cast<std::int64_t>(rp.sort_row) * p.vocab;
    std::int32_t* ids = p.sort_ids_in + static_cast<std::int64_t>(rp.sort_row) * p.vocab;
    for (std::int64_t i = threadIdx.x; i < p.vocab; i += sampling_threads) {
      keys[i] = scaled_logit(work[i], rp.temperature);
      ids[i] = static_cast<std::int32_t>(i);
    }
  }
}

// Step 3's top list: round n picks the best-ranked id strictly after round
// n-1's pick in the order (value desc, id asc), so ties come out in id order.
__global__ void __launch_bounds__(sampling_threads) sampling_top_kernel(sampler_params p) {
  __shared__ sampling_shared shared;
  const std::int64_t row = blockIdx.x;
  const int wanted = min(p.row_params[row].top_logprobs, p.max_top);
  if (wanted <= 0) return;  // uniform over the block
  const float* work = p.work + row * p.vocab;
  const row_statistics stats = p.stats[row];
  ranked_logit previous{INFINITY, -1};
  for (int n = 0; n < wanted; ++n) {
    ranked_logit best{-INFINITY, INT_MAX};
    for (std::int64_t i = threadIdx.x; i < p.vocab; i += sampling_threads) {
      const ranked_logit candidate{sanitized(work[i]), static_cast<std::int32_t>(i)};
      if (ranks_before(previous, candidate) && ranks_before(candidate, best)) best = candidate;
    }
    best = block_ranked_first(best, shared);
    if (threadIdx.x == 0) {
      p.top[row * p.max_top + n] = sampled_token{best.id, best.value - stats.log_normalizer};
    }
    previous = best;
  }
}

}  // namespace

void launch_sampling_prepare(const sampler_params& params, cudaStream_t stream) {
  if (params.rows == 0) return;
  sampling_prepare_kernel<<<static_cast<unsigned>(params.rows), sampling_threads, 0, stream>>>(params);
  TROUPE_CUDA_CHECK_LAUNCH();
}

std::size_t sampling_sort_temp_bytes(const sampler_params& params) {
  if (params.sort_rows == 0) return 0;
  std::size_t bytes = 0;
  TROUPE_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
      nullptr, bytes, params.sort_keys_in, params.sort_keys, params.sort_ids_in, params.sort_ids,
      static_cast<std::int64_t>(params.sort_rows) * params.vocab, params.sort_rows, params.sort_offsets,
      params.sort_offsets + 1));
  return bytes;
}

void launch_sampling_sort(const sampler_params& params, void* temp, std::size_t temp_bytes, cudaStream_t stream) {
  if (params.sort_rows == 0) return;
  TROUPE_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
      temp, temp_bytes, params.sort_keys_in, params.sort_keys, params.sort_ids_in, params.sort_ids,
      static_cast<std::int64_t>(params.sort_rows) * params.vocab, params.sort_rows, params.sort_offsets,
      params.sort_offsets + 1, 0, static_cast<int>(sizeof(float) * 8), stream));
  TROUPE_CUDA_CHECK_LAUNCH();
}

void launch_sampling_top(const sampler_params& params, cudaStream_t stream) {
  if (params.rows == 0 || params.max_top == 0) return;
  sampling_top_kernel<<<static_cast<unsigned>(params.rows), sampling_threads, 0, stream>>>(params);
  TROUPE_CUDA_CHECK_LAUNCH();
}

}  // namespace troupe::cuda

// Sampling stage 3: steps 4-6 of sampling.hpp for every row — argmax, or
// temperature, the top-k / top-p / min-p cut (read off the sorted keys) and
// the inverse-CDF draw over the kept ids in ascending id order.

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/sampling_device.cuh"
#include "kernels/philox.hpp"

namespace troupe::cuda {

namespace {

constexpr int scan_items = 8;  // consecutive elements per thread in a scan chunk

// The first index i < count whose inclusive running sum of value(0..i)
// satisfies reached(sum); -1 when none does. Chunks of
// sampling_threads * scan_items elements, each thread holding consecutive
// ones (CUB's blocked arrangement), so the sum runs in index order.
template <class Value, class Reached>
__device__ std::int64_t first_reaching(std::int64_t count, Value value, Reached reached, sampling_shared& shared) {
  constexpr std::int64_t chunk = static_cast<std::int64_t>(sampling_threads) * scan_items;
  float running = 0.0f;
  for (std::int64_t base = 0; base < count; base += chunk) {
    const std::int64_t first = base + static_cast<std::int64_t>(threadIdx.x) * scan_items;
    float items[scan_items];
#pragma unroll
    for (int k = 0; k < scan_items; ++k) items[k] = first + k < count ? value(first + k) : 0.0f;
    float aggregate = 0.0f;
    __syncthreads();  // the scratch union may still be in use
    float_scan(shared.temp.scan).InclusiveSum(items, items, aggregate);
    std::int32_t local = INT_MAX;
#pragma unroll
    for (int k = 0; k < scan_items; ++k) {
      if (local == INT_MAX && first + k < count && reached(running + items[k]))
        local = static_cast<std::int32_t>(threadIdx.x) * scan_items + k;
    }
    const std::int32_t found = block_int_reduce(local, int_min{}, shared);
    if (found != INT_MAX) return base + found;
    running += aggregate;
  }
  return -1;
}

// The sorted prefix kept by top-k, top-p and min-p, as its last entry: ids
// ranking at or before (cut_key, cut_id) are kept. Returns false when the
// row has no finite logit.
__device__ bool truncation_cut(const sampler_params& p, const sampling_row_params& rp, float max_scaled,
                               sampling_shared& shared, float* cut_key, std::int32_t* cut_id) {
  const float* keys = p.sort_keys + static_cast<std::int64_t>(rp.sort_row) * p.vocab;
  const std::int32_t* ids = p.sort_ids + static_cast<std::int64_t>(rp.sort_row) * p.vocab;
  std::int32_t finite = 0;
  for (std::int64_t i = threadIdx.x; i < p.vocab; i += sampling_threads) finite += keys[i] > -INFINITY ? 1 : 0;
  finite = block_int_reduce(finite, int_sum{}, shared);
  if (finite == 0) return false;
  std::int64_t kept = rp.top_k > 0 && rp.top_k < finite ? rp.top_k : finite;
  const auto prob = [&](std::int64_t i) { return expf(keys[i] - max_scaled); };
  if (rp.top_p < 1.0f) {
    float mass = 0.0f;
    for (std::int64_t i = threadIdx.x; i < kept; i += sampling_threads) mass += prob(i);
    mass = block_float_sum(mass, shared);
    const float top_p = rp.top_p;
    const std::int64_t last = first_reaching(
        kept, prob, [=](float sum) { return sum / mass >= top_p; }, shared);
    if (last >= 0) kept = last + 1;
  }
  if (rp.min_p > 0.0f) {
    // Sorted probabilities never increase, so the ids at or above the
    // threshold are exactly a prefix; its length is their count.
    std::int32_t above = 0;
    for (std::int64_t i = threadIdx.x; i < kept; i += sampling_threads) above += prob(i) >= rp.min_p ? 1 : 0;
    kept = block_int_reduce(above, int_sum{}, shared);
  }
  *cut_key = keys[kept - 1];
  *cut_id = ids[kept - 1];
  return true;
}

__global__ void __launch_bounds__(sampling_threads) sampling_select_kernel(sampler_params p) {
  __shared__ sampling_shared shared;
  const std::int64_t row = blockIdx.x;
  const sampling_row_params rp = p.row_params[row];
  const row_statistics stats = p.stats[row];
  const float* work = p.work + row * p.vocab;
  if (rp.greedy != 0 || stats.max == -INFINITY) {
    if (threadIdx.x == 0) p.results[row] = sampled_token{stats.argmax, work[stats.argmax] - stats.log_normalizer};
    return;  // uniform over the block
  }
  const float max_scaled = scaled_logit(stats.max, rp.temperature);
  float cut_key = -INFINITY;
  std::int32_t cut_id = INT_MAX;
  const bool truncates = rp.sort_row >= 0;
  if (truncates && !truncation_cut(p, rp, max_scaled, shared, &cut_key, &cut_id)) {
    if (threadIdx.x == 0) p.results[row] = sampled_token{stats.argmax, work[stats.argmax] - stats.log_normalizer};
    return;
  }
  const float temperature = rp.temperature;
  const auto kept_prob = [=](std::int64_t i) {
    const float s = scaled_logit(work[i], temperature);
    const bool kept = s > -INFINITY && (!truncates || s > cut_key || (s == cut_key && i <= cut_id));
    return kept ? expf(s - max_scaled) : 0.0f;
  };
  float mass = 0.0f;
  std::int32_t last_kept = -1;
  for (std::int64_t i = threadIdx.x; i < p.vocab; i += sampling_threads) {
    const float prob = kept_prob(i);
    mass += prob;
    if (prob > 0.0f) last_kept = static_cast<std::int32_t>(i);
  }
  mass = block_float_sum(mass, shared);
  last_kept = block_int_reduce(last_kept, int_max{}, shared);
  const float u = philox_uniform(rp.seed, rp.token_index);
  const std::int64_t drawn = first_reaching(
      p.vocab, kept_prob, [=](float sum) { return sum / mass > u; }, shared);
  if (threadIdx.x == 0) {
    const std::int32_t token =
        drawn >= 0 ? static_cast<std::int32_t>(drawn) : (last_kept >= 0 ? last_kept : stats.argmax);
    p.results[row] = sampled_token{token, work[token] - stats.log_normalizer};
  }
}

}  // namespace

void launch_sampling_select(const sampler_params& params, cudaStream_t stream) {
  if (params.rows == 0) return;
  sampling_select_kernel<<<static_cast<unsigned>(params.rows), sampling_threads, 0, stream>>>(params);
  TROUPE_CUDA_CHECK_LAUNCH();
}

}  // namespace troupe::cuda

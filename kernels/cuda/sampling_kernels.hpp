#pragma once
// Device sampling with the semantics of kernels/sampling.hpp, in four
// stages per step: prepare (bias, suppression, penalties, row statistics,
// sort keys), a segmented descending sort of the rows that truncate,
// select (argmax, or the top-k / top-p / min-p cut and the inverse-CDF
// draw), and the top-n logprobs. One thread block per logits row.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace troupe::cuda {

/// One row's settings, built on the host from its sampling_row.
struct sampling_row_params {
  float temperature = 1.0f;  ///< > 0 unless greedy
  float top_p = 1.0f;        ///< (0, 1]; 1 keeps everything
  float min_p = 0.0f;        ///< [0, 1]
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::int32_t top_k = 0;         ///< <= 0: disabled
  std::int32_t top_logprobs = 0;  ///< entries wanted in the top list
  std::int32_t greedy = 0;        ///< 1: argmax (temperature 0 or top_k 1)
  std::int32_t sort_row = -1;     ///< row of the sort workspace when truncating, else -1
  std::int32_t bias_begin = 0;    ///< [begin, end) into sampler_params::biases, applied in order
  std::int32_t bias_end = 0;
  std::int32_t suppressed_begin = 0;  ///< [begin, end) into sampler_params::suppressed
  std::int32_t suppressed_end = 0;
  std::int32_t penalty_begin = 0;  ///< [begin, end) into sampler_params::penalties
  std::int32_t penalty_end = 0;
  std::int32_t mask_begin = -1;  ///< first word of the row's allowed-token mask in sampler_params::masks; -1: none
  std::int32_t mask_words = 0;   ///< words of it; ids past them are forbidden
  std::uint64_t seed = 0;
  std::uint64_t token_index = 0;
};

/// A logit_bias entry: logits[token] += bias.
struct logit_bias_entry {
  std::int32_t token = 0;
  float bias = 0.0f;
};

/// A distinct id of the prompt or the output, with its count in the output.
struct penalty_entry {
  std::int32_t token = 0;
  std::int32_t output_count = 0;
};

/// Per-row statistics of the processed logits (before temperature).
struct row_statistics {
  float max = 0.0f;             ///< largest logit (NaN read as -inf)
  float log_normalizer = 0.0f;  ///< max + log Σ e^(l - max): logprob = l - this (+inf if every logit is -inf)
  std::int32_t argmax = 0;      ///< lowest id holding max
};

/// A token and its log-probability.
struct sampled_token {
  std::int32_t token = 0;
  float logprob = 0.0f;
};

/// Buffers of one sampling launch; L = rows, V = vocab.
struct sampler_params {
  const float* logits = nullptr;  ///< [L, V] input, row stride logits_stride (not modified)
  std::int64_t logits_stride = 0;
  float* work = nullptr;  ///< [L, V] processed logits (packed)
  std::int64_t rows = 0;
  std::int64_t vocab = 0;
  const sampling_row_params* row_params = nullptr;  ///< [L]
  const logit_bias_entry* biases = nullptr;
  const std::int32_t* suppressed = nullptr;
  const penalty_entry* penalties = nullptr;
  const std::uint32_t* masks = nullptr;        ///< allowed-token bitmasks of the constrained rows, packed
  row_statistics* stats = nullptr;             ///< [L]
  float* sort_keys_in = nullptr;               ///< [sort_rows, V] logits / temperature (NaN as -inf, -0 as +0)
  std::int32_t* sort_ids_in = nullptr;         ///< [sort_rows, V] ids 0..V-1
  float* sort_keys = nullptr;                  ///< [sort_rows, V] sorted descending, stable in id
  std::int32_t* sort_ids = nullptr;            ///< [sort_rows, V]
  const std::int32_t* sort_offsets = nullptr;  ///< [sort_rows + 1] = r * V
  std::int32_t sort_rows = 0;
  sampled_token* results = nullptr;  ///< [L]
  sampled_token* top = nullptr;      ///< [L, max_top] most likely first
  std::int32_t max_top = 0;
};

/// Bias, suppression, the allowed-token mask, penalties, statistics and sort keys.
void launch_sampling_prepare(const sampler_params& params, cudaStream_t stream);
/// Temporary storage the sort needs, bytes.
std::size_t sampling_sort_temp_bytes(const sampler_params& params);
/// Sorts the truncating rows' keys (descending, ties in ascending id).
void launch_sampling_sort(const sampler_params& params, void* temp, std::size_t temp_bytes, cudaStream_t stream);
/// The sampled token of every row and its logprob.
void launch_sampling_select(const sampler_params& params, cudaStream_t stream);
/// The top_logprobs most likely ids of every row that asks for them.
void launch_sampling_top(const sampler_params& params, cudaStream_t stream);

}  // namespace troupe::cuda

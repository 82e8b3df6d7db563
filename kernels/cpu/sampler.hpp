#pragma once
// Sampling of one logits row, exactly as kernels/sampling.hpp specifies.

#include <cstdint>
#include <vector>

#include "kernels/cpu/isa_kernels.hpp"
#include "kernels/sampling.hpp"

namespace troupe::cpu {

/// Buffers one thread reuses across rows (each up to the vocabulary size).
struct sampler_scratch {
  std::vector<float> logits;        ///< the row after bias, suppression and penalties
  std::vector<float> scaled;        ///< logits / temperature
  std::vector<float> weights;       ///< exp(scaled - max) of the kept ids
  std::vector<std::uint64_t> keys;  ///< order keys (value desc, id asc)
  std::vector<std::int32_t> ids;
};

/// The distribution step 6 of kernels/sampling.hpp draws from. Its arrays
/// live in the sampler_scratch that prepared it (valid until its next use).
struct draw_distribution {
  std::int32_t point = -1;            ///< >= 0: all mass on this id (greedy, or every id suppressed)
  const std::int32_t* ids = nullptr;  ///< [size] kept ids, ascending; null: the ids 0 .. size-1
  const float* weights = nullptr;     ///< [size] exp(z - z_max) of the kept ids, z = logits / temperature
  std::int64_t size = 0;
  double total = 0.0;  ///< Σ weights in order, in double: the normaliser of the draw
};

/// Steps 1-2, 4 and 5 of kernels/sampling.hpp on `logits[0, vocab)`: the
/// adjusted logits (step 3's input) go to scratch.logits, the kept ids and
/// weights to scratch.ids / scratch.weights. Throws std::invalid_argument
/// for token ids outside the vocabulary or missing params.
draw_distribution prepare_distribution(const isa_kernels& kernels, const float* logits, std::int64_t vocab,
                                       const sampling_row& row, sampler_scratch& scratch);

/// Step 6: the first kept id, in ascending order, whose cumulative weight
/// exceeds u × total (the last one with weight if rounding leaves none).
std::int32_t draw_token(const draw_distribution& distribution, float u);

/// Step 3 for out.token when `params` asks for logprobs: its log_softmax
/// and the top entries of the adjusted logits `adjusted[0, vocab)`.
void fill_logprobs(const isa_kernels& kernels, const sampling_params& params, const float* adjusted, std::int64_t vocab,
                   sample_output& out);

/// Samples `row` from `logits[0, vocab)`. Throws std::invalid_argument for
/// token ids outside the vocabulary or missing params.
sample_output sample_row(const isa_kernels& kernels, const float* logits, std::int64_t vocab, const sampling_row& row,
                         sampler_scratch& scratch);

/// A key whose descending order is "larger value first, then lower id".
std::uint64_t order_key(float value, std::int32_t id);

}  // namespace troupe::cpu

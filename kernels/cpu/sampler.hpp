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

/// Samples `row` from `logits[0, vocab)`. Throws std::invalid_argument for
/// token ids outside the vocabulary or missing params.
sample_output sample_row(const isa_kernels& kernels, const float* logits, std::int64_t vocab, const sampling_row& row,
                         sampler_scratch& scratch);

/// A key whose descending order is "larger value first, then lower id".
std::uint64_t order_key(float value, std::int32_t id);

}  // namespace troupe::cpu

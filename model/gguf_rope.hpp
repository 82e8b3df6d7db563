#pragma once
// llama.cpp writes Llama 3 rope scaling not as metadata but as a tensor of
// per-frequency divisors ("rope_freqs.weight"); this recovers the HF
// rope_scaling parameters that produce exactly those divisors.

#include <cstdint>
#include <optional>

#include "model/gguf.hpp"

namespace troupe {

/// HF `rope_type: llama3` parameters.
struct llama3_rope_parameters {
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  std::int64_t original_max_position = 8192;
};

/// The llama3 parameters whose frequencies divide the base frequencies
/// (theta^(-2i/head_dim)) by `factors` (head_dim / 2 f32 values); nullopt
/// when every divisor is 1. Throws std::runtime_error naming the file and
/// tensor when the tensor has the wrong type or size, or no llama3
/// parameters reproduce it.
std::optional<llama3_rope_parameters> llama3_rope_from_factors(const gguf_file& file, const gguf_tensor& factors,
                                                               double theta, std::int64_t head_dim);

}  // namespace troupe

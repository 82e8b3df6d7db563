#pragma once
// Rotary position embedding parameters, as HF `config.json` describes them,
// and the one function every backend uses to turn them into frequencies.

#include <cstdint>
#include <vector>

namespace troupe {

/// Which `rope_scaling.rope_type` (or `rope_parameters.rope_type`) applies.
enum class rope_scaling_kind : std::uint8_t { none, linear, dynamic, llama3 };

/// Everything needed to compute rotary frequencies for one model.
struct rope_spec {
  int head_dim = 0;        ///< rotated dimensions per head (HF rotates the full head_dim)
  double theta = 10000.0;  ///< `rope_theta`
  rope_scaling_kind scaling = rope_scaling_kind::none;
  double factor = 1.0;                          ///< linear / dynamic / llama3 `factor`
  double low_freq_factor = 1.0;                 ///< llama3 only
  double high_freq_factor = 4.0;                ///< llama3 only
  std::int64_t original_max_position = 8192;    ///< llama3: `original_max_position_embeddings`
  std::int64_t max_position_embeddings = 2048;  ///< config `max_position_embeddings` (dynamic)
};

/// Inverse frequencies, head_dim / 2 floats, for a sequence whose context is
/// `seq_len` tokens long. Only `dynamic` scaling depends on `seq_len` (NTK
/// base rescaled once the sequence outgrows `max_position_embeddings`, as HF
/// does for the sequence being run); linear scaling is folded in by dividing
/// the frequencies, so the caller multiplies positions by the result unchanged.
std::vector<float> rope_inverse_frequencies(const rope_spec& spec, std::int64_t seq_len);

/// True when frequencies differ between sequences of different lengths.
inline bool rope_depends_on_length(const rope_spec& spec) { return spec.scaling == rope_scaling_kind::dynamic; }

}  // namespace troupe

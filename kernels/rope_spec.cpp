#include "kernels/rope_spec.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace troupe {

namespace {

// Frequencies are computed in float32 like transformers does, so f32 logits
// agree to the last bits at long positions.
std::vector<float> base_frequencies(double theta, int head_dim) {
  std::vector<float> inv_freq(static_cast<std::size_t>(head_dim / 2));
  const float base = static_cast<float>(theta);
  for (int i = 0; i < head_dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv_freq[static_cast<std::size_t>(i)] = 1.0f / std::pow(base, exponent);
  }
  return inv_freq;
}

void apply_llama3(const rope_spec& spec, std::vector<float>& inv_freq) {
  const float factor = static_cast<float>(spec.factor);
  const float low = static_cast<float>(spec.low_freq_factor);
  const float high = static_cast<float>(spec.high_freq_factor);
  const float old_context = static_cast<float>(spec.original_max_position);
  const float low_freq_wavelen = old_context / low;
  const float high_freq_wavelen = old_context / high;
  for (float& f : inv_freq) {
    const float wavelen = 2.0f * std::numbers::pi_v<float> / f;
    const float scaled = wavelen > low_freq_wavelen ? f / factor : f;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    if (medium) {
      const float smooth = (old_context / wavelen - low) / (high - low);
      f = (1.0f - smooth) * scaled / factor + smooth * scaled;
    } else {
      f = scaled;
    }
  }
}

}  // namespace

std::vector<float> rope_inverse_frequencies(const rope_spec& spec, std::int64_t seq_len) {
  double theta = spec.theta;
  if (spec.scaling == rope_scaling_kind::dynamic && seq_len > spec.max_position_embeddings) {
    const double dim = spec.head_dim;
    const double ratio = spec.factor * static_cast<double>(seq_len) / static_cast<double>(spec.max_position_embeddings);
    theta *= std::pow(ratio - (spec.factor - 1.0), dim / (dim - 2.0));
  }
  std::vector<float> inv_freq = base_frequencies(theta, spec.head_dim);
  if (spec.scaling == rope_scaling_kind::linear) {
    for (float& f : inv_freq) f /= static_cast<float>(spec.factor);
  } else if (spec.scaling == rope_scaling_kind::llama3) {
    apply_llama3(spec, inv_freq);
  }
  return inv_freq;
}

}  // namespace troupe

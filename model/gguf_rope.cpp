#include "model/gguf_rope.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <stdexcept>
#include <vector>

#include "kernels/rope_spec.hpp"

namespace troupe {

namespace {

// With low_freq_factor fixed at 1, a divisor f strictly between 1 and the
// factor sits in the smooth band: 1/f = (1 - s)/factor + s with
// s = (O/wavelength - 1)/(b - 1), linear in 1/wavelength. Two such points
// give O and b; with fewer, any thresholds between the unscaled and scaled
// wavelengths reproduce the divisors.
std::optional<llama3_rope_parameters> solve(const std::vector<double>& wavelengths, const std::vector<float>& divisors,
                                            double factor) {
  std::vector<std::size_t> smooth;
  double longest_unscaled = 0.0, shortest_scaled = INFINITY;
  for (std::size_t i = 0; i < divisors.size(); ++i) {
    const double f = divisors[i];
    if (std::abs(f - 1.0) < 1e-6) {
      longest_unscaled = std::max(longest_unscaled, wavelengths[i]);
    } else if (std::abs(f - factor) < 1e-6 * factor) {
      shortest_scaled = std::min(shortest_scaled, wavelengths[i]);
    } else {
      smooth.push_back(i);
    }
  }
  llama3_rope_parameters out;
  out.factor = factor;
  double original = 0.0, high = 0.0;
  if (smooth.size() >= 2) {
    const auto s = [&](std::size_t i) { return (1.0 / divisors[i] - 1.0 / factor) / (1.0 - 1.0 / factor); };
    const std::size_t a = smooth.front(), b = smooth.back();
    const double u = (s(a) - s(b)) / (1.0 / wavelengths[a] - 1.0 / wavelengths[b]);
    const double v = u / wavelengths[a] - s(a);
    if (!(v > 0.0)) return std::nullopt;
    high = 1.0 + 1.0 / v;
    original = u / v;
  } else {
    if (!std::isfinite(shortest_scaled) || longest_unscaled <= 0.0) return std::nullopt;
    original = std::floor(shortest_scaled);
    high = original / longest_unscaled;
  }
  // Scale all three so the original context is a whole number of tokens.
  const double rounded = std::round(original);
  if (!(rounded >= 1.0) || !(high > 1.0)) return std::nullopt;
  out.original_max_position = static_cast<std::int64_t>(rounded);
  out.low_freq_factor = rounded / original;
  out.high_freq_factor = high * rounded / original;
  return out;
}

}  // namespace

std::optional<llama3_rope_parameters> llama3_rope_from_factors(const gguf_file& file, const gguf_tensor& factors,
                                                               double theta, std::int64_t head_dim) {
  const auto fail = [&](const std::string& message) {
    throw std::runtime_error(file.display_name() + ": tensor 'rope_freqs.weight': " + message);
  };
  if (head_dim < 2) fail("the head size " + std::to_string(head_dim) + " leaves no rotary frequency to scale");
  if (factors.type != ggml_type::f32 || factors.dims.size() != 1 ||
      factors.dims[0] != static_cast<std::uint64_t>(head_dim / 2))
    fail("must be " + std::to_string(head_dim / 2) + " F32 values (one per rotary frequency)");
  std::vector<float> divisors(factors.dims[0]);
  std::memcpy(divisors.data(), factors.data, divisors.size() * sizeof(float));
  const double factor = *std::max_element(divisors.begin(), divisors.end());
  if (std::all_of(divisors.begin(), divisors.end(), [](float f) { return f == 1.0f; })) return std::nullopt;
  rope_spec base;
  base.head_dim = static_cast<int>(head_dim);
  base.theta = theta;
  const std::vector<float> base_frequencies = rope_inverse_frequencies(base, 1);
  std::vector<double> wavelengths;
  for (float f : base_frequencies) wavelengths.push_back(2.0 * std::numbers::pi / f);
  const auto parameters = solve(wavelengths, divisors, factor);
  if (parameters) {
    rope_spec scaled = base;
    scaled.scaling = rope_scaling_kind::llama3;
    scaled.factor = parameters->factor;
    scaled.low_freq_factor = parameters->low_freq_factor;
    scaled.high_freq_factor = parameters->high_freq_factor;
    scaled.original_max_position = parameters->original_max_position;
    const std::vector<float> frequencies = rope_inverse_frequencies(scaled, 1);
    bool matches = true;
    for (std::size_t i = 0; i < divisors.size(); ++i) {
      const double expected = base_frequencies[i] / divisors[i];
      matches = matches && std::abs(frequencies[i] - expected) <= 1e-4 * expected;
    }
    if (matches) return parameters;
  }
  throw std::runtime_error(file.display_name() +
                           ": tensor 'rope_freqs.weight': per-frequency RoPE divisors that no Llama 3 rope scaling "
                           "reproduces are not supported");
}

}  // namespace troupe

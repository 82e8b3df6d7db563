// Weight-only quantisation on every fixture architecture: logits of the
// quantised model against transformers' (of the unquantised weights) within
// a bound recorded per format. The fixtures are tiny random-weight models
// (hidden 64), the hard case for round to nearest: no structure, and each
// logit a sum over few terms, so single logits move a lot (max |Δ| / max
// |logit| measured 0.03-0.11 for int8 and 0.24-1.0 for int4); the bound is
// on the relative RMS error over all logits, about 1.5× the largest
// measured on 2026-11-25, and the trained demo model's test
// (tests/model/demo_quantized_test.cpp) is the one that bounds quality.

#include <gtest/gtest.h>

#include <cmath>

#include "tests/forward/forward_fixture.hpp"

namespace troupe {
namespace {

using testing::backend_choice;
using testing::fixture_model;

struct format_bound {
  weight_quantization format;
  double f32_rms_error;   ///< ‖Δlogits‖₂ / ‖logits‖₂ against transformers, f32 fixtures
  double bf16_rms_error;  ///< the same for the bf16 fixtures (smaller weights, calmer logits)
};

// Measured maxima (f32 / bf16 fixtures): int8 0.063 / 0.026, int4 0.60 /
// 0.25, int4_asym 0.50 / 0.23.
constexpr format_bound bounds[] = {
    {weight_quantization::int8, 0.1, 0.04},
    {weight_quantization::int4, 0.9, 0.37},
    {weight_quantization::int4_asym, 0.75, 0.35},
};

double relative_rms_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(diff / norm);
}

class QuantizedFidelity : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantizedFidelity, LogitsWithinEachFormatsBound) {
  for (const format_bound& bound : bounds) {
    backend_choice choice;
    choice.quantization = bound.format;
    auto f = fixture_model::load(GetParam(), choice);
    batch_runner runner(*f.model, runner_options{});
    const auto logits = runner.prompt_logits(f.prompts, 64);
    double worst = 0;
    for (std::size_t i = 0; i < f.prompts.size(); ++i) {
      ASSERT_EQ(logits[i].size(), f.logits[i].data.size());
      worst = std::max(worst, relative_rms_error(logits[i], f.logits[i].data));
    }
    std::cout << GetParam() << " " << quantization_name(bound.format) << ": relative RMS error " << worst << "\n";
    EXPECT_LE(worst, f.dtype_name == "f32" ? bound.f32_rms_error : bound.bf16_rms_error)
        << GetParam() << " " << quantization_name(bound.format);
    EXPECT_GT(worst, 0.0) << "quantisation changed nothing: was it applied?";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, QuantizedFidelity,
                         ::testing::Values("llama_f32", "llama_bf16", "mistral_f32", "mistral_bf16", "qwen2_f32",
                                           "qwen2_bf16", "qwen3_f32", "qwen3_bf16"));

}  // namespace
}  // namespace troupe

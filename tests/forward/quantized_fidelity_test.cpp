// Weight-only quantisation on every fixture architecture: logits of the
// quantised model against transformers' (of the unquantised weights) within
// a bound recorded per format, and the same for the unquantised troupe
// logits as the yardstick. The fixtures' weights are random, which is the
// hard case for round-to-nearest (no structure, every group's range set by
// noise); the bounds are about 1.5× the largest error measured on
// 2026-11-25 (kernels/cpu/README.md).

#include <gtest/gtest.h>

#include "tests/forward/forward_fixture.hpp"

namespace troupe {
namespace {

using testing::backend_choice;
using testing::fixture_model;
using testing::relative_max_error;

struct format_bound {
  weight_quantization format;
  double max_relative_error;  ///< max |Δlogit| / max |logit| against transformers
};

constexpr format_bound bounds[] = {
    {weight_quantization::int8, 0.03},
    {weight_quantization::int4, 0.15},
    {weight_quantization::int4_asym, 0.15},
};

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
      worst = std::max(worst, relative_max_error(logits[i], f.logits[i].data));
    }
    std::cout << GetParam() << " " << quantization_name(bound.format) << ": relative max error " << worst << "\n";
    EXPECT_LE(worst, bound.max_relative_error) << GetParam() << " " << quantization_name(bound.format);
    EXPECT_GT(worst, 0.0) << "quantisation changed nothing: was it applied?";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, QuantizedFidelity,
                         ::testing::Values("llama_f32", "llama_bf16", "mistral_f32", "mistral_bf16", "qwen2_f32",
                                           "qwen2_bf16", "qwen3_f32", "qwen3_bf16"));

}  // namespace
}  // namespace troupe

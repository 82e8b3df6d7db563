// The forward pass against HF transformers: logits for fixed prompts and
// greedy continuations, on every fixture architecture, in f32 and bf16.

#include <gtest/gtest.h>

#include "tests/forward/forward_fixture.hpp"

namespace troupe {
namespace {

using testing::fixture_model;
using testing::relative_max_error;

class Fidelity : public ::testing::TestWithParam<std::string> {};

TEST_P(Fidelity, LogitsMatchTransformers) {
  auto f = fixture_model::load(GetParam());
  batch_runner runner(*f.model, runner_options{});
  const double tolerance = f.dtype_name == "f32" ? 1e-4 : 2e-2;
  const auto logits = runner.prompt_logits(f.prompts, 64);
  for (std::size_t i = 0; i < f.prompts.size(); ++i) {
    ASSERT_EQ(logits[i].size(), f.logits[i].data.size());
    const double error = relative_max_error(logits[i], f.logits[i].data);
    EXPECT_LE(error, tolerance) << GetParam() << " prompt " << i;
  }
}

TEST_P(Fidelity, GreedyContinuationsMatchTransformers) {
  auto f = fixture_model::load(GetParam());
  if (f.dtype_name != "f32") return;  // bf16 rounding makes near-ties; the issue asks f32 equality
  batch_runner runner(*f.model, runner_options{});
  const auto results = runner.generate(testing::greedy_requests(f));
  for (std::size_t i = 0; i < results.size(); ++i) EXPECT_EQ(results[i].tokens, f.greedy[i]) << "prompt " << i;
}

INSTANTIATE_TEST_SUITE_P(Models, Fidelity,
                         ::testing::Values("llama_f32", "llama_bf16", "mistral_f32", "mistral_bf16", "qwen2_f32",
                                           "qwen2_bf16", "qwen3_f32", "qwen3_bf16"));

}  // namespace
}  // namespace troupe

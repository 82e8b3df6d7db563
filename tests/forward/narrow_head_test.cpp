// A drafter's LM head narrowed to the first ids of the vocabulary (knob
// draft_vocab_size): its logits must be the full head's for those ids, and
// nothing else of the model may change.

#include <gtest/gtest.h>

#include <cmath>

#include "tests/forward/forward_fixture.hpp"

namespace troupe {
namespace {

using testing::fixture_model;

std::vector<std::vector<float>> logits_of(llama_model& model, const std::vector<std::vector<std::int32_t>>& prompts) {
  batch_runner runner(model, runner_options{});
  return runner.prompt_logits(prompts, 64);
}

class NarrowHead : public ::testing::TestWithParam<std::string> {};

TEST_P(NarrowHead, LogitsAreTheFullHeadsForTheFirstIds) {
  auto f = fixture_model::load(GetParam());
  const std::int64_t vocab = f.model->vocab_size();
  const std::int64_t width = vocab / 3;  // not a multiple of the kernels' 16-output panels
  ASSERT_GT(width, 16);
  llama_model narrow(f.ckpt.config(), f.ckpt.weights(), *f.device, weight_quantization::none, std::nullopt, width);
  EXPECT_EQ(narrow.logits_width(), width);
  EXPECT_EQ(narrow.vocab_size(), vocab);
  EXPECT_EQ(f.model->logits_width(), vocab);

  const auto full = logits_of(*f.model, f.prompts);
  const auto got = logits_of(narrow, f.prompts);
  ASSERT_EQ(got.size(), full.size());
  for (std::size_t p = 0; p < got.size(); ++p) {
    const std::size_t rows = f.prompts[p].size();
    ASSERT_EQ(got[p].size(), rows * static_cast<std::size_t>(width)) << "prompt " << p;
    ASSERT_EQ(full[p].size(), rows * static_cast<std::size_t>(vocab)) << "prompt " << p;
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::int64_t id = 0; id < width; ++id) {
        const float expected = full[p][r * static_cast<std::size_t>(vocab) + static_cast<std::size_t>(id)];
        const float value = got[p][r * static_cast<std::size_t>(width) + static_cast<std::size_t>(id)];
        // The same dot products; a GEMM may block a narrower output differently.
        ASSERT_NEAR(value, expected, 1e-4f * std::max(1.0f, std::fabs(expected)))
            << "prompt " << p << " row " << r << " id " << id;
      }
    }
  }
}

TEST(NarrowHeadRows, MoreRowsThanTheVocabularyAreRefused) {
  auto f = fixture_model::load("llama_f32");
  const std::int64_t vocab = f.model->vocab_size();
  EXPECT_THROW(
      llama_model(f.ckpt.config(), f.ckpt.weights(), *f.device, weight_quantization::none, std::nullopt, vocab + 1),
      std::invalid_argument);
  EXPECT_THROW(llama_model(f.ckpt.config(), f.ckpt.weights(), *f.device, weight_quantization::none, std::nullopt, -1),
               std::invalid_argument);
  // All of them is the full head.
  llama_model whole(f.ckpt.config(), f.ckpt.weights(), *f.device, weight_quantization::none, std::nullopt, vocab);
  EXPECT_EQ(logits_of(whole, f.prompts), logits_of(*f.model, f.prompts));
}

INSTANTIATE_TEST_SUITE_P(Models, NarrowHead, ::testing::Values("llama_f32", "qwen3_bf16", "mistral_bf16"));

}  // namespace
}  // namespace troupe

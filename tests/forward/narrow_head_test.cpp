// A drafter's LM head narrowed to the first ids of the vocabulary (knob
// draft_vocab_size): its logits must be the full head's for those ids, and
// nothing else of the model may change.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tests/forward/forward_fixture.hpp"

namespace troupe {
namespace {

using testing::fixture_model;
using testing::logits_of;

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

// A tied 4-bit head rescores its best logits exactly from the embedding
// rows: narrowed, it rescores from the table's first rows. Each row's
// winner is then the exact head's winner among those ids, and the narrowed
// row differs from the whole 4-bit head's only where one of them rescored
// an id the other did not (the same 4-bit codes, 64 candidates a row).
TEST(NarrowHeadRows, ARescoredFourBitHeadPicksTheExactWinnerAmongItsIds) {
  auto f = fixture_model::load("llama_bf16");  // tied embeddings
  ASSERT_TRUE(lm_head_rescored_by_default(f.ckpt.config(), *f.device));
  const std::int64_t vocab = f.model->vocab_size();
  const std::int64_t width = vocab / 3;
  const auto four_bit = [&](std::optional<weight_quantization> head, std::int64_t rows) {
    return logits_of(*std::make_unique<llama_model>(f.ckpt.config(), f.ckpt.weights(), *f.device,
                                                    weight_quantization::int4, head, rows),
                     f.prompts);
  };
  // The same int4 layers, so the same hidden states, under three heads.
  const auto exact = four_bit(weight_quantization::none, 0);
  const auto whole = four_bit(weight_quantization::int4, 0);
  const auto narrow = four_bit(weight_quantization::int4, width);
  const auto at = [](const std::vector<float>& logits, std::int64_t row_width, std::size_t r) {
    return logits.begin() + static_cast<std::ptrdiff_t>(r * static_cast<std::size_t>(row_width));
  };
  for (std::size_t p = 0; p < narrow.size(); ++p) {
    for (std::size_t r = 0; r < f.prompts[p].size(); ++r) {
      const auto row = at(narrow[p], width, r), exact_row = at(exact[p], vocab, r), whole_row = at(whole[p], vocab, r);
      const auto best = std::max_element(row, row + width) - row;
      ASSERT_EQ(best, std::max_element(exact_row, exact_row + width) - exact_row) << "prompt " << p << " row " << r;
      // Rescored in f32 from the bf16 table; the exact head is a bf16 GEMM.
      EXPECT_NEAR(row[best], exact_row[best], 1e-2f * std::max(1.0f, std::fabs(exact_row[best])));
      int differing = 0;
      for (std::int64_t id = 0; id < width; ++id) differing += row[id] != whole_row[id];
      EXPECT_LE(differing, 64) << "prompt " << p << " row " << r;
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

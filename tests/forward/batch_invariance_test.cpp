// With the backend's batch-invariant mode on, the whole forward pass is
// bitwise batch invariant: a prompt's logits are the same bits however it is
// chunked (token by token is what decode steps run), whatever shares its
// steps and wherever its blocks lie, and a seeded request samples the same
// tokens and logprobs alone and inside a batch. The mode still matches
// transformers. Weights quantised at load are invariant too.

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "tests/forward/invariance_checks.hpp"

namespace troupe {
namespace {

using testing::fixture_model;
using testing::random_prompt;
using testing::relative_max_error;

constexpr int whole_prompt = 1 << 20;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// The fixture's longest prompt and one whose context runs past the
/// attention's 256-token chunks.
std::vector<std::vector<std::int32_t>> target_prompts(const fixture_model& f) {
  std::mt19937 rng(11);
  return {f.prompts.back(), random_prompt(rng, 290, f.model->vocab_size())};
}

class BatchInvariance : public ::testing::TestWithParam<std::string> {};

TEST_P(BatchInvariance, ModeStillMatchesTransformers) {
  auto f = fixture_model::load(GetParam(), {.batch_invariant = true});
  batch_runner runner(*f.model, runner_options{});
  const double tolerance = f.dtype_name == "f32" ? 1e-4 : 2e-2;
  const auto logits = runner.prompt_logits(f.prompts, 64);
  for (std::size_t i = 0; i < f.prompts.size(); ++i)
    EXPECT_LE(relative_max_error(logits[i], f.logits[i].data), tolerance) << "prompt " << i;
}

TEST_P(BatchInvariance, PromptLogitsAreTheSameBitsHoweverChunked) {
  auto f = fixture_model::load(GetParam(), {.batch_invariant = true});
  auto one_thread = fixture_model::load(GetParam(), {.threads = 1, .batch_invariant = true});
  batch_runner runner(*f.model, runner_options{});
  batch_runner one_thread_runner(*one_thread.model, runner_options{});
  for (const auto& prompt : target_prompts(f)) {
    SCOPED_TRACE("prompt of " + std::to_string(prompt.size()) + " tokens");
    const auto whole = runner.prompt_logits({prompt}, whole_prompt)[0];
    for (int chunk : {1, 3, 16}) EXPECT_TRUE(same_bits(runner.prompt_logits({prompt}, chunk)[0], whole)) << chunk;
    EXPECT_TRUE(same_bits(one_thread_runner.prompt_logits({prompt}, 7)[0], whole)) << "one thread";
  }
}

TEST_P(BatchInvariance, PromptLogitsAreTheSameBitsInAShuffledBatch) {
  auto f = fixture_model::load(GetParam(), {.batch_invariant = true});
  std::mt19937 rng(5);
  for (const auto& target : target_prompts(f)) {
    SCOPED_TRACE("prompt of " + std::to_string(target.size()) + " tokens");
    batch_runner alone_runner(*f.model, runner_options{});
    const auto alone = alone_runner.prompt_logits({target}, whole_prompt)[0];
    std::vector<std::vector<std::int32_t>> batch;
    for (int length : {5, 33, 17, 300, 70}) batch.push_back(random_prompt(rng, length, f.model->vocab_size()));
    batch.insert(batch.begin() + 2, target);
    runner_options shuffled;
    shuffled.block_shuffle_seed = 99;  // the target's blocks interleave with the others'
    for (int chunk : {1, 7, 40, whole_prompt}) {
      batch_runner runner(*f.model, shuffled);
      EXPECT_TRUE(same_bits(runner.prompt_logits(batch, chunk)[2], alone)) << "chunk " << chunk;
    }
  }
}

TEST_P(BatchInvariance, SeededSamplingIsTheSameAloneAndInABatch) {
  auto f = fixture_model::load(GetParam(), {.batch_invariant = true});
  runner_request target;
  target.prompt = f.prompts[1];
  target.params.temperature = 1.0f;
  target.params.top_p = 0.9f;
  target.params.logprobs = true;
  target.seed = 1234;
  target.max_tokens = 40;
  batch_runner alone_runner(*f.model, runner_options{});
  const runner_result alone = alone_runner.generate({target})[0];
  ASSERT_EQ(alone.tokens.size(), 40u);

  std::vector<runner_request> batch = testing::seeded_neighbours(f, 0.9f, 6);
  batch.insert(batch.begin() + 4, target);
  for (int chunk : {1, 5, 512}) {  // the target's prompt is chunked while others decode
    runner_options shuffled;
    shuffled.block_shuffle_seed = 3;
    shuffled.max_chunk_tokens = chunk;
    batch_runner runner(*f.model, shuffled);
    const runner_result inside = runner.generate(batch)[4];
    ASSERT_EQ(inside.tokens, alone.tokens) << "chunk " << chunk;
    for (std::size_t i = 0; i < alone.samples.size(); ++i)
      EXPECT_EQ(inside.samples[i].logprob, alone.samples[i].logprob) << "token " << i << ", chunk " << chunk;
  }
}

// Weights quantised at load keep the mode's promise: their integer kernels
// quantise each activation row on its own (a flipped code would move a
// logit by far more than float rounding, so a broken promise shows at once).
class QuantisedBatchInvariance : public ::testing::TestWithParam<std::tuple<std::string, weight_quantization>> {};

TEST_P(QuantisedBatchInvariance, PromptLogitsAreTheSameBitsHoweverChunkedOrBatched) {
  const auto& [name, format] = GetParam();
  auto f = fixture_model::load(name, {.batch_invariant = true, .quantization = format});
  std::mt19937 rng(7);
  for (const auto& target : target_prompts(f)) {
    SCOPED_TRACE("prompt of " + std::to_string(target.size()) + " tokens");
    batch_runner alone_runner(*f.model, runner_options{});
    const auto alone = alone_runner.prompt_logits({target}, whole_prompt)[0];
    for (int chunk : {1, 16}) EXPECT_TRUE(same_bits(alone_runner.prompt_logits({target}, chunk)[0], alone)) << chunk;
    std::vector<std::vector<std::int32_t>> batch;
    for (int length : {9, 40, 130}) batch.push_back(random_prompt(rng, length, f.model->vocab_size()));
    batch.insert(batch.begin() + 1, target);
    runner_options shuffled;
    shuffled.block_shuffle_seed = 17;
    for (int chunk : {7, whole_prompt}) {
      batch_runner runner(*f.model, shuffled);
      EXPECT_TRUE(same_bits(runner.prompt_logits(batch, chunk)[1], alone)) << "in a batch, chunk " << chunk;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantisedBatchInvariance,
                         ::testing::Combine(::testing::Values("llama_bf16", "qwen3_f32"),
                                            ::testing::Values(weight_quantization::int8, weight_quantization::int4)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" +
                                  std::string(quantization_name(std::get<1>(info.param)));
                         });

// qwen2 uses dynamic NTK RoPE, whose frequencies depend on the length a
// forward pass reaches past max_position_embeddings (40 in its fixture): by
// HF's definition it is not chunking-invariant there.
INSTANTIATE_TEST_SUITE_P(Models, BatchInvariance,
                         ::testing::Values("llama_f32", "llama_bf16", "mistral_f32", "mistral_bf16", "qwen3_f32",
                                           "qwen3_bf16"));

}  // namespace
}  // namespace troupe

#pragma once
// The foundation's invariance checks on any backend: a prompt's logits do not
// depend on how it is chunked or on what shares its steps, and a seeded
// request samples the same tokens alone and inside a batch. The CPU suite
// (invariance_test.cpp) and the CUDA one (tests/gpu/model_test.cpp) call
// them with their own tolerances.

#include <gtest/gtest.h>

#include <random>

#include "tests/forward/forward_fixture.hpp"

namespace troupe::testing {

/// The fixture's longest prompt run in chunks of 1, 3 and 16 tokens gives
/// the logits of one whole-prompt step, within `tolerance` (max relative).
inline void expect_chunking_keeps_logits(const fixture_model& f, double tolerance) {
  batch_runner runner(*f.model, runner_options{});
  const std::vector<std::vector<std::int32_t>> prompt{f.prompts.back()};
  const auto whole = runner.prompt_logits(prompt, 1 << 20)[0];
  for (int chunk : {1, 3, 16}) {
    const auto chunked = runner.prompt_logits(prompt, chunk)[0];
    EXPECT_LE(relative_max_error(chunked, whole), tolerance) << "chunk " << chunk;
  }
}

/// The fixture's longest prompt has the same logits alone and in a batch of
/// random prompts whose blocks (of `block_size` tokens, handed out shuffled)
/// interleave with its own, whole or in chunks of 7.
inline void expect_batching_keeps_logits(const fixture_model& f, int block_size, double tolerance) {
  const std::vector<std::int32_t> target = f.prompts.back();
  batch_runner alone_runner(*f.model, runner_options{});
  const auto alone = alone_runner.prompt_logits({target}, 1 << 20)[0];

  std::mt19937 rng(5);
  std::vector<std::vector<std::int32_t>> batch;
  for (int length : {5, 33, 17, 70}) batch.push_back(random_prompt(rng, length, f.model->vocab_size()));
  batch.insert(batch.begin() + 2, target);
  runner_options shuffled;
  shuffled.block_size = block_size;
  shuffled.block_shuffle_seed = 99;
  for (int chunk : {7, 1 << 20}) {
    batch_runner runner(*f.model, shuffled);
    const auto together = runner.prompt_logits(batch, chunk);
    EXPECT_LE(relative_max_error(together[2], alone), tolerance) << "chunk " << chunk;
  }
}

/// A seeded request (temperature, top-p, top-k, frequency penalty) samples
/// the same 24 tokens alone and as one of nine requests whose prompts are
/// chunked while others decode.
inline void expect_seeded_sampling_batch_invariant(const fixture_model& f) {
  runner_request target;
  target.prompt = f.prompts[1];
  target.params.temperature = 0.9f;
  target.params.top_p = 0.95f;
  target.params.top_k = 50;
  target.params.frequency_penalty = 0.3f;
  target.seed = 1234;
  target.max_tokens = 24;
  batch_runner alone_runner(*f.model, runner_options{});
  const auto alone = alone_runner.generate({target})[0].tokens;
  ASSERT_EQ(alone.size(), 24u);

  std::vector<runner_request> batch = seeded_neighbours(f, 1.0f, 4);
  batch.insert(batch.begin() + 4, target);
  runner_options shuffled;
  shuffled.block_shuffle_seed = 3;
  shuffled.max_chunk_tokens = 5;  // the target's prompt is chunked while others decode
  batch_runner runner(*f.model, shuffled);
  EXPECT_EQ(runner.generate(batch)[4].tokens, alone);
}

}  // namespace troupe::testing

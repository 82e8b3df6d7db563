// A prompt's logits do not depend on how it is chunked or on what shares its
// steps; a seeded request samples the same tokens alone and inside a batch.

#include "tests/forward/invariance_checks.hpp"

namespace troupe {
namespace {

using testing::fixture_model;

class Invariance : public ::testing::TestWithParam<std::string> {};

TEST_P(Invariance, ChunkingDoesNotChangeLogits) {
  testing::expect_chunking_keeps_logits(fixture_model::load(GetParam()), 1e-5);
}

TEST_P(Invariance, BatchingWithShuffledBlocksDoesNotChangeLogits) {
  // Many small blocks, so the tables interleave.
  testing::expect_batching_keeps_logits(fixture_model::load(GetParam()), 4, 1e-5);
}

TEST_P(Invariance, SeededSamplingIsTheSameAloneAndInABatch) {
  testing::expect_seeded_sampling_batch_invariant(fixture_model::load(GetParam()));
}

// qwen2 uses dynamic NTK RoPE, whose frequencies depend on the length a
// forward pass reaches past max_position_embeddings: by HF's definition it
// is not chunking-invariant there, so it is checked by fidelity only.
INSTANTIATE_TEST_SUITE_P(Models, Invariance, ::testing::Values("llama_f32", "qwen3_f32", "mistral_f32"));

}  // namespace
}  // namespace troupe

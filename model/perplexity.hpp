#pragma once
// Perplexity of a token sequence under a model, scored in non-overlapping
// windows that each start without context (the protocol of
// tools/train/evaluate.py, so troupe and PyTorch measure the same thing).

#include <cstdint>
#include <span>
#include <vector>

#include "model/batch_runner.hpp"

namespace troupe {

/// Summed negative log-likelihood (nats) of ids[t + 1] under logits row t,
/// for t in [0, ids.size() - 1). `logits` is f32 [ids.size() * vocab].
double next_token_nll_sum(std::span<const float> logits, std::span<const std::int32_t> ids, std::size_t vocab);

/// What windowed scoring measured.
struct perplexity_result {
  double mean_nll = 0;         ///< nats per predicted token
  double perplexity = 1;       ///< exp(mean_nll)
  std::int64_t predicted = 0;  ///< tokens predicted (each window's first token is not)
};

/// The result for `nll_sum` nats over `predicted` tokens.
perplexity_result perplexity_from(double nll_sum, std::int64_t predicted);

/// Scores `ids` in windows of `window` tokens (0: one window), each prefilled
/// `chunk_tokens` at a time.
perplexity_result windowed_perplexity(batch_runner& runner, std::span<const std::int32_t> ids, std::size_t vocab,
                                      std::size_t window, int chunk_tokens);

}  // namespace troupe

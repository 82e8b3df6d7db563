#pragma once
// What a request asks of the sampler, and what the sampler returns.
//
// Semantics every backend implements identically, in this order, on one
// float32 logits row of the vocabulary:
//  1. add `logit_bias`; set suppressed ids (eos/stop ids before min_tokens)
//     and ids whose bit is clear in `allowed_mask` (a structured-output
//     constraint, when the mask is not empty) to -inf;
//  2. repetition penalty over ids in prompt or output (positive logits divided,
//     negative multiplied); then logit -= frequency_penalty * count_in_output
//     + presence_penalty * (count_in_output > 0);
//  3. logprobs are log_softmax of the row at this point (before temperature
//     and truncation), so they describe the model, as OpenAI reports them;
//  4. temperature == 0 (or top_k == 1): argmax, ties to the lowest id;
//  5. otherwise divide by temperature, keep the top_k largest, then the
//     smallest set whose probability reaches top_p (largest first, ties by
//     lower id), then drop ids below min_p × the largest probability;
//  6. draw u = philox_uniform(seed, token_index) and return the first id, in
//     ascending id order over the kept ids, whose cumulative renormalised
//     probability exceeds u (the last kept id if rounding leaves none).
//
// Verification of draft tokens (speculative decoding, kernels/speculative.hpp)
// reuses these rules: a step_batch::verify group's row i is processed by
// steps 1, 2, 4 and 5 exactly as an ordinary row with the same sampling_row
// (whose output_tokens include the drafts before it, and whose allowed_mask
// is the constraint's mask after those drafts, so a forbidden draft has
// p_i(d) = 0 and is rejected), giving the target distribution p_i; then, in
// row order,
//  7. greedy rows (temperature 0 or top_k 1): draft d_{i+1} is accepted when
//     it is row i's argmax (ties to the lowest id); the first rejected row
//     emits its argmax;
//  8. sampled rows: d_{i+1} is accepted when ua × q_i(d) < p_i(d), with
//     ua = philox_uniform(seed ^ speculative_accept_key, token_index) (a
//     stream of its own, so it never correlates with the draw) and q_i the
//     draft's probability row (1 for a point-mass proposer); the first
//     rejected row emits the first id, in ascending id order, whose
//     cumulative share of max(0, p_i - q_i) exceeds u of step 6 (the draw
//     from p_i when rounding leaves no residual);
//  9. when every draft is accepted the last row emits its ordinary draw
//     (steps 4-6: the bonus token);
// 10. each emitted token's logprob and top entries are step 3 of its row,
//     as for ordinary rows.

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace troupe {

/// Per-request sampling settings (OpenAI / vLLM field meanings).
struct sampling_params {
  float temperature = 1.0f;                                ///< 0 means greedy
  int top_k = 0;                                           ///< <= 0: disabled
  float top_p = 1.0f;                                      ///< (0, 1]
  float min_p = 0.0f;                                      ///< [0, 1]
  float repetition_penalty = 1.0f;                         ///< > 0; 1 disables
  float presence_penalty = 0.0f;                           ///< [-2, 2]
  float frequency_penalty = 0.0f;                          ///< [-2, 2]
  std::vector<std::pair<std::int32_t, float>> logit_bias;  ///< (token id, bias added to its logit)
  int top_logprobs = 0;                                    ///< alternatives to return per token (0..20)
  bool logprobs = false;                                   ///< return the sampled token's logprob
};

/// One logits row to sample in a step: the request's settings and the
/// context the penalties and the RNG need. Spans point into state the
/// caller keeps alive until `backend::sample` returns.
struct sampling_row {
  const sampling_params* params = nullptr;
  std::uint64_t seed = 0;                           ///< request seed (assigned at admission when the client gives none)
  std::uint64_t token_index = 0;                    ///< index of the token being drawn among the request's outputs
  std::span<const std::int32_t> prompt_tokens;      ///< for the repetition penalty
  std::span<const std::int32_t> output_tokens;      ///< for all penalties
  std::span<const std::int32_t> suppressed_tokens;  ///< forced to -inf (e.g. eos before min_tokens)
  /// Allowed-token bitmask of a structured-output constraint: bit (t % 32)
  /// of word t / 32 set when id t may be drawn. Ids past its end are not
  /// allowed (the model's logits may be padded beyond the tokenizer's
  /// vocabulary) and bits past the logits row are ignored. Empty: every id
  /// is allowed.
  std::span<const std::uint32_t> allowed_mask;
};

/// Whether `mask` (a sampling_row::allowed_mask) allows `id`; an empty mask allows all.
inline bool mask_allows(std::span<const std::uint32_t> mask, std::int32_t id) {
  if (mask.empty()) return true;
  const auto word = static_cast<std::size_t>(id) / 32;
  return word < mask.size() && ((mask[word] >> (static_cast<std::uint32_t>(id) % 32)) & 1u) != 0;
}

/// A token and its log-probability.
struct token_logprob {
  std::int32_t token = 0;
  float logprob = 0.0f;
};

/// What sampling one row produced.
struct sample_output {
  std::int32_t token = 0;
  float logprob = 0.0f;            ///< of `token`, valid when params->logprobs or top_logprobs > 0
  std::vector<token_logprob> top;  ///< the top_logprobs most likely ids, most likely first
};

/// What sampling one step produced.
struct sample_result {
  /// [L] one per logits row. Inside a verify group only rows first_row ..
  /// first_row + accepted hold emitted tokens (the accepted drafts, then the
  /// correction or bonus token); the group's later rows have token -1.
  std::vector<sample_output> rows;
  std::vector<std::int32_t> accepted;  ///< [step_batch::verify groups] drafts accepted by each
};

}  // namespace troupe

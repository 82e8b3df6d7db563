#pragma once
// Speculative decoding's verification: which drafts of a verify_group the
// target model accepts, and the token it emits after them (rules 7-10 of
// kernels/sampling.hpp). Written once on host f32 rows over the CPU
// sampler's own transforms, so verification and the ordinary draw cannot
// diverge; the CPU backend runs it per group, the CUDA backend on the group's
// rows copied to the host. The draft side computes its q rows and draws its
// drafts with processed_distribution / draw_from_distribution and the draft
// key, so q follows the same rules and the draft's randomness is a stream of
// its own.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/philox.hpp"
#include "kernels/sampling.hpp"
#include "kernels/step_batch.hpp"

namespace troupe {

namespace cpu {
struct isa_kernels;
struct sampler_scratch;
}  // namespace cpu

/// XORed into a request's seed for the accept test (rule 8).
inline constexpr std::uint64_t speculative_accept_key = 0x6a09e667f3bcc909ull;
/// XORed into a request's seed for the draft model's own draws.
inline constexpr std::uint64_t speculative_draft_key = 0xbb67ae8584caa73bull;

/// The accept test's uniform for the token at `token_index`.
inline float accept_uniform(std::uint64_t seed, std::uint64_t token_index) {
  return philox_uniform(seed ^ speculative_accept_key, token_index);
}
/// XORed, times the sibling's rank, into the accept key for a tree's later siblings.
inline constexpr std::uint64_t speculative_sibling_key = 0x3c6ef372fe94f82bull;

/// The accept test's uniform for sibling `rank` (0 first) of a draft tree's
/// node at `token_index`; rank 0 is the chain's accept_uniform.
inline float sibling_accept_uniform(std::uint64_t seed, std::uint64_t token_index, std::uint64_t rank) {
  return philox_uniform(seed ^ speculative_accept_key ^ (speculative_sibling_key * rank), token_index);
}
/// The uniform a proposer draws its draft for `token_index` with.
inline float draft_uniform(std::uint64_t seed, std::uint64_t token_index) {
  return philox_uniform(seed ^ speculative_draft_key, token_index);
}

/// One group's rows and drafts. Row r (r = 0..j) of the target's logits is
/// logits[r * row_stride, r * row_stride + vocab).
struct verify_input {
  const float* logits = nullptr;
  std::int64_t row_stride = 0;  ///< floats between rows
  std::int64_t vocab = 0;
  std::span<const sampling_row> rows;     ///< [j + 1] as verify_group describes
  std::span<const std::int32_t> drafts;   ///< [j]
  std::span<const float> draft_probs;     ///< [j * vocab] q rows, or empty for point masses
  std::span<const std::int32_t> parents;  ///< [j] a tree's parents (verify_group), or empty for a chain
};

/// What verifying one group decided.
struct verify_outcome {
  std::int32_t accepted = 0;           ///< a: drafts accepted (a tree: the accepted path's length)
  std::vector<sample_output> emitted;  ///< [a + 1] d1..da, then the correction or bonus token
};

/// Verifies one group (rules 7-10 of sampling.hpp) with the CPU sampler's
/// `kernels` and buffers. A tree is walked from the root: at each node its
/// children are tried in order, each accepted with probability p'(d) where
/// p' is the node's p with the siblings rejected before it removed and
/// renormalised (point-mass recursive rejection, so each emitted token has
/// exactly the target's distribution); none accepted, the token is drawn
/// from p' (greedy: the argmax, accepted when a child carries it). Throws std::invalid_argument for inconsistent
/// inputs (sizes, ids outside the vocabulary, rows unlike verify_group's).
verify_outcome verify_drafts(const verify_input& input, const cpu::isa_kernels& kernels, cpu::sampler_scratch& scratch);
/// verify_drafts with this machine's best CPU kernels and fresh buffers.
verify_outcome verify_drafts(const verify_input& input);

/// The logits rows of `batch` outside its verify groups, ascending.
std::vector<std::int32_t> rows_outside_groups(const step_batch& batch);

/// Writes group `group`'s outcome into result.rows (token -1 after the
/// emitted ones) and result.accepted; result is already sized.
void store_outcome(const step_batch& batch, std::size_t group, verify_outcome outcome, sample_result& result);

/// [vocab] probabilities with which the ordinary sampler would draw `row`'s
/// token from `logits` (steps 1, 2, 4, 5 of sampling.hpp; a point mass when
/// greedy): the q row a proposer puts in verify_group::draft_probs.
std::vector<float> processed_distribution(std::span<const float> logits, const sampling_row& row);

/// The first id, in ascending order, whose cumulative probability exceeds
/// u × the total (the last id with probability if rounding leaves none).
std::int32_t draw_from_distribution(std::span<const float> probabilities, float u);

}  // namespace troupe

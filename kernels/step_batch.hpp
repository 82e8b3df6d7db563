#pragma once
// The step contract: one flat, variable-length batch per iteration, the same
// for every backend, for chunked prefill, decode and verification alike.
// T = tokens in the step, S = sequences, L = rows that need logits.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/dtype.hpp"
#include "kernels/sampling.hpp"

namespace troupe {

/// Geometry of the paged KV cache. Block b holds, contiguously, for every
/// layer l: K then V, each [num_kv_heads][block_size][head_dim], so one block
/// moves between device and host with a single copy.
struct kv_cache_spec {
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;  ///< tokens per block
  std::int64_t num_blocks = 0;
  dtype type = dtype::f32;

  /// Elements of one K (or V) tile: one layer, one block, all kv heads.
  std::int64_t tile_elements() const { return static_cast<std::int64_t>(num_kv_heads) * block_size * head_dim; }
  /// Elements of one whole block (all layers, K and V).
  std::int64_t block_elements() const { return tile_elements() * 2 * num_layers; }
  std::size_t block_bytes() const { return static_cast<std::size_t>(block_elements()) * dtype_size(type); }
  /// Element offset of layer `layer`'s K tile (V follows at + tile_elements()) inside a block.
  std::int64_t layer_offset(int layer) const { return tile_elements() * 2 * layer; }
};

/// Where a KV block lives.
enum class block_location : std::uint8_t { device, host };

/// One whole-block copy, run before the step's forward pass (swap out, swap
/// in, copy-on-write).
struct block_copy {
  block_location from = block_location::device;
  std::int32_t src = 0;
  block_location to = block_location::device;
  std::int32_t dst = 0;
};

/// One sequence whose logits rows [first_row, first_row + drafts.size()]
/// verify drafts (kernels/speculative.hpp). The rows are consecutive tokens
/// of one sequence, t0 then d1..dj; row i has its own sampling_row with
/// token_index = base + i and output_tokens = the outputs, then d1..di.
/// A tree (`parents` not empty) names each draft's parent node instead:
/// node 0 is t0, node i is draft i; draft i's token is fed with
/// step_batch::tree_parent naming its parent's token, and row i's
/// sampling_row has token_index = base + depth(i) and output_tokens = the
/// outputs, then the drafts on the path from the root to node i. Siblings
/// carry distinct tokens, and a tree's drafts are point masses (no q rows).
struct verify_group {
  std::int32_t first_row = 0;        ///< into logits_indices / sampling
  std::vector<std::int32_t> drafts;  ///< [j] d1..dj, fed after t0 in this step
  std::span<const float>
      draft_probs;  ///< [j * vocab] q rows (after the request's sampling transforms); empty: point masses
  std::vector<std::int32_t> parents;  ///< [j] or empty (a chain): parents[i - 1] = node of draft i's parent, < i
};

/// The flat varlen batch the scheduler emits and a backend runs.
struct step_batch {
  std::vector<std::int32_t> token_ids;         ///< [T]
  std::vector<std::int32_t> positions;         ///< [T] position of each token in its sequence
  std::vector<std::int32_t> query_start;       ///< [S+1] CSR: sequence s owns tokens [qs[s], qs[s+1])
  std::vector<std::int32_t> seq_lens;          ///< [S] context length after this step
  std::vector<std::int32_t> kv_indptr;         ///< [S+1] CSR into kv_indices
  std::vector<std::int32_t> kv_indices;        ///< [kv_indptr[S]] block ids, in sequence order
  std::vector<std::int32_t> kv_last_page_len;  ///< [S] tokens used in each sequence's last block (1..block_size)
  std::vector<std::int64_t> slot_mapping;      ///< [T] block * block_size + offset where each token's K/V goes
  std::vector<std::int32_t> logits_indices;    ///< [L] token rows that need logits
  std::vector<sampling_row> sampling;          ///< [L] how to sample each logits row (empty: logits only)
  std::vector<block_copy> block_copies;        ///< run before the forward pass
  std::vector<verify_group> verify;            ///< by ascending first_row, disjoint; needs `sampling`
  /// [T] or empty (every token causal). -1: the token attends causally, to
  /// its sequence's cached positions up to its own. t >= 0: a draft tree's
  /// token; it attends to what step token t (same sequence, earlier) does,
  /// plus its own key, and positions[.] = positions[t] + 1 (the RoPE
  /// position is its depth). A sequence's tree tokens come last in it; each
  /// has its K/V at cache position seq_len - (its sequence's tokens after it) - 1.
  std::vector<std::int32_t> tree_parent;

  std::int64_t num_tokens() const { return static_cast<std::int64_t>(token_ids.size()); }
  std::int64_t num_sequences() const {
    return query_start.empty() ? 0 : static_cast<std::int64_t>(query_start.size()) - 1;
  }
  std::int64_t num_logits_rows() const { return static_cast<std::int64_t>(logits_indices.size()); }
};

/// Empty when `rows` (j + 1) fit `drafts` (j) as verify_group describes: one
/// seed and params, token_index counting up by one, row i's output_tokens
/// the first row's followed by d1..di; else what is wrong. With `parents`
/// (a tree): row i's token_index is the first's + depth(i) and its
/// output_tokens the first row's followed by the path's drafts.
std::string verify_rows_problem(std::span<const sampling_row> rows, std::span<const std::int32_t> drafts,
                                std::span<const std::int32_t> parents = {});

/// Empty when `parents` is a valid draft tree over `drafts` (parents[i - 1]
/// in [0, i), siblings with distinct tokens); else what is wrong.
std::string draft_tree_problem(std::span<const std::int32_t> drafts, std::span<const std::int32_t> parents);

/// Depth of every node of a draft tree: [j + 1], node 0 (t0) at depth 0.
std::vector<std::int32_t> draft_tree_depths(std::span<const std::int32_t> parents);

/// One sequence of one token, `token_id` at position 0, its K/V in slot 0 of
/// block 0, with logits for that row and no sampling rows: the smallest
/// valid step (timing probes, sampling tests).
step_batch one_token_step(std::int32_t token_id);

/// Checks the internal consistency of `batch` against `spec` (CSR monotone,
/// sizes agree, block ids and slots in range, positions below seq_lens,
/// verify groups inside the logits rows, disjoint, fed their drafts, with
/// sampling rows as verify_group describes; draft_probs' length against the
/// vocabulary is the backend's check).
/// Returns an empty string when valid, else what is wrong.
std::string validate_step_batch(const step_batch& batch, const kv_cache_spec& spec);

}  // namespace troupe

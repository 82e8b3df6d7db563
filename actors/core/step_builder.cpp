#include "actors/core/step_builder.hpp"

#include <algorithm>

namespace troupe {

namespace {

/// Appends one sequence's tokens, then its drafts, with positions and
/// slots. A draft tree's tokens take consecutive slots in node order, at
/// the RoPE position of their depth, with tree_parent naming their parent's
/// token (`tree` says whether the batch carries tree_parent at all).
void append_tokens(step_batch& batch, const scheduled_sequence& seq, std::int32_t block_size, bool tree) {
  const auto count = static_cast<std::int32_t>(seq.tokens.size());
  const auto total = count + static_cast<std::int32_t>(seq.drafts.size());
  const std::vector<std::int32_t> depths =
      seq.draft_parents.empty() ? std::vector<std::int32_t>{} : draft_tree_depths(seq.draft_parents);
  const auto root = static_cast<std::int32_t>(batch.token_ids.size()) + count - 1;
  for (std::int32_t i = 0; i < total; ++i) {
    const std::int32_t slot_position = seq.start + i;
    const auto page = static_cast<std::size_t>(slot_position / block_size);
    const std::int64_t block = page < seq.block_table.size() ? seq.block_table[page] : -1;
    const auto index = static_cast<std::size_t>(i < count ? i : i - count);
    batch.token_ids.push_back(i < count ? seq.tokens[index] : seq.drafts[index]);
    const bool tree_node = i >= count && !depths.empty();
    batch.positions.push_back(tree_node ? seq.start + count - 1 + depths[index + 1] : slot_position);
    batch.slot_mapping.push_back(block * block_size + slot_position % block_size);
    if (tree) batch.tree_parent.push_back(tree_node ? root + seq.draft_parents[index] : -1);
  }
}

}  // namespace

step_batch build_step_batch(const scheduled_step& step, std::int32_t block_size) {
  step_batch batch;
  const std::size_t num_tokens = static_cast<std::size_t>(step.num_tokens());
  batch.token_ids.reserve(num_tokens);
  batch.positions.reserve(num_tokens);
  batch.slot_mapping.reserve(num_tokens);
  batch.query_start.reserve(step.sequences.size() + 1);
  batch.kv_indptr.reserve(step.sequences.size() + 1);
  batch.query_start.push_back(0);
  batch.kv_indptr.push_back(0);
  const bool tree = std::any_of(step.sequences.begin(), step.sequences.end(),
                                [](const scheduled_sequence& seq) { return !seq.draft_parents.empty(); });
  for (const scheduled_sequence& seq : step.sequences) {
    append_tokens(batch, seq, block_size, tree);
    const auto drafts = static_cast<std::int32_t>(seq.drafts.size());
    const std::int32_t count = static_cast<std::int32_t>(seq.tokens.size()) + drafts;
    const std::int32_t seq_len = seq.start + count;
    batch.query_start.push_back(batch.query_start.back() + count);
    batch.seq_lens.push_back(seq_len);
    const auto pages = std::min<std::size_t>(static_cast<std::size_t>((seq_len + block_size - 1) / block_size),
                                             seq.block_table.size());
    batch.kv_indices.insert(batch.kv_indices.end(), seq.block_table.begin(),
                            seq.block_table.begin() + static_cast<std::ptrdiff_t>(pages));
    batch.kv_indptr.push_back(static_cast<std::int32_t>(batch.kv_indices.size()));
    batch.kv_last_page_len.push_back(seq_len - (static_cast<std::int32_t>(pages) - 1) * block_size);
    // The last token's row (once per sample), then one row per draft: row i scores draft i + 1.
    const std::int32_t last_token = batch.query_start.back() - 1 - drafts;
    for (std::int32_t s = 0; s < seq.num_samples; ++s) batch.logits_indices.push_back(last_token);
    if (drafts == 0) continue;
    batch.verify.push_back(
        {static_cast<std::int32_t>(batch.logits_indices.size()) - 1, seq.drafts, seq.draft_probs, seq.draft_parents});
    for (std::int32_t i = 1; i <= drafts; ++i) batch.logits_indices.push_back(last_token + i);
  }
  batch.block_copies = step.copies;
  return batch;
}

void fill_sampling_rows(step_batch& batch, const scheduled_step& step) {
  batch.sampling.clear();
  batch.sampling.reserve(step.rows.size());
  for (const logits_row_hook& hook : step.rows) {
    sampling_row row;
    row.params = hook.params;
    row.seed = hook.seed;
    row.token_index = hook.token_index;
    row.prompt_tokens = hook.prompt_tokens;
    row.output_tokens = hook.output_tokens;
    row.suppressed_tokens = hook.suppressed_tokens;
    row.allowed_mask = hook.allowed_mask;
    batch.sampling.push_back(row);
  }
}

}  // namespace troupe

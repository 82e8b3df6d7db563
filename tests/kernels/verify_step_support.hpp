#pragma once
// Steps with verify groups for the verification tests: single-token
// sequences (ordinary rows) and groups of 1 + j tokens (t0 then the drafts),
// each sequence in its own block, with given logits rows standing in for
// the forward pass.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/step_batch.hpp"

namespace troupe::test {

/// Sampling rows of one verify group as verify_group describes them, and
/// the token lists they point into (so: not copyable).
struct group_rows {
  std::vector<std::vector<std::int32_t>> outputs;  ///< [j + 1] base outputs + d1..di
  std::vector<sampling_row> rows;                  ///< [j + 1]

  group_rows(const sampling_params& params, std::uint64_t seed, std::uint64_t base_index,
             const std::vector<std::int32_t>& base_outputs, const std::vector<std::int32_t>& drafts,
             std::span<const std::int32_t> suppressed = {}) {
    for (std::size_t i = 0; i <= drafts.size(); ++i) {
      outputs.push_back(base_outputs);
      outputs.back().insert(outputs.back().end(), drafts.begin(), drafts.begin() + static_cast<std::ptrdiff_t>(i));
    }
    for (std::size_t i = 0; i <= drafts.size(); ++i)
      rows.push_back({&params, seed, base_index + i, {}, outputs[i], suppressed});
  }
  group_rows(const group_rows&) = delete;
  group_rows& operator=(const group_rows&) = delete;
};

/// One sequence of a verify step: an ordinary row (no drafts, group false) or a group.
struct step_part {
  std::vector<std::vector<float>> logits;  ///< [rows][vocab]
  std::vector<sampling_row> rows;          ///< [rows]
  std::vector<std::int32_t> drafts;        ///< [rows - 1]
  std::span<const float> draft_probs;
  bool group = true;
};

/// The batch of `parts`: sequence s is part s, in block s.
inline step_batch make_verify_batch(const std::vector<step_part>& parts) {
  step_batch batch;
  batch.query_start.push_back(0);
  batch.kv_indptr.push_back(0);
  for (std::size_t s = 0; s < parts.size(); ++s) {
    const step_part& part = parts[s];
    const auto first_row = static_cast<std::int32_t>(batch.logits_indices.size());
    const auto first_token = static_cast<std::int32_t>(batch.token_ids.size());
    const auto tokens = static_cast<std::int32_t>(part.drafts.size()) + 1;
    for (std::int32_t i = 0; i < tokens; ++i) {
      batch.token_ids.push_back(i == 0 ? 0 : part.drafts[static_cast<std::size_t>(i) - 1]);
      batch.positions.push_back(i);
      batch.slot_mapping.push_back(static_cast<std::int64_t>(s) * 16 + i);
      batch.logits_indices.push_back(first_token + i);
    }
    batch.query_start.push_back(first_token + tokens);
    batch.seq_lens.push_back(tokens);
    batch.kv_indices.push_back(static_cast<std::int32_t>(s));
    batch.kv_indptr.push_back(static_cast<std::int32_t>(s) + 1);
    batch.kv_last_page_len.push_back(tokens);
    batch.sampling.insert(batch.sampling.end(), part.rows.begin(), part.rows.end());
    if (part.group) batch.verify.push_back({first_row, part.drafts, part.draft_probs});
  }
  return batch;
}

/// The cache geometry make_verify_batch's batches fit.
inline kv_cache_spec verify_cache_spec(std::size_t sequences) {
  return {.num_layers = 1,
          .num_kv_heads = 1,
          .head_dim = 2,
          .block_size = 16,
          .num_blocks = static_cast<std::int64_t>(sequences)};
}

/// The step of `parts`, planned on a backend, with its logits in host memory
/// (a CPU backend's buffers).
struct verify_step {
  step_batch batch;
  std::unique_ptr<step_plan> plan;
  device_buffer logits;
  tensor_view view;

  verify_step(backend& b, const std::vector<step_part>& parts) : batch(make_verify_batch(parts)) {
    plan = b.plan_step(batch, verify_cache_spec(parts.size()), {1, 1, 2, 1.0f, {.head_dim = 2}});
    const auto vocab = static_cast<std::int64_t>(parts.front().logits.front().size());
    const std::int64_t rows = batch.num_logits_rows();
    logits = b.allocate(static_cast<std::size_t>(rows * vocab) * sizeof(float));
    view = logits.view(dtype::f32, rows, vocab);
    float* out = view.as<float>();
    for (const step_part& part : parts) {
      for (const auto& row : part.logits) out = std::copy(row.begin(), row.end(), out);
    }
  }

  sample_result sample(backend& b) { return b.sample(*plan, view); }
};

}  // namespace troupe::test

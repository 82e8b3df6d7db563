#include "kernels/step_batch.hpp"

#include <algorithm>
#include <string>

namespace troupe {

namespace {

std::string check_csr(const std::vector<std::int32_t>& indptr, std::size_t expected_rows, std::size_t total,
                      const char* name) {
  if (indptr.size() != expected_rows + 1) return std::string(name) + " has the wrong length";
  if (indptr.front() != 0) return std::string(name) + " must start at 0";
  for (std::size_t i = 1; i < indptr.size(); ++i) {
    if (indptr[i] < indptr[i - 1]) return std::string(name) + " is not monotone";
  }
  if (static_cast<std::size_t>(indptr.back()) != total) return std::string(name) + " does not end at its total";
  return {};
}

// Rows [first, first + count) of logits_indices are consecutive step tokens of one sequence.
bool consecutive_rows_of_one_sequence(const step_batch& batch, std::size_t first, std::size_t count) {
  const std::int32_t start = batch.logits_indices[first];
  const auto owner = std::upper_bound(batch.query_start.begin(), batch.query_start.end(), start);
  if (owner == batch.query_start.end() || start + static_cast<std::int32_t>(count) > *owner) return false;
  for (std::size_t r = 1; r < count; ++r) {
    if (batch.logits_indices[first + r] != start + static_cast<std::int32_t>(r)) return false;
  }
  return true;
}

// ... and at consecutive positions (a chain).
bool consecutive_tokens_of_one_sequence(const step_batch& batch, std::size_t first, std::size_t count) {
  if (!consecutive_rows_of_one_sequence(batch, first, count)) return false;
  for (std::size_t r = 1; r < count; ++r) {
    const auto token = static_cast<std::size_t>(batch.logits_indices[first + r]);
    if (batch.positions[token] != batch.positions[token - 1] + 1) return false;
  }
  return true;
}

// A tree group's rows are its nodes' tokens, each fed its draft under its parent's token.
std::string check_tree_group(const step_batch& batch, const verify_group& group) {
  if (auto e = draft_tree_problem(group.drafts, group.parents); !e.empty()) return e;
  if (!group.draft_probs.empty()) return "a tree verify group's drafts must be point masses (no draft_probs)";
  const auto first = static_cast<std::size_t>(group.first_row);
  if (!consecutive_rows_of_one_sequence(batch, first, group.drafts.size() + 1))
    return "a tree verify group's rows are not consecutive tokens of one sequence";
  if (batch.tree_parent.empty() || batch.tree_parent[static_cast<std::size_t>(batch.logits_indices[first])] != -1)
    return "a tree verify group's root must attend causally";
  for (std::size_t i = 1; i <= group.drafts.size(); ++i) {
    const auto token = static_cast<std::size_t>(batch.logits_indices[first + i]);
    if (batch.token_ids[token] != group.drafts[i - 1]) return "a tree verify group's drafts are not the tokens fed";
    const auto parent_row = first + static_cast<std::size_t>(group.parents[i - 1]);
    if (batch.tree_parent[token] != batch.logits_indices[parent_row])
      return "a tree verify group's parents disagree with tree_parent";
  }
  return {};
}

std::string check_verify_groups(const step_batch& batch) {
  if (batch.verify.empty()) return {};
  if (batch.sampling.empty()) return "verify groups need sampling rows";
  const std::size_t num_rows = batch.logits_indices.size();
  std::size_t next_free = 0;
  for (const verify_group& group : batch.verify) {
    const std::size_t drafts = group.drafts.size();
    if (group.first_row < 0 || static_cast<std::size_t>(group.first_row) < next_free)
      return "verify groups overlap or are not in row order";
    const auto first = static_cast<std::size_t>(group.first_row);
    if (first + drafts + 1 > num_rows) return "a verify group's rows lie outside the logits rows";
    if (!group.parents.empty()) {
      if (auto e = check_tree_group(batch, group); !e.empty()) return e;
    } else {
      if (!group.draft_probs.empty() && (drafts == 0 || group.draft_probs.size() % drafts != 0))
        return "a verify group's draft_probs is not one row per draft";
      if (!consecutive_tokens_of_one_sequence(batch, first, drafts + 1))
        return "a verify group's rows are not consecutive tokens of one sequence";
      for (std::size_t r = 0; r < drafts; ++r) {
        if (batch.token_ids[static_cast<std::size_t>(batch.logits_indices[first + r]) + 1] != group.drafts[r])
          return "a verify group's drafts are not the tokens fed after its rows";
      }
    }
    const std::span<const sampling_row> rows(batch.sampling.data() + first, drafts + 1);
    if (auto e = verify_rows_problem(rows, group.drafts, group.parents); !e.empty()) return e;
    next_free = first + drafts + 1;
  }
  return {};
}

// tree_parent: sizes, parents earlier in the same sequence, depth positions,
// tree tokens last in their sequence, causal tokens of a tree's sequence at their cache positions.
std::string check_tree_parents(const step_batch& batch) {
  if (batch.tree_parent.empty()) return {};
  if (batch.tree_parent.size() != batch.token_ids.size()) return "tree_parent and token_ids differ in length";
  for (std::size_t s = 0; s + 1 < batch.query_start.size(); ++s) {
    const std::int32_t begin = batch.query_start[s], end = batch.query_start[s + 1];
    bool in_tree = false;
    for (std::int32_t t = begin; t < end; ++t) {
      const auto tu = static_cast<std::size_t>(t);
      const std::int32_t parent = batch.tree_parent[tu];
      if (parent < 0) {
        if (in_tree) return "a causal token follows a tree token in its sequence";
        if (parent != -1) return "tree_parent holds a negative value other than -1";
        continue;
      }
      if (parent < begin || parent >= t) return "a tree token's parent is not an earlier token of its sequence";
      if (batch.positions[tu] != batch.positions[static_cast<std::size_t>(parent)] + 1)
        return "a tree token's position is not its parent's plus one";
      in_tree = true;
    }
    if (!in_tree) continue;
    for (std::int32_t t = begin; t < end && batch.tree_parent[static_cast<std::size_t>(t)] < 0; ++t) {
      if (batch.positions[static_cast<std::size_t>(t)] != batch.seq_lens[s] - (end - t))
        return "a causal token of a sequence with a tree is not at its cache position";
    }
  }
  return {};
}

}  // namespace

std::vector<std::int32_t> draft_tree_depths(std::span<const std::int32_t> parents) {
  std::vector<std::int32_t> depths(parents.size() + 1, 0);
  for (std::size_t i = 1; i <= parents.size(); ++i) depths[i] = depths[static_cast<std::size_t>(parents[i - 1])] + 1;
  return depths;
}

std::string draft_tree_problem(std::span<const std::int32_t> drafts, std::span<const std::int32_t> parents) {
  if (parents.size() != drafts.size()) return "a draft tree needs one parent per draft";
  for (std::size_t i = 1; i <= parents.size(); ++i) {
    const std::int32_t parent = parents[i - 1];
    if (parent < 0 || static_cast<std::size_t>(parent) >= i) return "a draft's parent is not an earlier node";
    for (std::size_t j = 1; j < i; ++j) {
      if (parents[j - 1] == parent && drafts[j - 1] == drafts[i - 1]) return "sibling drafts carry the same token";
    }
  }
  return {};
}

std::string verify_rows_problem(std::span<const sampling_row> rows, std::span<const std::int32_t> drafts,
                                std::span<const std::int32_t> parents) {
  if (rows.size() != drafts.size() + 1) return "a verify group needs one sampling row more than it has drafts";
  const bool tree = !parents.empty();
  if (tree) {
    if (auto e = draft_tree_problem(drafts, parents); !e.empty()) return e;
  }
  const std::vector<std::int32_t> depths = tree ? draft_tree_depths(parents) : std::vector<std::int32_t>{};
  const sampling_row& first = rows.front();
  const std::size_t base = first.output_tokens.size();
  for (std::size_t r = 1; r < rows.size(); ++r) {
    const sampling_row& row = rows[r];
    if (row.params != first.params || row.seed != first.seed)
      return "the rows of a verify group differ in params or seed";
    const std::size_t depth = tree ? static_cast<std::size_t>(depths[r]) : r;
    if (row.token_index != first.token_index + depth)
      return tree ? "a tree verify row's token_index is not the first's plus its depth"
                  : "a verify group's token_index does not count up by one";
    if (row.output_tokens.size() != base + depth ||
        !std::equal(first.output_tokens.begin(), first.output_tokens.end(), row.output_tokens.begin()))
      return "a verify group row's output_tokens are not the first row's followed by the drafts before it";
    // Walk from the node up to the root, matching the path's drafts from the end.
    std::size_t node = r;
    for (std::size_t d = depth; d > 0; --d) {
      if (row.output_tokens[base + d - 1] != drafts[node - 1])
        return "a verify group row's output_tokens are not the first row's followed by the drafts before it";
      node = tree ? static_cast<std::size_t>(parents[node - 1]) : node - 1;
    }
  }
  return {};
}

step_batch one_token_step(std::int32_t token_id) {
  step_batch batch;
  batch.token_ids = {token_id};
  batch.positions = {0};
  batch.query_start = {0, 1};
  batch.seq_lens = {1};
  batch.kv_indptr = {0, 1};
  batch.kv_indices = {0};
  batch.kv_last_page_len = {1};
  batch.slot_mapping = {0};
  batch.logits_indices = {0};
  return batch;
}

std::string validate_step_batch(const step_batch& batch, const kv_cache_spec& spec) {
  const std::size_t num_tokens = batch.token_ids.size();
  if (batch.query_start.empty()) return "query_start is empty";
  const std::size_t num_seqs = batch.query_start.size() - 1;
  if (batch.positions.size() != num_tokens) return "positions and token_ids differ in length";
  if (batch.slot_mapping.size() != num_tokens) return "slot_mapping and token_ids differ in length";
  if (auto e = check_csr(batch.query_start, num_seqs, num_tokens, "query_start"); !e.empty()) return e;
  if (batch.seq_lens.size() != num_seqs) return "seq_lens has the wrong length";
  if (batch.kv_last_page_len.size() != num_seqs) return "kv_last_page_len has the wrong length";
  if (auto e = check_csr(batch.kv_indptr, num_seqs, batch.kv_indices.size(), "kv_indptr"); !e.empty()) return e;
  for (std::int32_t block : batch.kv_indices) {
    if (block < 0 || block >= spec.num_blocks) return "kv_indices holds a block outside the pool";
  }
  for (std::size_t s = 0; s < num_seqs; ++s) {
    const std::int64_t pages = batch.kv_indptr[s + 1] - batch.kv_indptr[s];
    const std::int64_t last = batch.kv_last_page_len[s];
    if (pages <= 0 || last < 1 || last > spec.block_size) return "kv_last_page_len out of range";
    if ((pages - 1) * spec.block_size + last != batch.seq_lens[s]) return "seq_lens disagrees with the page table";
    for (std::int32_t t = batch.query_start[s]; t < batch.query_start[s + 1]; ++t) {
      if (batch.positions[static_cast<std::size_t>(t)] < 0 ||
          batch.positions[static_cast<std::size_t>(t)] >= batch.seq_lens[s])
        return "a position is not below its sequence length";
    }
  }
  const std::int64_t slots = spec.num_blocks * spec.block_size;
  for (std::int64_t slot : batch.slot_mapping) {
    if (slot < 0 || slot >= slots) return "slot_mapping holds a slot outside the pool";
  }
  for (std::int32_t row : batch.logits_indices) {
    if (row < 0 || static_cast<std::size_t>(row) >= num_tokens) return "logits_indices holds a row outside the step";
  }
  if (!batch.sampling.empty() && batch.sampling.size() != batch.logits_indices.size())
    return "sampling and logits_indices differ in length";
  if (auto e = check_tree_parents(batch); !e.empty()) return e;
  return check_verify_groups(batch);
}

}  // namespace troupe

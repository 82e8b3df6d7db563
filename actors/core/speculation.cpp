#include "actors/core/speculation.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>

namespace troupe {

namespace {

// The row that samples a sequence's next token (before drafts, its only row).
const logits_row_hook* token_row(const scheduled_step& step, std::size_t sequence_index) {
  for (const logits_row_hook& row : step.rows) {
    if (row.sequence_index == sequence_index) return &row;
  }
  return nullptr;
}

std::vector<std::int32_t> context_of(const logits_row_hook& row) {
  std::vector<std::int32_t> tokens(row.prompt_tokens.begin(), row.prompt_tokens.end());
  tokens.insert(tokens.end(), row.output_tokens.begin(), row.output_tokens.end());
  return tokens;
}

/// Up to `count` tokens of the row's prompt + outputs from index `from`, without copying the rest.
std::vector<std::int32_t> tokens_from(const logits_row_hook& row, std::ptrdiff_t from, std::int32_t count) {
  const auto prompt = static_cast<std::ptrdiff_t>(row.prompt_tokens.size());
  const auto size = prompt + static_cast<std::ptrdiff_t>(row.output_tokens.size());
  std::vector<std::int32_t> tokens;
  for (std::ptrdiff_t i = from; i < size && static_cast<std::int32_t>(tokens.size()) < count; ++i)
    tokens.push_back(i < prompt ? row.prompt_tokens[static_cast<std::size_t>(i)]
                                : row.output_tokens[static_cast<std::size_t>(i - prompt)]);
  return tokens;
}

// A draft job drawing `slots` drafts after `row`'s context, from its token index on.
draft_job job_from_row(const scheduled_step& step, std::size_t index, const logits_row_hook& row, std::int32_t slots) {
  const scheduled_sequence& seq = step.sequences[index];
  draft_job job;
  job.sequence_index = index;
  job.seq = seq.seq;
  job.tokens = context_of(row);
  job.prompt_length = static_cast<std::int32_t>(row.prompt_tokens.size());
  job.block_table = seq.block_table;
  job.slots = slots;
  job.tree_width = seq.tree_width;
  job.params = *row.params;
  job.seed = row.seed;
  job.token_index = row.token_index;
  job.suppressed.assign(row.suppressed_tokens.begin(), row.suppressed_tokens.end());
  return job;
}

int parse_layer(std::string_view text, int num_layers) {
  int value = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0 || value >= num_layers)
    throw std::runtime_error("knob 'speculative_skip_layers': '" + std::string(text) + "' is not a layer in [0, " +
                             std::to_string(num_layers) + ")");
  return value;
}

}  // namespace

std::optional<speculative_method> parse_speculative_method(std::string_view name) {
  if (name == "off") return speculative_method::off;
  if (name == "ngram") return speculative_method::ngram;
  if (name == "draft") return speculative_method::draft;
  if (name == "layerskip") return speculative_method::layerskip;
  return std::nullopt;
}

std::vector<std::pair<std::size_t, draft_tree>> lookup_drafts(const scheduled_step& step,
                                                              const ngram_settings& settings) {
  std::vector<std::pair<std::size_t, draft_tree>> out;
  for (std::size_t i = 0; i < step.sequences.size(); ++i) {
    const scheduled_sequence& seq = step.sequences[i];
    if (seq.draft_slots <= 0) continue;
    const logits_row_hook* row = token_row(step, i);
    if (row == nullptr) continue;
    draft_tree tree;
    if (seq.tree_width <= 1) {
      // A chain: the tokens after the match the core planned its slots from (no second scan).
      if (seq.lookup_from < 0) continue;
      tree.drafts = tokens_from(*row, seq.lookup_from, seq.draft_slots);
    } else {
      const int depth = (seq.draft_slots + seq.tree_width - 1) / seq.tree_width;
      tree = merge_branches(propose_ngram_branches(context_of(*row), depth, seq.tree_width, settings), seq.draft_slots);
    }
    if (!tree.drafts.empty()) out.emplace_back(i, std::move(tree));
  }
  return out;
}

draft_request draft_jobs(const scheduled_step& step) {
  draft_request request;
  for (std::size_t i = 0; i < step.sequences.size(); ++i) {
    const scheduled_sequence& seq = step.sequences[i];
    const logits_row_hook* row = token_row(step, i);
    if (seq.draft_slots <= 0 || !seq.drafts.empty() || row == nullptr || row->params == nullptr) continue;
    request.jobs.push_back(job_from_row(step, i, *row, seq.draft_slots));
  }
  append_device_blocks(step.copies, request.busy_blocks);
  return request;
}

void append_device_blocks(std::span<const block_copy> copies, std::vector<std::int32_t>& blocks) {
  for (const block_copy& copy : copies) {
    if (copy.from == block_location::device) blocks.push_back(copy.src);
    if (copy.to == block_location::device) blocks.push_back(copy.dst);
  }
}

draft_request ahead_draft_jobs(const scheduled_step& step, std::int32_t block_size) {
  draft_request request;
  for (std::size_t i = 0; i < step.sequences.size(); ++i) {
    const scheduled_sequence& seq = step.sequences[i];
    const logits_row_hook* first = token_row(step, i);
    // Trees list their first chain at nodes 1..m (draft_tree.hpp), a chain is all of it.
    const std::size_t chain = first_chain(draft_tree{seq.drafts, seq.draft_parents}).size();
    if (chain == 0 || first == nullptr || first->params == nullptr) continue;
    // The chain's last row (a sequence's rows are consecutive, t0's first):
    // its outputs end with the chain, and its token index is the bonus
    // token's. The job feeds the context through the chain's last draft at
    // its position, so its table must cover that and slots - 1 more.
    const logits_row_hook* row = first + chain;
    const auto context = static_cast<std::int64_t>(row->prompt_tokens.size() + row->output_tokens.size());
    const std::int64_t covered = static_cast<std::int64_t>(seq.block_table.size()) * block_size;
    // The guess, then as deep a chain as this step's slots planned (not the
    // chain it got: a short one would make every later round as short).
    const std::int64_t depth = (seq.draft_slots + std::max(1, seq.tree_width) - 1) / std::max(1, seq.tree_width);
    const std::int64_t slots = std::min<std::int64_t>(std::max<std::int64_t>(depth, 1) + 1, covered - context + 1);
    if (slots < 2) continue;
    request.jobs.push_back(job_from_row(step, i, *row, static_cast<std::int32_t>(slots)));
    request.jobs.back().tree_width = 1;  // a chain ahead, whatever the step's width
  }
  return request;
}

bool drafter_has_own_compute(bool drafter_on_cpu, int target_threads, int draft_threads, int cores) {
  if (!drafter_on_cpu) return true;
  const int target = target_threads > 0 ? target_threads : cores;
  const int draft = draft_threads > 0 ? draft_threads : target;
  return target + draft <= cores;
}

bool drafts_ahead(draft_ahead_mode mode, bool own_compute, bool shares_target_kv) {
  if (shares_target_kv) return false;
  return mode == draft_ahead_mode::on || (mode == draft_ahead_mode::automatic && own_compute);
}

bool shares_target_kv(std::span<const int> kept, std::string_view draft_ahead) {
  // A layer after a skipped one sees another input than the target's does.
  for (std::size_t i = 0; i < kept.size(); ++i)
    if (kept[i] != static_cast<int>(i)) return false;
  return draft_ahead != "on";
}

std::vector<int> kept_layers(std::string_view skip, int num_layers) {
  std::vector<bool> skipped(static_cast<std::size_t>(num_layers), false);
  if (skip.empty()) {
    for (int layer = (num_layers + 1) / 2; layer < num_layers; ++layer) skipped[static_cast<std::size_t>(layer)] = true;
  }
  while (!skip.empty()) {
    const std::size_t comma = skip.find(',');
    const std::string_view item = skip.substr(0, comma);
    skip = comma == std::string_view::npos ? std::string_view() : skip.substr(comma + 1);
    const std::size_t dash = item.find('-');
    const int first = parse_layer(item.substr(0, dash), num_layers);
    const int last = dash == std::string_view::npos ? first : parse_layer(item.substr(dash + 1), num_layers);
    if (last < first)
      throw std::runtime_error("knob 'speculative_skip_layers': '" + std::string(item) + "' is an empty range");
    for (int layer = first; layer <= last; ++layer) skipped[static_cast<std::size_t>(layer)] = true;
  }
  std::vector<int> kept;
  for (int layer = 0; layer < num_layers; ++layer) {
    if (!skipped[static_cast<std::size_t>(layer)]) kept.push_back(layer);
  }
  if (kept.empty()) throw std::runtime_error("knob 'speculative_skip_layers': every layer is skipped");
  return kept;
}

}  // namespace troupe

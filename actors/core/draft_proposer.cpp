#include "actors/core/draft_proposer.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "kernels/speculative.hpp"

namespace troupe {

namespace {

// The `count` likeliest ids after `chosen` by logit (ties: lower id first), none suppressed or -inf.
std::vector<std::int32_t> runners_up(std::span<const float> logits, std::int32_t chosen,
                                     std::span<const std::int32_t> suppressed, std::size_t count) {
  std::vector<std::int32_t> ids;
  for (std::size_t id = 0; id < logits.size(); ++id) {
    const auto token = static_cast<std::int32_t>(id);
    if (token == chosen || !(logits[id] > -std::numeric_limits<float>::infinity())) continue;
    if (std::find(suppressed.begin(), suppressed.end(), token) != suppressed.end()) continue;
    ids.push_back(token);
  }
  const auto better = [&](std::int32_t a, std::int32_t b) {
    const float la = logits[static_cast<std::size_t>(a)], lb = logits[static_cast<std::size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  const std::size_t kept = std::min(count, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(kept), ids.end(), better);
  ids.resize(kept);
  return ids;
}

}  // namespace

draft_proposer::draft_proposer(std::int32_t block_size, std::int64_t vocab_size, std::size_t max_remembered)
    : block_size_(block_size),
      vocab_size_(vocab_size),
      logits_width_(vocab_size),
      max_remembered_(std::max<std::size_t>(1, max_remembered)) {}

void draft_proposer::set_logits_width(std::int64_t width) {
  if (width < 1 || width > vocab_size_)
    throw std::invalid_argument("draft logits of " + std::to_string(width) + " ids for a vocabulary of " +
                                std::to_string(vocab_size_));
  logits_width_ = width;
  widened_.assign(width < vocab_size_ ? static_cast<std::size_t>(vocab_size_) : 0,
                  -std::numeric_limits<float>::infinity());
}

std::int32_t draft_proposer::trusted_prefix(std::span<const std::int32_t> tokens,
                                            std::span<const std::int32_t> block_table) const {
  // A block's draft K/V is what a sequence needs when its last writer wrote it
  // through the same table position after the same tokens from position 0:
  // K/V at a position is a function of the tokens up to it, whoever's
  // sequence they were (prompts sharing a cached prefix share its blocks).
  const auto block_size = static_cast<std::size_t>(block_size_);
  std::size_t n = 0;
  const written* matched = nullptr;  // the writer whose tokens equal ours on [0, n)
  while (n < tokens.size()) {
    const std::size_t block = n / block_size;
    if (block >= block_table.size()) break;
    const auto writer = last_writer_.find(block_table[block]);
    if (writer == last_writer_.end()) break;
    const auto record = written_.find(writer->second);
    if (record == written_.end()) break;
    const written& w = record->second;
    if (block >= w.blocks.size() || w.blocks[block] != block_table[block]) break;
    if (&w != matched) {  // the writer changes at most a few times along a sequence
      if (w.tokens.size() < n ||
          !std::equal(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(n), w.tokens.begin()))
        break;
      matched = &w;
    }
    const std::size_t block_end = std::min({(block + 1) * block_size, w.tokens.size(), tokens.size()});
    while (n < block_end && w.tokens[n] == tokens[n]) ++n;
    if (n < (block + 1) * block_size) break;
  }
  return static_cast<std::int32_t>(n);
}

bool draft_proposer::writes_busy_block(const draft_job& job, std::int32_t chain,
                                       std::span<const std::int32_t> busy_blocks) const {
  // The round writes t0 and the chain's drafts but the last, at positions last .. last + chain - 1.
  const auto last = static_cast<std::int64_t>(job.tokens.size()) - 1;
  const auto first = static_cast<std::size_t>(last / block_size_);
  const auto end = std::min(job.block_table.size(), static_cast<std::size_t>((last + chain - 1) / block_size_ + 1));
  for (std::size_t block = first; block < end; ++block)
    if (std::binary_search(busy_blocks.begin(), busy_blocks.end(), job.block_table[block])) return true;
  return false;
}

scheduled_step draft_proposer::begin(draft_request request) {
  ++round_;
  steps_ = 0;
  jobs_.clear();
  std::sort(request.busy_blocks.begin(), request.busy_blocks.end());
  for (draft_job& job : request.jobs) {
    if (job.slots < 1 || job.tokens.empty() || job.prompt_length < 0 ||
        job.prompt_length > static_cast<std::int32_t>(job.tokens.size()))
      throw std::invalid_argument("draft job for sequence " + std::to_string(job.seq) + " is malformed");
    const auto covered = static_cast<std::int64_t>(job.block_table.size()) * block_size_;
    if (covered < static_cast<std::int64_t>(job.tokens.size()) + job.slots - 1)
      throw std::invalid_argument("draft job for sequence " + std::to_string(job.seq) +
                                  ": its block table does not cover the draft positions");
    job_state state;
    state.chain = job.tree_width > 1 ? (job.slots + job.tree_width - 1) / job.tree_width : job.slots;
    if (shares_target_kv_ && writes_busy_block(job, state.chain, request.busy_blocks)) state.chain = 0;
    state.outputs.assign(job.tokens.begin() + job.prompt_length, job.tokens.end());
    state.result.sequence_index = job.sequence_index;
    state.job = std::move(job);
    jobs_.push_back(std::move(state));
  }
  return next_step(true);
}

scheduled_step draft_proposer::next_step(bool first) {
  scheduled_step step;
  step.id = next_step_id_++;
  ++steps_;
  step.logits_only = true;
  stepped_.clear();
  for (std::size_t j = 0; j < jobs_.size(); ++j) {
    job_state& state = jobs_[j];
    const draft_job& job = state.job;
    const auto drawn = static_cast<std::int32_t>(state.result.drafts.size());
    if (drawn >= state.chain) continue;
    const auto last = static_cast<std::int32_t>(job.tokens.size()) - 1;  // t0's position
    scheduled_sequence seq;
    seq.seq = job.seq;
    seq.block_table = job.block_table;
    seq.num_samples = 1;
    if (first) {
      // Catch up from what the draft already holds; t0 is always fed.
      seq.start = shares_target_kv_ ? last : std::min(trusted_prefix(job.tokens, job.block_table), last);
      state.fed_from = seq.start;
      seq.tokens.assign(job.tokens.begin() + seq.start, job.tokens.end());
    } else {
      seq.start = last + drawn;
      seq.tokens = {state.result.drafts.back()};
    }
    logits_row_hook row;
    row.sequence_index = step.sequences.size();
    row.seq = job.seq;
    step.sequences.push_back(std::move(seq));
    step.rows.push_back(row);
    stepped_.push_back(j);
  }
  if (step.sequences.empty()) --steps_;  // every job was skipped: no step runs
  return step;
}

void draft_proposer::draw(job_state& state, std::span<const float> logits_row) {
  const draft_job& job = state.job;
  const std::uint64_t index = job.token_index + state.result.drafts.size();
  sampling_row row;
  row.params = &job.params;
  row.seed = job.seed;
  row.token_index = index;
  row.prompt_tokens = std::span<const std::int32_t>(job.tokens.data(), static_cast<std::size_t>(job.prompt_length));
  row.output_tokens = state.outputs;
  row.suppressed_tokens = job.suppressed;
  const std::vector<float> q = processed_distribution(logits_row, row);
  const std::int32_t token = draw_from_distribution(q, draft_uniform(job.seed, index));
  const bool greedy = job.params.temperature == 0.0f || job.params.top_k == 1;
  if (greedy && job.tree_width > 1) {
    // The runners-up at this depth cost no draft step (they are leaves); the
    // slots past the chain go to the shallowest depths first, which the
    // verifier reaches most often.
    std::int32_t used = 0;
    for (const auto& depth : state.siblings) used += static_cast<std::int32_t>(depth.size());
    const std::int32_t wanted = std::min(job.tree_width - 1, job.slots - state.chain - used);
    state.siblings.push_back(wanted > 0
                                 ? runners_up(logits_row, token, job.suppressed, static_cast<std::size_t>(wanted))
                                 : std::vector<std::int32_t>{});
  }
  state.result.drafts.push_back(token);
  state.outputs.push_back(token);
  if (!greedy) state.result.probs.insert(state.result.probs.end(), q.begin(), q.end());
}

std::optional<scheduled_step> draft_proposer::on_logits(std::span<const float> logits) {
  const auto width = static_cast<std::size_t>(logits_width_);
  if (logits.size() != stepped_.size() * width)
    throw std::invalid_argument("draft step returned " + std::to_string(logits.size()) + " logits for " +
                                std::to_string(stepped_.size()) + " rows of " + std::to_string(width));
  for (std::size_t r = 0; r < stepped_.size(); ++r) {
    std::span<const float> row = logits.subspan(r * width, width);
    if (!widened_.empty()) {
      std::copy(row.begin(), row.end(), widened_.begin());  // the tail stays -inf
      row = widened_;
    }
    draw(jobs_[stepped_[r]], row);
  }
  const bool more = std::any_of(jobs_.begin(), jobs_.end(), [](const job_state& s) {
    return static_cast<std::int32_t>(s.result.drafts.size()) < s.chain;
  });
  if (more) return next_step(false);
  for (job_state& state : jobs_) {
    if (!shares_target_kv_) remember(state);
    attach_siblings(state);
  }
  return std::nullopt;
}

void draft_proposer::remember(const job_state& state) {
  const draft_job& job = state.job;
  written& w = written_[job.seq];
  // K/V now sit for every token up to t0 and for d1 .. d(k-1); dk was never fed.
  w.tokens = job.tokens;
  w.tokens.insert(w.tokens.end(), state.result.drafts.begin(), state.result.drafts.end() - 1);
  w.blocks = job.block_table;
  w.last_round = round_;
  const std::size_t last_position = w.tokens.size() - 1;
  for (std::size_t block = static_cast<std::size_t>(state.fed_from / block_size_);
       block <= last_position / static_cast<std::size_t>(block_size_) && block < w.blocks.size(); ++block)
    last_writer_[w.blocks[block]] = job.seq;
  while (written_.size() > max_remembered_) {
    const auto oldest = std::min_element(written_.begin(), written_.end(), [](const auto& a, const auto& b) {
      return a.second.last_round < b.second.last_round;
    });
    written_.erase(oldest);
  }
}

void draft_proposer::attach_siblings(job_state& state) {
  if (std::all_of(state.siblings.begin(), state.siblings.end(), [](const auto& d) { return d.empty(); })) return;
  drafted& result = state.result;
  const auto chain = static_cast<std::int32_t>(result.drafts.size());
  for (std::int32_t i = 0; i < chain; ++i) result.parents.push_back(i);
  // Depth-first numbering (draft_tree.hpp): the deepest alternatives follow
  // the chain, the first draft's come last; draw keeps one list per chain draft.
  for (auto depth = static_cast<std::int32_t>(state.siblings.size()); depth >= 1; --depth) {
    for (std::int32_t sibling : state.siblings[static_cast<std::size_t>(depth - 1)]) {
      result.drafts.push_back(sibling);
      result.parents.push_back(depth - 1);
    }
  }
}

draft_reply draft_proposer::take_reply() {
  draft_reply reply;
  for (job_state& state : jobs_) reply.sequences.push_back(std::move(state.result));
  reply.steps = steps_;
  jobs_.clear();
  stepped_.clear();
  return reply;
}

void draft_proposer::forget_written() {
  written_.clear();
  last_writer_.clear();
  jobs_.clear();
  stepped_.clear();
}

draft_reply draft_proposer::run_round(draft_request request, const draft_step_runner& run_step) {
  std::optional<scheduled_step> step = begin(std::move(request));
  if (step->sequences.empty()) step.reset();
  while (step) {
    const std::vector<float> logits = run_step(*step);
    step = on_logits(logits);
  }
  return take_reply();
}

}  // namespace troupe

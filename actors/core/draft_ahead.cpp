#include "actors/core/draft_ahead.hpp"

#include <algorithm>

namespace troupe {

void draft_ahead_book::record(const draft_request& request, const draft_reply& reply) {
  for (const drafted& out : reply.sequences) {
    const auto job = std::find_if(request.jobs.begin(), request.jobs.end(),
                                  [&](const draft_job& j) { return j.sequence_index == out.sequence_index; });
    // The first draft is the guess for the bonus token; without one after it there is nothing to keep.
    if (job == request.jobs.end() || out.drafts.size() < 2 || !out.parents.empty()) continue;
    guess kept;
    // The outputs the next step's sequence must have: the job's (through the drafts being verified), then the guess.
    kept.outputs.assign(job->tokens.begin() + job->prompt_length, job->tokens.end());
    kept.outputs.push_back(out.drafts.front());
    kept.context = job->tokens.size() + 1;
    kept.token_index = job->token_index + 1;
    kept.drafts.assign(out.drafts.begin() + 1, out.drafts.end());
    if (!out.probs.empty()) {
      const std::size_t vocab = out.probs.size() / out.drafts.size();
      kept.probs.assign(out.probs.begin() + static_cast<std::ptrdiff_t>(vocab), out.probs.end());
    }
    kept.recorded = takes_;
    kept_[job->seq] = std::move(kept);
  }
}

std::vector<draft_ahead_book::ahead_drafts> draft_ahead_book::take(const scheduled_step& step, std::uint64_t max_age) {
  ++takes_;
  std::vector<ahead_drafts> out;
  for (std::size_t i = 0; i < step.sequences.size(); ++i) {
    const scheduled_sequence& seq = step.sequences[i];
    const auto it = kept_.find(seq.seq);
    if (it == kept_.end()) continue;
    guess kept = std::move(it->second);
    kept_.erase(it);
    if (seq.draft_slots <= 0 || !seq.drafts.empty()) continue;
    const auto row = std::find_if(step.rows.begin(), step.rows.end(),
                                  [&](const logits_row_hook& hook) { return hook.sequence_index == i; });
    if (row == step.rows.end()) continue;
    const std::span<const std::int32_t> outputs = row->output_tokens;
    if (row->token_index != kept.token_index || row->prompt_tokens.size() + outputs.size() != kept.context ||
        !std::equal(outputs.begin(), outputs.end(), kept.outputs.begin(), kept.outputs.end()))
      continue;
    ahead_drafts hit{.sequence_index = i, .drafts = std::move(kept.drafts), .probs = std::move(kept.probs)};
    const auto slots = static_cast<std::size_t>(seq.draft_slots);
    if (hit.drafts.size() > slots) {
      if (!hit.probs.empty()) hit.probs.resize(hit.probs.size() / hit.drafts.size() * slots);
      hit.drafts.resize(slots);
    }
    out.push_back(std::move(hit));
  }
  std::erase_if(kept_, [&](const auto& entry) { return takes_ - entry.second.recorded > max_age; });
  return out;
}

}  // namespace troupe

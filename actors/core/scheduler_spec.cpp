// Speculative decoding in the scheduler core: how many draft slots a decode
// gets, putting a proposer's drafts into a taken step, and settling the
// slots once the verified tokens are back (docs/scheduling.md).

#include <algorithm>
#include <cmath>
#include <limits>

#include "actors/core/draft_tree.hpp"
#include "actors/core/scheduler.hpp"
#include "actors/core/sequence_constraint.hpp"
#include "kernels/step_batch.hpp"

namespace troupe {

namespace {

/// Parents of a chain of `j` drafts (each the node before it).
std::vector<std::int32_t> chain_parents(std::int32_t j) {
  std::vector<std::int32_t> parents(static_cast<std::size_t>(j));
  for (std::int32_t i = 0; i < j; ++i) parents[static_cast<std::size_t>(i)] = i;
  return parents;
}

/// Weight of the newest round in a sequence's acceptance average: about the
/// last five rounds count, so k follows a change of text within a few steps.
constexpr double acceptance_smoothing = 0.2;
/// Weight of the newest round in the engine's acceptance average, a new
/// sequence's starting guess: about the last twenty rounds of any sequence.
constexpr double prior_smoothing = 0.05;

/// A sequence the turn-down left plain this many decodes in a row speculates
/// once more: its acceptance was measured on text it has left behind. With
/// a drafter (a draft model, layer skipping) each probe doubles the wait
/// before the next, and after a probe at the longest wait there are no more
/// until the cost model chooses the sequence again: such a probe is a draft
/// round the whole step waits for, and its catch-up feeds the drafter every
/// token since the last (a prefill of the wait), so on text the draft cannot
/// follow, probing for good would cost a draft prefill of the whole output.
/// A drafter working in the target's KV has no catch-up: its probe costs one
/// round, so its waits grow to the longest and its probes go on there.
constexpr std::int32_t first_probe_wait = 32;
constexpr std::int32_t longest_probe_wait = 128;
constexpr std::int32_t no_more_probes = std::numeric_limits<std::int32_t>::max();

}  // namespace

int scheduler::count_decodes(int cap) const {
  int decoding = 0;
  for (const sequence* seq : plan_->running) {
    if (seq->resident() && seq->pending_rows == 0 && !granted(*seq) && seq->total_tokens() - seq->num_computed == 1)
      ++decoding;
  }
  return std::min(decoding, cap);
}

std::int32_t scheduler::probe_wait_after(const sequence& seq, draft_grant drafts) const {
  // Prompt lookup has no draft round and no catch-up: its probes cost only the verified slots.
  if (drafts != draft_grant::probe || !seq.drafts_verified || !speculation_costs_.draft_rounds_cost()) return 0;
  if (seq.decodes_before_probe <= 0) return 2 * first_probe_wait;
  if (seq.decodes_before_probe < longest_probe_wait) return 2 * seq.decodes_before_probe;
  return config_.drafter_shares_target_kv ? longest_probe_wait : no_more_probes;
}

scheduler::speculating_set scheduler::speculating_decodes(int cap) const {
  std::vector<const sequence*> decodes;
  for (const sequence* seq : plan_->running) {
    if (static_cast<int>(decodes.size()) >= cap) break;
    if (seq->resident() && seq->pending_rows == 0 && !granted(*seq) && seq->total_tokens() - seq->num_computed == 1)
      decodes.push_back(seq);
  }
  // The cap counts every unfinished sequence, prefilling, waiting and swapped
  // ones too: they decode within a few steps, and a drafter's catch-up on a
  // prompt only pays when speculation goes on.
  const int batch = num_running() + num_waiting() + num_swapped();
  if (config_.num_speculative_tokens <= 0 || batch > config_.speculative_max_batch) return {};
  // With a drafter whose rounds cost time, a sequence whose draft is behind
  // (never verified, or probed after a plain stretch) has it catch up on its
  // whole context or the stretch first: not worth it with fewer tokens left
  // than two full rounds emit. (A large batch whose sequences end within a
  // few steps of each other drops below speculative_max_batch with a few
  // tokens left in each: they stay plain.) A drafter working in the
  // target's KV has nothing to catch up on.
  const bool catch_up_costs = speculation_costs_.draft_rounds_cost() && !config_.drafter_shares_target_kv;
  const std::int64_t catch_up_pays_from = 2 * (std::int64_t{config_.num_speculative_tokens} + 1);
  const auto too_short_to_catch_up = [&](const sequence& seq) {
    return catch_up_costs && tokens_left(seq) < catch_up_pays_from;
  };
  // Prompt lookup costs nothing to ask before the round: a decode without a
  // match stays plain, and one with a match is valued by how well matches of
  // its length were accepted (a long match in a loop or a quoted passage is
  // far likelier right than a one-token match in free text).
  const bool lookup = config_.prompt_lookup.max_ngram > 0;
  struct eligible_decode {
    const sequence* seq;
    ngram_match match;
    double acceptance;
  };
  std::vector<eligible_decode> eligible;
  for (const sequence* seq : decodes) {
    const ngram_match match = lookup ? lookup_match(*seq) : ngram_match{};
    if (lookup && match.count == 0) continue;
    const ngram_match* planned = lookup ? &match : nullptr;
    if (wanted_slots(*seq, planned) > 0 && (seq->drafts_verified || !too_short_to_catch_up(*seq)))
      eligible.push_back({seq, match, planned_acceptance(*seq, planned)});
  }
  // The likeliest to be accepted first: the model picks how many of them speculate.
  std::stable_sort(eligible.begin(), eligible.end(),
                   [](const eligible_decode& a, const eligible_decode& b) { return a.acceptance > b.acceptance; });
  std::vector<speculation_candidate> candidates;
  for (const eligible_decode& e : eligible) {
    const std::int32_t width = e.seq->matcher ? 1 : std::max(1, config_.speculative_tree_width);
    candidates.push_back(
        tree_candidate(e.acceptance, wanted_slots(*e.seq, lookup ? &e.match : nullptr), width, e.seq->fed_fraction));
  }
  const auto plain = static_cast<std::int32_t>(decodes.size());
  const std::size_t chosen = config_.speculative_turn_down ? speculation_costs_.worth_speculating(candidates, plain, plain)
                                                           : candidates.size();
  // Past the chosen prefix only probes stay: sequences left plain for long,
  // and those whose drafts were never verified (their acceptance and fill
  // are still the optimistic start, not a measurement).
  const auto beyond = eligible.begin() + static_cast<std::ptrdiff_t>(chosen);
  eligible.erase(std::remove_if(beyond, eligible.end(),
                                [&](const eligible_decode& e) {
                                  const sequence& seq = *e.seq;
                                  const std::int32_t wait =
                                      seq.decodes_before_probe > 0 ? seq.decodes_before_probe : first_probe_wait;
                                  return seq.drafts_verified &&
                                         (seq.decodes_since_slots < wait || too_short_to_catch_up(seq));
                                }),
                 eligible.end());
  speculating_set set{.chosen = chosen};
  for (const eligible_decode& e : eligible) {
    set.sequences.push_back(e.seq);
    if (lookup) set.matches.push_back(e.match);
  }
  return set;
}

ngram_match scheduler::lookup_match(const sequence& seq) const {
  const std::vector<std::int32_t>& prompt = seq.request->spec.prompt;
  std::vector<std::int32_t> context;
  context.reserve(prompt.size() + seq.outputs.size());
  context.assign(prompt.begin(), prompt.end());
  context.insert(context.end(), seq.outputs.begin(), seq.outputs.end());
  return find_ngram(context, config_.num_speculative_tokens, config_.prompt_lookup);
}

double scheduler::planned_acceptance(const sequence& seq, const ngram_match* match) const {
  if (match == nullptr) return seq.acceptance;
  const auto length = static_cast<std::size_t>(match->length);
  return length < seq.acceptance_by_match.size() ? seq.acceptance_by_match[length] : 1.0;
}

std::int32_t scheduler::wanted_slots(const sequence& seq, const ngram_match* match) const {
  // No outputs yet: the last prompt token (a prefill, or the fork step).
  if (!seq.request->spec.speculate || seq.outputs.empty()) return 0;
  const int k_max = config_.num_speculative_tokens;
  // A tree of `width` branches of up to k drafts each (seq.matcher: one chain).
  const std::int32_t width = seq.matcher ? 1 : std::max(1, config_.speculative_tree_width);
  std::int32_t k = k_max;
  if (config_.speculative_adaptive)
    k = static_cast<std::int32_t>(
        std::clamp<std::int64_t>(std::llround(planned_acceptance(seq, match) * k_max) + 1, 1, k_max));
  // A chain of prompt lookup drafts is as long as its match at most.
  if (match != nullptr && width == 1) k = std::min(k, match->count);
  return width * k;
}

std::int64_t scheduler::tokens_left(const sequence& seq) const {
  std::int64_t left = config_.max_model_len - seq.total_tokens();
  if (const std::int64_t max_tokens = seq.request->spec.max_tokens; max_tokens >= 0)
    left = std::min<std::int64_t>(left, max_tokens - static_cast<std::int64_t>(seq.outputs.size()));
  return left;
}

std::int32_t scheduler::draft_slots_for(const sequence& seq, int decodes_after, const ngram_match* match) const {
  std::int64_t slots = wanted_slots(seq, match);
  if (slots <= 0) return 0;
  // A round emits up to slots + 1 tokens: no more than max_tokens and the context allow.
  slots = std::min<std::int64_t>(slots, tokens_left(seq) - 1);
  // Every decode still to plan keeps its token and, at most, one new block.
  slots = std::min<std::int64_t>(slots, plan_->budget - 1 - decodes_after);
  while (slots > 0 && append_blocks(seq, 1 + static_cast<std::int32_t>(slots)) > plan_->free_blocks - decodes_after)
    --slots;
  return static_cast<std::int32_t>(std::max<std::int64_t>(slots, 0));
}

std::string scheduler::set_drafts(scheduled_step& step, std::size_t sequence_index, std::vector<std::int32_t> drafts,
                                  std::vector<float> draft_probs, std::vector<std::int32_t> parents) {
  if (sequence_index >= step.sequences.size()) return "step " + std::to_string(step.id) + " has no such sequence";
  scheduled_sequence& scheduled = step.sequences[sequence_index];
  if (!scheduled.drafts.empty()) return "the sequence's drafts are set already";
  if (drafts.size() > static_cast<std::size_t>(scheduled.draft_slots))
    return std::to_string(drafts.size()) + " drafts for " + std::to_string(scheduled.draft_slots) + " draft slots";
  if (!draft_probs.empty() && (drafts.empty() || draft_probs.size() % drafts.size() != 0))
    return "draft_probs is not one row per draft";
  if (!parents.empty()) {
    if (auto problem = draft_tree_problem(drafts, parents); !problem.empty()) return problem;
    if (!draft_probs.empty()) return "a draft tree's drafts must be point masses (no draft_probs)";
  }
  const auto flight = in_flight_.find(step.id);
  if (flight == in_flight_.end()) return "step " + std::to_string(step.id) + " is not in flight";
  const auto row = std::find_if(step.rows.begin(), step.rows.end(),
                                [&](const logits_row_hook& hook) { return hook.sequence_index == sequence_index; });
  sequence* seq = find_sequence(scheduled.seq);
  if (drafts.empty() || seq == nullptr || !seq->resident() || seq->unsettled_slots == 0 || row == step.rows.end())
    return {};  // nothing to verify, or the sequence left the device since (its slots are dropped)
  draft_tree tree{std::move(drafts), std::move(parents)};
  // A constrained sequence's masks follow one path: its tree is cut to the first chain.
  if (!tree.parents.empty() && (seq->matcher || is_chain(tree.parents))) tree = draft_tree{first_chain(tree), {}};
  request_state& request = *seq->request;
  const auto j = static_cast<std::int32_t>(tree.drafts.size());
  seq->num_drafts = j;
  seq->fed_fraction = (1 - acceptance_smoothing) * seq->fed_fraction +
                      acceptance_smoothing * static_cast<double>(j) / seq->unsettled_slots;
  std::vector<std::size_t> offsets(static_cast<std::size_t>(j), 0);
  if (tree.parents.empty()) {
    seq->draft_context.clear();
    seq->draft_context.reserve(seq->outputs.size() + tree.drafts.size());  // the hooks' spans must not move
    seq->draft_context.assign(seq->outputs.begin(), seq->outputs.end());
    seq->draft_context.insert(seq->draft_context.end(), tree.drafts.begin(), tree.drafts.end());
  } else {
    seq->draft_context = path_contexts(seq->outputs, tree, offsets);
  }
  const std::vector<std::int32_t> depths = draft_tree_depths(tree.parents.empty() ? chain_parents(j) : tree.parents);
  seq->draft_probs = std::move(draft_probs);
  scheduled.drafts = tree.drafts;
  scheduled.draft_parents = tree.parents;
  scheduled.draft_probs = seq->draft_probs;
  const auto masks =
      tree.parents.empty() ? draft_row_masks(*seq, scheduled.drafts) : std::vector<std::span<const std::uint32_t>>{};
  seq->drafts_fed = std::move(tree);
  std::vector<logits_row_hook> hooks;
  std::vector<in_flight_row> records;
  for (std::int32_t i = 1; i <= j; ++i) {
    const auto node = static_cast<std::size_t>(i);
    logits_row_hook hook = *row;
    hook.token_index += static_cast<std::uint64_t>(depths[node]);
    hook.output_tokens = std::span<const std::int32_t>(seq->draft_context)
                             .subspan(offsets[node - 1], seq->outputs.size() + static_cast<std::size_t>(depths[node]));
    hook.suppressed_tokens = static_cast<std::int64_t>(hook.token_index) < request.spec.min_tokens
                                 ? std::span<const std::int32_t>(request.min_tokens_suppressed)
                                 : std::span<const std::int32_t>{};
    if (!masks.empty()) hook.allowed_mask = masks[node - 1];
    hooks.push_back(hook);
    records.push_back({seq, &request, seq->choice, i});
  }
  const auto at = row - step.rows.begin() + 1;
  step.rows.insert(step.rows.begin() + at, hooks.begin(), hooks.end());
  auto& rows = flight->second.rows;
  rows.insert(rows.begin() + at, records.begin(), records.end());
  seq->pending_rows += j;
  request.rows_in_flight += j;
  return {};
}

std::string scheduler::verify_problem(const in_flight_step& record, const step_result& result) const {
  std::size_t group = 0;
  for (std::size_t i = 0; i < record.rows.size(); ++i) {
    if (record.rows[i].draft_position != 1) continue;
    std::int32_t drafts = 0;
    while (i + static_cast<std::size_t>(drafts) < record.rows.size() &&
           record.rows[i + static_cast<std::size_t>(drafts)].draft_position == drafts + 1)
      ++drafts;
    if (group < result.accepted.size() && (result.accepted[group] < 0 || result.accepted[group] > drafts))
      return "verify group " + std::to_string(group) + " accepted " + std::to_string(result.accepted[group]) + " of " +
             std::to_string(drafts) + " drafts";
    ++group;
  }
  if (group != result.accepted.size())
    return std::to_string(group) + " verify groups but " + std::to_string(result.accepted.size()) + " accepted counts";
  return {};
}

void scheduler::observe_verified(sequence& seq, std::int32_t accepted) {
  const std::int32_t drafts = seq.num_drafts;
  seq.drafts_verified = true;
  ++metrics_.spec_drafts;
  metrics_.spec_draft_tokens += static_cast<std::uint64_t>(drafts);
  metrics_.spec_accepted_tokens += static_cast<std::uint64_t>(accepted);
  auto& per_position = metrics_.spec_accepted_per_position;
  if (per_position.size() < static_cast<std::size_t>(drafts)) per_position.resize(static_cast<std::size_t>(drafts));
  for (std::int32_t i = 0; i < accepted; ++i) ++per_position[static_cast<std::size_t>(i)];
  // A tree's acceptance is measured against its depth: at most that many drafts can be accepted.
  const std::int32_t depth = seq.drafts_fed.parents.empty() ? drafts : tree_depth(seq.drafts_fed.parents);
  const double fraction = static_cast<double>(accepted) / depth;
  seq.acceptance = (1 - acceptance_smoothing) * seq.acceptance + acceptance_smoothing * fraction;
  acceptance_prior_ = (1 - prior_smoothing) * acceptance_prior_ + prior_smoothing * fraction;
  if (seq.planned_match.length > 0) {
    const auto length = static_cast<std::size_t>(seq.planned_match.length);
    if (seq.acceptance_by_match.size() <= length) seq.acceptance_by_match.resize(length + 1, 1.0);
    double& by_length = seq.acceptance_by_match[length];
    by_length = (1 - acceptance_smoothing) * by_length + acceptance_smoothing * fraction;
  }
}

void scheduler::settle_step(const in_flight_step& record,
                            const std::vector<std::pair<sequence*, std::int32_t>>& verified) {
  for (sequence_id id : record.sequences) {
    sequence* seq = find_sequence(id);
    if (seq == nullptr || seq->unsettled_slots == 0) continue;
    const auto it = std::find_if(verified.begin(), verified.end(), [seq](const auto& v) { return v.first == seq; });
    settle(*seq, it == verified.end() ? 0 : it->second);
  }
}

void scheduler::settle(sequence& seq, std::int32_t accepted) {
  // t0 and the accepted drafts in place have valid K/V; the emitted tokens after them are fed next.
  seq.num_computed += accepted;
  const auto first = seq.drafts_fed.drafts.begin();
  pending_settles_.push_back({seq.id, accepted, std::vector<std::int32_t>(first, first + accepted)});
  seq.unsettled_slots = 0;
  // Mirror the blocks the settle releases now, so the next plan counts them free.
  const auto keep = static_cast<std::size_t>(blocks_for(seq.num_computed));
  if (seq.block_table.size() > keep) {
    pending_freed_blocks_ += static_cast<std::int32_t>(seq.block_table.size() - keep);
    seq.block_table.resize(keep);
  }
}

void scheduler::take_pending_settle(const sequence& seq) {
  const auto it = std::find_if(pending_settles_.begin(), pending_settles_.end(),
                               [&seq](const kv_settle& s) { return s.seq == seq.id; });
  if (it == pending_settles_.end()) return;
  plan_->request.settles.push_back(std::move(*it));
  pending_settles_.erase(it);
}

}  // namespace troupe

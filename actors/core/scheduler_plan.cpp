// Planning one step: running sequences first (decodes, then prefill chunks),
// preempting the least urgent when blocks run out; then swapped and waiting
// sequences in policy order while budget, sequence slots and blocks last,
// preempting less urgent running work when the policy allows.

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "actors/core/scheduler.hpp"

namespace troupe {

bool scheduler::urgent(const sequence& a, const sequence& b) const {
  const request_state& ra = *a.request;
  const request_state& rb = *b.request;
  if (ra.policy_key != rb.policy_key) return ra.policy_key < rb.policy_key;
  if (ra.arrival_order != rb.arrival_order) return ra.arrival_order < rb.arrival_order;
  return a.choice < b.choice;
}

kv_request scheduler::begin_step(double now) {
  if (plan_) throw std::logic_error("scheduler::begin_step called before the previous step was taken");
  plan_.emplace();
  step_ready_ = false;
  plan_->id = next_step_++;
  plan_->now = now;
  plan_->request.settles = std::exchange(pending_settles_, {});  // first: they may release blocks
  std::vector<request_state*> live;
  live.reserve(requests_.size());
  for (const auto& [handle, request] : requests_) {
    if (request->done()) continue;
    if (request->timeout_at <= now)
      cancel_request(*request, now, plan_->events);
    else
      live.push_back(request.get());
  }
  policy_->on_step_begin(now, live);
  for (request_state* request : live) refresh_key(*request);
  plan_->budget = config_.max_num_batched_tokens;
  plan_->free_blocks = known_usage_.device_free_blocks + pending_freed_blocks_;
  plan_->host_free = known_usage_.host_free_blocks;
  collect_sequences();
  schedule_running(/*decodes=*/true);
  schedule_running(/*decodes=*/false);
  if (!plan_->preempted_for_space) admit_waiting();
  assemble_grants();
  kv_request& request = plan_->request;
  request.step = plan_->id;
  request.forks = std::exchange(pending_forks_, {});
  request.frees.insert(request.frees.begin(), pending_frees_.begin(), pending_frees_.end());
  pending_frees_.clear();
  pending_freed_blocks_ = 0;
  return std::exchange(plan_->request, {});
}

void scheduler::collect_sequences() {
  std::vector<sequence*>& running = plan_->running;
  for (const auto& [id, seq] : sequences_) {
    if (seq->resident()) {
      running.push_back(seq);
    } else if ((seq->status == sequence_status::waiting || seq->status == sequence_status::swapped) &&
               seq->pending_rows == 0 && !seq->request->cancelled) {
      plan_->candidates.push_back(seq);
    }
  }
  std::sort(running.begin(), running.end(), [this](const sequence* a, const sequence* b) { return urgent(*a, *b); });
  plan_->resident = static_cast<int>(running.size());
}

int scheduler::decode_cap() const {
  if (!split_decodes_ || in_flight_.empty()) return std::numeric_limits<int>::max();
  // A decoding sequence sits out the step planned while its token is being
  // sampled, so decodes alternate between the running step and the next;
  // an even split keeps both long enough to hide the other's turnaround.
  int decoding = 0;
  for (const sequence* seq : plan_->running) {
    if (seq->resident() && seq->total_tokens() - seq->num_computed <= 1) ++decoding;
  }
  return (decoding + 1) / 2;
}

void scheduler::schedule_running(bool decodes) {
  int decode_slots = decodes ? decode_cap() : 0;
  int decodes_left = decodes ? count_decodes(decode_slots) : 0;
  // Speculation only where the measured costs say it pays (docs/scheduling.md).
  const speculating_set speculating = decodes ? speculating_decodes(decode_slots) : speculating_set{};
  for (std::size_t i = 0; i < plan_->running.size(); ++i) {
    sequence& seq = *plan_->running[i];
    if (!seq.resident() || seq.pending_rows > 0 || granted(seq)) continue;
    const std::int32_t remaining = seq.total_tokens() - seq.num_computed;
    if (remaining <= 0 || (remaining == 1) != decodes) continue;
    if (plan_->budget <= 0 || (decodes && decode_slots-- <= 0)) break;
    if (decodes) {
      const auto found = std::find(speculating.sequences.begin(), speculating.sequences.end(), &seq);
      const auto index = static_cast<std::size_t>(found - speculating.sequences.begin());
      const ngram_match* match = index < speculating.matches.size() ? &speculating.matches[index] : nullptr;
      schedule_decode(seq, i, --decodes_left,
                      found == speculating.sequences.end() ? draft_grant::none
                      : index < speculating.chosen         ? draft_grant::chosen
                                                           : draft_grant::probe,
                      match);
      continue;
    }
    std::int32_t tokens = std::min({remaining, config_.max_prefill_chunk, plan_->budget});
    std::int32_t blocks = 0;
    if (make_room(seq, i, tokens, blocks)) add_grant(seq, grant_kind::append, tokens, blocks);
  }
}

bool scheduler::schedule_decode(sequence& seq, std::size_t position, int decodes_after, draft_grant drafts,
                                const ngram_match* match) {
  if (const std::int32_t slots = drafts != draft_grant::none ? draft_slots_for(seq, decodes_after, match) : 0;
      slots > 0) {
    add_grant(seq, grant_kind::append, 1, append_blocks(seq, 1 + slots), slots);
    seq.planned_match = match != nullptr ? *match : ngram_match{};
    seq.decodes_since_slots = 0;
    seq.decodes_before_probe = probe_wait_after(seq, drafts);
    return true;
  }
  ++seq.decodes_since_slots;
  std::int32_t tokens = 1, blocks = 0;
  if (!make_room(seq, position, tokens, blocks)) return false;
  add_grant(seq, grant_kind::append, tokens, blocks);
  return true;
}

namespace {

/// 1 when the sequence's next append copies its shared, partially filled last block.
std::int32_t copy_on_write_blocks(const sequence& seq, std::int32_t block_size) {
  return seq.may_share_last_block && seq.num_computed % block_size != 0 ? 1 : 0;
}

}  // namespace

std::int32_t scheduler::append_blocks(const sequence& seq, std::int32_t tokens) const {
  return blocks_for(seq.num_computed + tokens) - static_cast<std::int32_t>(seq.block_table.size()) +
         copy_on_write_blocks(seq, config_.block_size);
}

std::int32_t scheduler::freeable_blocks(const sequence& seq) const {
  return std::max<std::int32_t>(0, static_cast<std::int32_t>(seq.block_table.size()) - seq.shared_prefix_blocks);
}

bool scheduler::make_room(sequence& seq, std::size_t position, std::int32_t& tokens, std::int32_t& blocks) {
  while (true) {
    blocks = append_blocks(seq, tokens);
    if (blocks <= plan_->free_blocks) return true;
    if (tokens > 1) {  // a prefill chunk shrinks to what fits before anyone is preempted
      const std::int32_t usable = static_cast<std::int32_t>(seq.block_table.size()) + plan_->free_blocks -
                                  copy_on_write_blocks(seq, config_.block_size);
      const std::int32_t capacity = usable * config_.block_size - seq.num_computed;
      if (capacity >= 1) {
        tokens = std::min(tokens, capacity);
        blocks = append_blocks(seq, tokens);
        return true;
      }
    }
    sequence* victim = least_urgent_resident(position + 1, &seq);
    if (victim == nullptr) {
      if (plan_->resident <= 1) {
        finish_sequence(seq, finish_reason::length, plan_->now, plan_->events);  // cannot grow even alone
        --plan_->resident;
      } else {
        preempt(seq, /*for_space=*/true);
      }
      return false;
    }
    revoke(*victim);
    preempt(*victim, /*for_space=*/true);
  }
}

sequence* scheduler::least_urgent_resident(std::size_t first, const sequence* except) const {
  for (std::size_t j = plan_->running.size(); j > first; --j) {
    sequence* candidate = plan_->running[j - 1];
    if (candidate != except && candidate->resident()) return candidate;
  }
  return nullptr;
}

sequence* scheduler::preemptible_for_urgency() const {
  // The least urgent resident past its grace period: a request just admitted
  // or resumed is not thrown out again at once.
  for (std::size_t j = plan_->running.size(); j > 0; --j) {
    sequence* candidate = plan_->running[j - 1];
    if (candidate->resident() && plan_->id >= candidate->resident_since + config_.preemption_grace_steps)
      return candidate;
  }
  return nullptr;
}

void scheduler::admit_waiting() {
  std::vector<sequence*>& heap = plan_->candidates;
  if (heap.empty() || plan_->budget <= 0) return;
  const auto less_urgent = [this](const sequence* a, const sequence* b) { return urgent(*b, *a); };
  // With no slot and no block free, only preemption could admit anyone: try
  // the most urgent candidate alone before ordering them all.
  const auto watermark = static_cast<std::int32_t>(std::ceil(config_.admission_watermark * config_.num_device_blocks));
  if (plan_->resident >= config_.max_num_seqs || plan_->free_blocks <= watermark) {
    sequence& best = **std::min_element(heap.begin(), heap.end(),
                                        [this](const sequence* a, const sequence* b) { return urgent(*a, *b); });
    const sequence* victim = preemptible_for_urgency();
    if (victim == nullptr || !policy_->may_preempt(*best.request, *victim->request)) return;
  }
  std::make_heap(heap.begin(), heap.end(), less_urgent);
  while (plan_->budget > 0 && !heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), less_urgent);
    sequence& seq = *heap.back();
    heap.pop_back();
    const bool swapped = seq.status == sequence_status::swapped;
    const std::int32_t base = swapped ? seq.num_computed : 0;
    const std::int32_t remaining = seq.total_tokens() - base;
    const std::int32_t tokens =
        remaining <= 1 ? remaining : std::min({remaining, config_.max_prefill_chunk, plan_->budget});
    const std::int32_t blocks = blocks_for(base + tokens);
    if (!admit_room(seq, blocks)) break;  // the most urgent waiter does not fit: keep its place
    if (add_grant(seq, swapped ? grant_kind::swap_in : grant_kind::allocate, tokens, blocks)) {
      for (sequence* other : heap) refresh_key(*other->request);  // e.g. a tenant's counter moved
      std::make_heap(heap.begin(), heap.end(), less_urgent);
    }
    ++plan_->resident;
  }
}

bool scheduler::admit_room(const sequence& seq, std::int32_t blocks) {
  const auto watermark = static_cast<std::int32_t>(std::ceil(config_.admission_watermark * config_.num_device_blocks));
  // Room for the whole prefill, not only this chunk: a sequence admitted
  // now should not be preempted for its own next chunk (capped so a prompt
  // near the pool's size is still admitted into an empty pool).
  const std::int32_t whole = std::min(blocks_for(seq.total_tokens()), config_.num_device_blocks - watermark);
  const std::int32_t reserve = std::max(blocks, whole);
  while (true) {
    if (plan_->resident < config_.max_num_seqs && reserve <= plan_->free_blocks - watermark) return true;
    sequence* victim = preemptible_for_urgency();
    if (victim == nullptr || !policy_->may_preempt(*seq.request, *victim->request)) return false;
    revoke(*victim);
    preempt(*victim, /*for_space=*/false);
  }
}

void scheduler::preempt(sequence& seq, bool for_space) {
  if (for_space) plan_->preempted_for_space = true;
  take_pending_settle(seq);  // settled before the swap-out copies the accepted drafts' K/V
  // A swap-out drops unsettled slots: only the blocks of computed tokens go to the host.
  const auto table =
      seq.unsettled_slots > 0 ? blocks_for(seq.num_computed) : static_cast<std::int32_t>(seq.block_table.size());
  plan_->free_blocks += freeable_blocks(seq);
  --plan_->resident;
  bool swap = false;
  switch (config_.preemption) {
    case preemption_mode::swap:
      swap = plan_->host_free >= table;
      break;
    case preemption_mode::recompute:
      swap = false;
      break;
    case preemption_mode::automatic:
      swap = plan_->host_free >= table && seq.num_computed >= config_.swap_min_tokens;
      break;
  }
  if (swap) {
    plan_->request.swap_outs.push_back({seq.id});
    plan_->host_free -= table;
    transition(seq, &sequence::to_swapped, table);
  } else {
    plan_->request.frees.push_back({seq.id, false});
    transition(seq, &sequence::to_recompute);
  }
  const preemption_kind kind = swap ? preemption_kind::swap : preemption_kind::recompute;
  plan_->events.preempted.push_back({seq.request->handle, seq.choice, kind});
  ++metrics_.preemptions[preemption_kind_name(kind)];
}

bool scheduler::granted(const sequence& seq) const { return seq.granted_step == plan_->id; }

void scheduler::revoke(sequence& seq) {
  if (!granted(seq)) return;
  seq.granted_step = 0;
  const auto it =
      std::find_if(plan_->grants.begin(), plan_->grants.end(), [&](const grant& g) { return g.seq == &seq; });
  plan_->budget += it->tokens + it->draft_slots;
  plan_->free_blocks += it->blocks;
  plan_->grants.erase(it);
}

bool scheduler::add_grant(sequence& seq, grant_kind kind, std::int32_t tokens, std::int32_t blocks,
                          std::int32_t draft_slots) {
  plan_->grants.push_back({&seq, kind, tokens, blocks, draft_slots});
  seq.granted_step = plan_->id;
  plan_->budget -= tokens + draft_slots;
  plan_->free_blocks -= blocks;
  const bool decode = kind == grant_kind::append && tokens == 1 &&
                      seq.num_computed >= static_cast<std::int32_t>(seq.request->spec.prompt.size());
  if (!policy_->on_scheduled(*seq.request, decode ? 0 : tokens, plan_->now)) return false;
  refresh_key(*seq.request);
  return true;
}

std::vector<std::int32_t> scheduler::token_range(const sequence& seq, std::int32_t from, std::int32_t count) const {
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(count));
  for (std::int32_t i = 0; i < count; ++i) tokens[static_cast<std::size_t>(i)] = seq.token_at(from + i);
  return tokens;
}

void scheduler::assemble_grants() {
  kv_request& request = plan_->request;
  for (const grant& g : plan_->grants) {
    sequence& seq = *g.seq;
    switch (g.kind) {
      case grant_kind::append:
        request.appends.push_back({seq.id, token_range(seq, seq.num_computed, g.tokens), g.draft_slots});
        break;
      case grant_kind::swap_in:
        request.swap_ins.push_back({seq.id, token_range(seq, seq.num_computed, g.tokens)});
        break;
      case grant_kind::allocate:
        request.allocations.push_back({seq.id, token_range(seq, 0, seq.total_tokens()), g.tokens,
                                       seq.request->spec.adapter_id, config_.enable_prefix_caching,
                                       seq.request->spec.cache_salt});
        break;
    }
  }
}

}  // namespace troupe

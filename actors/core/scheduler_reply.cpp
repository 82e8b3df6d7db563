// The KV manager's reply: mirror block tables, handle items that did not fit
// (pick victims and ask again), then turn the grants into the planned step.

#include <algorithm>
#include <stdexcept>

#include "actors/core/scheduler.hpp"
#include "actors/core/sequence_constraint.hpp"

namespace troupe {

std::optional<kv_request> scheduler::on_kv_reply(const kv_reply& reply) {
  if (!plan_ || step_ready_) throw std::logic_error("scheduler::on_kv_reply without a step being planned");
  known_usage_ = reply.usage;
  metrics_.kv = reply.usage;
  apply_deltas(reply);
  plan_->copies.insert(plan_->copies.end(), reply.copies.begin(), reply.copies.end());
  plan_->allocated.insert(plan_->allocated.end(), reply.allocated.begin(), reply.allocated.end());
  plan_->request = {};
  plan_->request.step = plan_->id;
  for (const kv_refused& refused : reply.refused) handle_refusal(refused);
  if (!plan_->request.empty()) return std::exchange(plan_->request, {});
  step_ready_ = true;
  return std::nullopt;
}

void scheduler::apply_deltas(const kv_reply& reply) {
  for (const kv_table_delta& delta : reply.deltas) {
    sequence* seq = find_sequence(delta.seq);
    if (seq == nullptr || seq->status == sequence_status::finished) continue;
    seq->block_table.resize(std::min(seq->block_table.size(), static_cast<std::size_t>(delta.keep)));
    seq->block_table.insert(seq->block_table.end(), delta.appended.begin(), delta.appended.end());
  }
}

void scheduler::handle_refusal(const kv_refused& refused) {
  sequence* seq = find_sequence(refused.seq);
  const auto grant_of = [this](const sequence* s) {
    return std::find_if(plan_->grants.begin(), plan_->grants.end(), [s](const grant& g) { return g.seq == s; });
  };
  switch (refused.op) {
    case kv_op::append: {
      const auto it = grant_of(seq);
      if (seq == nullptr || it == plan_->grants.end()) return;
      const grant original = *it;
      plan_->grants.erase(it);
      seq->granted_step = 0;
      if (seq->status == sequence_status::finished) return;
      if (refused.why == kv_refusal::no_device_blocks) return retry_append(*seq, original);
      // The manager disagrees about this sequence (a bug): drop it there and prefill it again.
      if (refused.why == kv_refusal::invalid) plan_->request.frees.push_back({seq->id, false});
      transition(*seq, &sequence::to_recompute);
      return;
    }
    case kv_op::swap_out:
      if (seq == nullptr || seq->status != sequence_status::swapped) return;
      // The host pool was fuller than known: drop the blocks instead.
      plan_->request.frees.push_back({seq->id, false});
      transition(*seq, &sequence::to_recompute);
      for (preempt_event& e : plan_->events.preempted) {
        if (e.request == seq->request->handle && e.choice == seq->choice) e.kind = preemption_kind::recompute;
      }
      --metrics_.preemptions["swap"];
      ++metrics_.preemptions["recompute"];
      return;
    case kv_op::swap_in:
    case kv_op::allocate: {
      const auto it = grant_of(seq);
      if (it != plan_->grants.end()) {  // it waits for a later step
        plan_->grants.erase(it);
        seq->granted_step = 0;
      }
      return;
    }
    case kv_op::settle:
      // The manager disagrees about this sequence's slots (a bug): drop it there and prefill it again.
      if (seq == nullptr || !seq->resident() || refused.why == kv_refusal::unknown_sequence) return;
      revoke(*seq);
      plan_->request.frees.push_back({seq->id, false});
      transition(*seq, &sequence::to_recompute);
      return;
    case kv_op::fork:
      // The parent is gone: prefill the new choice from scratch.
      if (seq != nullptr && seq->status == sequence_status::running) transition(*seq, &sequence::to_recompute);
      return;
    case kv_op::free:
      return;
  }
}

void scheduler::retry_append(sequence& seq, const grant& original) {
  if (original.draft_slots > 0) {  // drop the draft slots before preempting anyone
    plan_->grants.push_back({&seq, grant_kind::append, original.tokens, append_blocks(seq, original.tokens), 0});
    seq.granted_step = plan_->id;
    plan_->request.appends.push_back({seq.id, token_range(seq, seq.num_computed, original.tokens)});
    return;
  }
  const auto position =
      static_cast<std::size_t>(std::find(plan_->running.begin(), plan_->running.end(), &seq) - plan_->running.begin());
  // Only sequences the manager has not changed this step can be victims now.
  for (std::size_t j = plan_->running.size(); j > position + 1; --j) {
    sequence& victim = *plan_->running[j - 1];
    if (!victim.resident() || granted(victim)) continue;
    preempt(victim, /*for_space=*/true);
    plan_->grants.push_back(original);
    seq.granted_step = plan_->id;
    plan_->request.appends.push_back({seq.id, token_range(seq, seq.num_computed, original.tokens)});
    return;
  }
  preempt(seq, /*for_space=*/true);
}

scheduled_step scheduler::take_step() {
  if (!plan_ || !step_ready_) throw std::logic_error("scheduler::take_step before the KV reply completed the plan");
  scheduled_step step;
  step.id = plan_->id;
  step.copies = std::move(plan_->copies);
  step.events = std::move(plan_->events);
  in_flight_step record;
  for (const grant& g : plan_->grants) {
    sequence& seq = *g.seq;
    if (seq.status == sequence_status::finished) {
      // Cancelled while the KV reply was on its way: the manager holds it,
      // and blocks it indexed for this step will never be written.
      const auto free = std::find_if(pending_frees_.begin(), pending_frees_.end(),
                                     [&seq](const kv_free& f) { return f.seq == seq.id; });
      if (free == pending_frees_.end())
        pending_frees_.push_back({seq.id, /*forget_prefix=*/true});
      else
        free->forget_prefix = true;
      continue;
    }
    step.sequences.push_back(commit_grant(g, record));
    add_rows(step, step.sequences.back(), seq, record);
  }
  ++metrics_.steps;
  metrics_.step_sequences += step.sequences.size();
  if (const std::int32_t tokens = step.num_tokens(); tokens > 0) metrics_.iteration_tokens.observe(tokens);
  if (!step.sequences.empty()) in_flight_.emplace(step.id, std::move(record));
  plan_.reset();
  step_ready_ = false;
  update_gauges();
  release_done_requests();
  return step;
}

scheduled_sequence scheduler::commit_grant(const grant& g, in_flight_step& record) {
  sequence& seq = *g.seq;
  request_state& request = *seq.request;
  std::int32_t start = seq.num_computed;
  std::int32_t count = g.tokens;
  if (g.kind != grant_kind::append) seq.resident_since = plan_->id;
  if (g.kind == grant_kind::swap_in) {
    transition(seq, &sequence::to_swapped_in);
  } else if (g.kind == grant_kind::allocate) {
    const auto a = std::find_if(plan_->allocated.begin(), plan_->allocated.end(),
                                [&](const kv_allocated& x) { return x.seq == seq.id; });
    transition(seq, &sequence::to_allocated, a->cached_tokens / config_.block_size);
    start = a->cached_tokens;
    count = a->num_tokens - a->cached_tokens;
    if (!seq.started && seq.choice == 0) request.usage.cached_prompt_tokens = a->cached_tokens;
    leave_queue(request);
  }
  seq.num_computed = start + count;
  seq.may_share_last_block = false;
  seq.started = true;
  if (request.first_scheduled < 0) {
    request.first_scheduled = plan_->now;
    metrics_.request_queue_time_s.observe(plan_->now - request.arrival);
  }
  scheduled_sequence out{seq.id, request.handle, seq.choice, start, token_range(seq, start, count), seq.block_table, 0};
  out.draft_slots = g.draft_slots;
  // A constrained sequence's drafts are verified as a chain (its masks follow one path).
  out.tree_width = seq.matcher ? 1 : std::max(1, config_.speculative_tree_width);
  if (g.draft_slots > 0 && seq.planned_match.count > 0) out.lookup_from = seq.planned_match.from;
  seq.unsettled_slots = g.draft_slots;
  seq.num_drafts = 0;
  if (seq.num_computed == seq.total_tokens()) {
    const bool fork_step = seq.choice == 0 && !request.forked && request.spec.n > 1 && seq.outputs.empty();
    out.num_samples = fork_step ? request.spec.n : 1;
  }

  record.sequences.push_back(seq.id);
  return out;
}

void scheduler::add_rows(scheduled_step& step, const scheduled_sequence& scheduled, sequence& seq,
                         in_flight_step& record) {
  request_state& request = *seq.request;
  // Every row of a fork step starts the document: the parent's mask fits them all.
  const std::span<const std::uint32_t> mask =
      scheduled.num_samples > 0 ? next_row_mask(seq) : std::span<const std::uint32_t>{};
  for (std::int32_t c = 0; c < scheduled.num_samples; ++c) {
    logits_row_hook hook;
    hook.sequence_index = step.sequences.size() - 1;
    hook.seq = seq.id;
    hook.request = request.handle;
    hook.choice = scheduled.num_samples > 1 ? c : seq.choice;
    hook.seed = choice_seed(request.seed, hook.choice);
    hook.token_index = seq.outputs.size();
    hook.params = &request.spec.sampling;
    hook.prompt_tokens = request.spec.prompt;
    hook.output_tokens = seq.outputs;
    if (static_cast<std::int64_t>(hook.token_index) < request.spec.min_tokens)
      hook.suppressed_tokens = request.min_tokens_suppressed;
    hook.allowed_mask = mask;
    step.rows.push_back(hook);
    record.rows.push_back({&seq, &request, hook.choice});
  }
  if (scheduled.num_samples > 0) step.row_owners.push_back(requests_.at(request.handle));
  seq.pending_rows += scheduled.num_samples;
  request.rows_in_flight += scheduled.num_samples;
}

void scheduler::update_gauges() {
  metrics_.num_running = num_running();
  metrics_.num_waiting = num_waiting();
  metrics_.num_swapped = num_swapped();
}

scheduled_step scheduler::schedule(double now, kv_planner& kv) {
  kv_request request = begin_step(now);
  while (auto again = on_kv_reply(kv.plan(request))) request = std::move(*again);
  return take_step();
}

}  // namespace troupe

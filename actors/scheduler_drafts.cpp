// The scheduler actor's drafts: a taken step's draft slots filled by prompt
// lookup in place or by the drafter through the speculator, and the round
// drafted ahead while a step is verified (docs/design.md, "Drafting ahead").

#include <spdlog/spdlog.h>

#include <algorithm>

#include "actors/scheduler_actor_state.hpp"

namespace troupe::scheduler_flow {

namespace {

// A step abandoned while its drafts were out (a step before it failed) runs
// its block copies only, and none of it after the engine failed.
void drafts_done(self_ptr self, scheduled_step step) {
  self->state.drafting = false;
  if (self->state.loop->settle_drafted(step, self->state.now())) dispatch(self, std::move(step));
  try_step(self);
}

// The drafts a round drafted ahead holds, then a round for the rest. The
// turn-down learns the wait for drafts as it was since `since`: none where
// every sequence's guess held.
void ask_drafter(self_ptr self, scheduled_step step, double since) {
  auto& state = self->state;
  // Abandoned while it waited for the round drafted ahead: nothing to draft for.
  if (!state.loop->drafting_pays(step.id)) return drafts_done(self, std::move(step));
  std::vector<draft_ahead_book::ahead_drafts> hits = state.ahead.take(step);
  state.loop->on_drafts_ahead(0, static_cast<std::int32_t>(hits.size()));
  std::int32_t deepest = 0;
  for (draft_ahead_book::ahead_drafts& hit : hits) {
    deepest = std::max(deepest, static_cast<std::int32_t>(hit.drafts.size()));
    const std::string problem =
        state.loop->set_drafts(step, hit.sequence_index, std::move(hit.drafts), std::move(hit.probs));
    if (!problem.empty()) spdlog::warn("scheduler: drafts drafted ahead refused: {}", problem);
  }
  draft_request jobs = draft_jobs(step);
  for (const auto& [id, blocks] : state.busy_blocks)
    jobs.busy_blocks.insert(jobs.busy_blocks.end(), blocks.begin(), blocks.end());
  auto request = std::make_shared<const draft_request>(std::move(jobs));
  if (request->jobs.empty()) {
    if (!hits.empty()) state.loop->on_draft_round(static_cast<std::int32_t>(hits.size()), deepest, 0.0);
    return drafts_done(self, std::move(step));
  }
  auto pending = std::make_shared<scheduled_step>(std::move(step));
  // A drafter working in the target's KV may still write the sequences'
  // draft positions after a given-up round, so it gets as long as a target
  // step does, and failing to answer fails the engine as a hung executor would.
  const bool shared = state.loop->core().config().drafter_shares_target_kv;
  const auto round =
      self->request(state.setup.speculator, shared ? state.setup.step_timeout : state.setup.draft_timeout,
                    atom::propose_v, std::move(request));
  round.then(
      [self, pending, since, reply_id = round.id()](const draft_reply_ptr& reply) {
        release_reply_timeout(self, reply_id);
        self->state.loop->on_draft_round(reply->num_drafted(), reply->steps, self->state.now() - since);
        // A step abandoned meanwhile (or after the engine failed) has no sequences to draft for.
        if (!self->state.loop->drafting_pays(pending->id)) return drafts_done(self, std::move(*pending));
        for (const drafted& out : reply->sequences) {
          const std::string problem =
              self->state.loop->set_drafts(*pending, out.sequence_index, out.drafts, out.probs, out.parents);
          if (!problem.empty()) spdlog::warn("scheduler: drafts refused: {}", problem);
        }
        drafts_done(self, std::move(*pending));
      },
      [self, pending, shared, reply_id = round.id()](const caf::error& error) {
        release_reply_timeout(self, reply_id);
        if (shared && error == caf::sec::request_timeout) {
          self->state.drafting = false;
          fail_engine(self,
                      self->state.loop->on_step_failed(
                          pending->id, "the drafter, working in the target's KV, did not answer", self->state.now()));
          return;
        }
        spdlog::warn("scheduler: no drafts for step {}: {}", pending->id, caf::to_string(error));
        drafts_done(self, std::move(*pending));
      });
}

}  // namespace

// Prompt lookup fills the draft slots in place; a draft model is asked
// through the speculator, and the step waits for its answer (or its failure:
// then it runs without drafts).
void fill_drafts(self_ptr self, scheduled_step step) {
  auto& state = self->state;
  const bool has_slots = std::any_of(step.sequences.begin(), step.sequences.end(),
                                     [](const scheduled_sequence& seq) { return seq.draft_slots > 0; });
  if (!has_slots || state.setup.speculation == speculative_method::off) return drafts_done(self, std::move(step));
  if (state.setup.speculation == speculative_method::ngram) {
    for (auto& [index, tree] : lookup_drafts(step, state.loop->core().config().prompt_lookup))
      state.loop->set_drafts(step, index, std::move(tree.drafts), {}, std::move(tree.parents));
    return drafts_done(self, std::move(step));
  }
  state.drafting = true;
  state.drafting_step = step.id;
  if (state.ahead_in_flight) {
    state.awaiting_ahead = std::make_shared<scheduled_step>(std::move(step));
    state.awaiting_since = state.now();
    return;
  }
  ask_drafter(self, std::move(step), state.now());
}

// The next round for the sequences of a step just dispatched, drafted while
// the target verifies it. A step whose drafts are wanted meanwhile waits for
// this answer (fill_drafts), which may hold them.
void draft_ahead(self_ptr self, const scheduled_step& step) {
  auto& state = self->state;
  // Only a drafter runs rounds: prompt lookup (or no proposer) has no speculator, whatever the live knob says.
  const bool drafter =
      state.setup.speculation == speculative_method::draft || state.setup.speculation == speculative_method::layerskip;
  const scheduler_config& config = state.loop->core().config();
  if (!drafter || state.ahead_in_flight ||
      !drafts_ahead(config.speculative_draft_ahead, state.setup.drafter_own_compute, config.drafter_shares_target_kv))
    return;
  auto asked = std::make_shared<const draft_request>(ahead_draft_jobs(step, state.setup.block_size));
  if (asked->jobs.empty()) return;
  state.ahead_in_flight = true;
  const auto resume = [self] {
    self->state.ahead_in_flight = false;
    if (auto step = std::move(self->state.awaiting_ahead))
      ask_drafter(self, std::move(*step), self->state.awaiting_since);
  };
  const auto round = self->request(state.setup.speculator, state.setup.draft_timeout, atom::propose_v, asked);
  round.then(
      [self, asked, resume, reply_id = round.id()](const draft_reply_ptr& reply) {
        release_reply_timeout(self, reply_id);
        self->state.loop->on_drafts_ahead(static_cast<std::int32_t>(asked->jobs.size()), 0);
        self->state.ahead.record(*asked, *reply);
        resume();
      },
      [self, resume, reply_id = round.id()](const caf::error& error) {
        release_reply_timeout(self, reply_id);
        spdlog::warn("scheduler: no drafts drafted ahead: {}", caf::to_string(error));
        resume();
      });
}

}  // namespace troupe::scheduler_flow

#include "actors/executor_actor.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <new>
#include <stdexcept>
#include <vector>

#include "actors/core/step_builder.hpp"

namespace troupe {

namespace {

struct executor_state {
  std::shared_ptr<executor_resources> resources;
  std::unique_ptr<draft_proposer> proposer;  ///< on a drafter's executor only
  std::int64_t steps = 0;
  bool failed = false;
  /// Steps the "hang" fault never answers; kept so that their requesters
  /// see a step that never returns, not a broken promise.
  std::vector<caf::typed_response_promise<step_result_ptr>> unanswered;
  static inline const char* name = "executor";
};

// The test hook's steps are due to fail once the executor ran this many.
bool fault_due(const executor_state& state) {
  const executor_resources& r = *state.resources;
  return r.fail_after_steps >= 0 && state.steps >= r.fail_after_steps;
}

// The test hook's malformed result: one sample too many, which the
// scheduler must refuse.
step_result_ptr malformed_result(const scheduled_step& step) {
  auto result = std::make_shared<step_result>();
  result->step = step.id;
  result->samples.resize(step.rows.size() + 1);
  return result;
}

// The step's block copies (swaps, copy-on-write) move other sequences'
// K/V: when they fail, no block can be trusted any more.
void run_copies(executor_resources& r, const scheduled_step& step) {
  if (step.copies.empty()) return;
  try {
    r.device->copy_blocks(*r.cache, r.host.get(), step.copies);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("block copies failed: ") + e.what());
  }
}

// Runs one step: its block copies, then the forward pass and sampling;
// throws when the backend fails or a failure was injected.
step_result_ptr execute(executor_state& state, const scheduled_step& step) {
  executor_resources& r = *state.resources;
  const bool due = fault_due(state);
  if (due && r.fault == "error") state.failed = true;
  if (state.failed) throw std::runtime_error("injected failure");
  if (due && r.fault == "malformed") return malformed_result(step);
  const auto started = std::chrono::steady_clock::now();
  run_copies(r, step);
  if (due && r.fault == "throw" && state.steps == r.fail_after_steps) {
    ++state.steps;  // once: the steps after it run
    throw std::bad_alloc();
  }
  auto result = std::make_shared<step_result>();
  result->step = step.id;
  if (!step.sequences.empty()) {
    step_batch batch = build_step_batch(step, r.cache->spec().block_size);
    batch.block_copies.clear();  // ran above
    if (step.logits_only) {
      result->logits = r.model->logits(batch, *r.cache, r.host.get());
    } else {
      result->tokens = static_cast<std::int32_t>(batch.num_tokens());
      fill_sampling_rows(batch, step);
      sample_result sampled = r.model->step(batch, *r.cache, r.host.get());
      result->samples = std::move(sampled.rows);
      result->accepted = std::move(sampled.accepted);
    }
  }
  if (r.finish_before_answering) r.device->synchronize();
  result->execute_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ++state.steps;
  return result;
}

caf::result<step_result_ptr> run(executor_state& state, const scheduled_step& step) {
  try {
    return execute(state, step);
  } catch (const std::exception& e) {
    if (step_failure_is_recoverable(e, *state.resources->device)) {
      try {
        auto result = std::make_shared<step_result>();
        result->step = step.id;
        result->failure = e.what();
        spdlog::warn("executor: step {} failed, its requests fail: {}", step.id, e.what());
        return step_result_ptr{std::move(result)};
      } catch (const std::bad_alloc&) {
        // Not even the answer fits in memory: the engine cannot go on.
      }
    }
    spdlog::error("executor: step {} failed: {}", step.id, e.what());
    state.failed = true;
    return caf::make_error(caf::sec::runtime_error, std::string("executor failed: ") + e.what());
  }
}

// The draft steps of a round run back to back here: one message per round
// instead of one per draft token (docs/design.md).
caf::result<draft_reply_ptr> run_round(executor_state& state, const draft_request& request) {
  if (!state.proposer) return caf::make_error(caf::sec::unexpected_message, "executor: not a drafter's executor");
  // A malformed job or a recoverable step failure (as for the target's
  // steps) fails its round only; a failing backend fails the executor, and
  // with it drafting (the target's steps then run without drafts).
  const auto step_logits = [&state](const scheduled_step& step) {
    try {
      return std::move(execute(state, step)->logits);
    } catch (const std::exception& e) {
      // In the target's pool nothing the failed step queued may still run
      // when the target's step goes out (best effort: a device that fails
      // to finish is failing anyway).
      if (state.resources->shares_target_kv) {
        try {
          state.resources->device->synchronize();
        } catch (const std::exception&) {
          state.failed = true;
        }
      }
      if (step_failure_is_recoverable(e, *state.resources->device)) {
        spdlog::warn("executor: draft step {} failed, its round has no drafts: {}", step.id, e.what());
      } else {
        spdlog::error("executor: draft step {} failed: {}", step.id, e.what());
        state.failed = true;
      }
      throw;
    }
  };
  try {
    return draft_reply_ptr{std::make_shared<const draft_reply>(state.proposer->run_round(request, step_logits))};
  } catch (const std::exception& e) {
    // The failed step may have written part of the draft KV it was given:
    // the next rounds trust none of it.
    state.proposer->forget_written();
    return caf::make_error(caf::sec::runtime_error, std::string("draft round failed: ") + e.what());
  }
}

executor_actor::behavior_type executor_behavior(executor_actor::stateful_pointer<executor_state> self,
                                                std::shared_ptr<executor_resources> resources,
                                                std::int32_t draft_block_size) {
  if (draft_block_size > 0) {
    self->state.proposer = std::make_unique<draft_proposer>(draft_block_size, resources->model->vocab_size());
    self->state.proposer->set_logits_width(resources->model->logits_width());
    if (resources->shares_target_kv) self->state.proposer->share_target_kv();
  }
  self->state.resources = std::move(resources);
  return {
      [self](atom::run_step, const step_work_ptr& step) -> caf::result<step_result_ptr> {
        // A hung device, as the scheduler sees it: the step never answers
        // (the actor stays responsive, so the engine can still shut down).
        if (fault_due(self->state) && self->state.resources->fault == "hang") {
          auto promise = self->make_response_promise<step_result_ptr>();
          self->state.unanswered.push_back(promise);
          return promise;
        }
        return run(self->state, *step);
      },
      [self](atom::propose, const draft_request_ptr& request) -> caf::result<draft_reply_ptr> {
        return run_round(self->state, *request);
      },
      [self](atom::fail) { self->state.failed = true; },
  };
}

}  // namespace

bool step_failure_is_recoverable(const std::exception& error, const backend& device) {
  if (device.name() != "cpu") return false;
  return dynamic_cast<const std::bad_alloc*>(&error) != nullptr ||
         dynamic_cast<const std::logic_error*>(&error) != nullptr;
}

double time_one_token_step(executor_resources& r, bool logits_only) {
  static const sampling_params greedy = [] {
    sampling_params params;
    params.temperature = 0;
    return params;
  }();
  if (r.cache->spec().num_blocks < 1) return 0;
  step_batch batch = one_token_step(0);
  batch.sampling = {sampling_row{&greedy}};
  double fastest = std::numeric_limits<double>::infinity();
  for (int run = 0; run < 3; ++run) {
    const auto started = std::chrono::steady_clock::now();
    if (logits_only) {
      r.model->logits(batch, *r.cache, r.host.get());
    } else {
      r.model->step(batch, *r.cache, r.host.get());
    }
    fastest = std::min(fastest, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  return fastest;
}

executor_actor spawn_executor(caf::actor_system& system, std::shared_ptr<executor_resources> resources) {
  return system.spawn<caf::detached>(executor_behavior, std::move(resources), std::int32_t{0});
}

executor_actor spawn_draft_executor(caf::actor_system& system, std::shared_ptr<executor_resources> resources,
                                    std::int32_t block_size) {
  return system.spawn<caf::detached>(executor_behavior, std::move(resources), block_size);
}

}  // namespace troupe

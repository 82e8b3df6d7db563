#include "actors/executor_actor.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "actors/core/step_builder.hpp"

namespace troupe {

namespace {

struct executor_state {
  std::shared_ptr<executor_resources> resources;
  std::int64_t steps = 0;
  bool failed = false;
  static inline const char* name = "executor";
};

// The test hook's faults other than a plain error: checked only once the
// step count reached fail_after_steps, so a normal run pays one comparison.
step_result_ptr injected_fault(const executor_resources& r, const scheduled_step& step) {
  if (r.fault == "throw") throw std::runtime_error("injected exception");
  auto result = std::make_shared<step_result>();
  result->step = step.id;
  result->samples.resize(step.rows.size() + 1);  // one sample too many: the scheduler must refuse it
  return result;
}

caf::result<step_result_ptr> run(executor_state& state, const scheduled_step& step) {
  executor_resources& r = *state.resources;
  const bool fault_due = r.fail_after_steps >= 0 && state.steps >= r.fail_after_steps;
  if (fault_due && r.fault == "error") state.failed = true;
  if (state.failed) return caf::make_error(caf::sec::runtime_error, "executor failed (injected failure)");
  try {
    if (fault_due) return injected_fault(r, step);
    const auto started = std::chrono::steady_clock::now();
    auto result = std::make_shared<step_result>();
    result->step = step.id;
    if (step.sequences.empty()) {
      if (!step.copies.empty()) r.device->copy_blocks(*r.cache, r.host.get(), step.copies);
    } else if (step.logits_only) {
      result->logits = r.model->logits(build_step_batch(step, r.cache->spec().block_size), *r.cache, r.host.get());
    } else {
      step_batch batch = build_step_batch(step, r.cache->spec().block_size);
      fill_sampling_rows(batch, step);
      sample_result sampled = r.model->step(batch, *r.cache, r.host.get());
      result->samples = std::move(sampled.rows);
      result->accepted = std::move(sampled.accepted);
    }
    result->execute_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    ++state.steps;
    return step_result_ptr{std::move(result)};
  } catch (const std::exception& e) {
    spdlog::error("executor: step {} failed: {}", step.id, e.what());
    state.failed = true;
    return caf::make_error(caf::sec::runtime_error, std::string("executor failed: ") + e.what());
  }
}

executor_actor::behavior_type executor_behavior(executor_actor::stateful_pointer<executor_state> self,
                                                std::shared_ptr<executor_resources> resources) {
  self->state.resources = std::move(resources);
  return {
      [self](atom::run_step, const step_work_ptr& step) -> caf::result<step_result_ptr> {
        return run(self->state, *step);
      },
      [self](atom::fail) { self->state.failed = true; },
  };
}

}  // namespace

double time_one_token_step(executor_resources& r) {
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
    r.model->step(batch, *r.cache, r.host.get());
    fastest = std::min(fastest, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  return fastest;
}

executor_actor spawn_executor(caf::actor_system& system, std::shared_ptr<executor_resources> resources) {
  return system.spawn<caf::detached>(executor_behavior, std::move(resources));
}

}  // namespace troupe

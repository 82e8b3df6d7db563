#pragma once
// Wiring: loads a model for the engine and spawns the whole troupe (KV
// manager, executor, tokenizer workers, output shards, scheduler, intake)
// into an actor system.

#include <chrono>
#include <memory>
#include <vector>

#include "actors/core/prepare_queue.hpp"
#include "actors/core/prompt_preparer.hpp"
#include "actors/executor_actor.hpp"
#include "actors/messages.hpp"
#include "model/checkpoint.hpp"
#include "troupe/engine.hpp"

namespace troupe {

/// Everything loaded from disk before any actor starts.
struct loaded_engine_model {
  std::shared_ptr<const checkpoint> weights;
  std::shared_ptr<const prompt_preparer> preparer;
  std::shared_ptr<constraints::constraint_compiler> constraints;  ///< structured output, shared by the tokenizers
  std::shared_ptr<executor_resources> executor;                   ///< backend, model, KV pools
  std::shared_ptr<executor_resources> drafter;  ///< the draft model's stream (speculative draft/layerskip), or null
  model_info info;
  std::int64_t num_device_blocks = 0;
  std::int64_t num_host_blocks = 0;
  int max_model_len = 0;
  std::vector<std::int32_t> eos_token_ids;
  double one_token_step_s = 0;        ///< executor time of a one-token step, measured at load
  double draft_one_token_step_s = 0;  ///< the drafter's (0: no drafter)
  workspace_bound workspace;          ///< the step workspace's cost and limit (knob max_step_workspace_bytes)
};

/// Loads `config.model_dir` (or the demo model), picks the device, uploads
/// the weights and sizes the KV pools. Throws std::runtime_error naming the
/// file, field or knob at fault.
loaded_engine_model load_engine_model(const engine_config& config);

/// Handles to a running troupe.
struct troupe_handles {
  intake_actor intake;
  scheduler_actor scheduler;
  kv_manager_actor kv;
  executor_actor executor;
  executor_actor draft_executor;                ///< invalid unless a draft model speculates
  speculator_actor speculator;                  ///< invalid unless a draft model speculates
  std::vector<tokenizer_actor> tokenizers;      ///< prompt preparation, as spawned (the intake restarts them)
  std::vector<detokenizer_actor> detokenizers;  ///< output shards, as spawned (the intake restarts them)
  std::shared_ptr<queue_gauges> gauges;         ///< queue lengths the scheduler and the intake publish
  std::chrono::steady_clock::time_point clock_start;

  /// Seconds since the troupe started (the clock requests arrive on).
  double now() const;
};

/// Spawns the troupe for `model` into `system` (whose config must have
/// Troupe's message types added).
troupe_handles spawn_troupe(caf::actor_system& system, const engine_config& config, loaded_engine_model& model);

/// Registers Troupe's message types with an actor system's configuration.
void add_troupe_message_types(caf::actor_system_config& config);

}  // namespace troupe

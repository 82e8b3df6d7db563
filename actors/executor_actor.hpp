#pragma once
// The executor actor: one execution stream. It owns the backend, the model's
// uploaded weights, the device KV pool (a layer-skip drafter may share the
// target's) and the host swap pool, and runs each step: block copies,
// forward pass, sampling.

#include <exception>
#include <memory>

#include "actors/messages.hpp"
#include "kernels/backend.hpp"
#include "model/checkpoint.hpp"
#include "model/llama_model.hpp"

namespace troupe {

/// What an executor runs on; moved into the actor at spawn.
struct executor_resources {
  /// A layer-skip drafter's weights (and a shared KV pool) live in the
  /// target's backend: declared first so that it is destroyed last, after
  /// the model and the cache that use its memory.
  std::shared_ptr<backend> weights_device;
  std::shared_ptr<const checkpoint> weights_source;  ///< keeps mapped weights alive
  std::shared_ptr<backend> device;
  std::unique_ptr<llama_model> model;
  /// The KV pool; a layer-skip drafter of the target's first layers holds
  /// the target's own (shares_target_kv).
  std::shared_ptr<kv_cache> cache;
  bool shares_target_kv = false;
  /// A drafter works in this pool: every step waits for the device before
  /// it is answered, so that no queued copy or write of a step still runs
  /// when its blocks are handed to a draft round (the CUDA backend queues
  /// them, and only a step with logits rows waits for its results).
  bool finish_before_answering = false;
  std::unique_ptr<host_block_pool> host;
  int fail_after_steps = -1;    ///< test hook: the steps after this many fail (-1: never)
  std::string fault = "error";  ///< test hook: how (engine_config::test_executor_fault)
};

/// Whether a step that threw `error` on `device` leaves the backend usable,
/// so that only the step's requests fail: on the CPU backend a failed
/// allocation (std::bad_alloc) or a rejected input (std::logic_error:
/// invalid_argument, out_of_range, length_error) leaves the weights and the
/// KV pools intact (the step writes only its own activations and its own
/// sequences' KV slots; its block copies ran before). Anything else, and
/// every failure on CUDA (an error there may be sticky, and kernels of the
/// step may still run), loses the backend's state: the engine fails.
bool step_failure_is_recoverable(const std::exception& error, const backend& device);

/// Runs a one-token greedy step (writing slot 0 of the free KV pool) a few
/// times and returns the fastest, seconds: the cost every step pays however
/// small, which decides whether overlapping steps split their decodes.
/// Also warms the backend up before the first request. `logits_only`
/// times it as a drafter's rounds run their steps: logits out, nothing sampled.
double time_one_token_step(executor_resources& resources, bool logits_only = false);

/// Spawns a detached executor over `resources`.
executor_actor spawn_executor(caf::actor_system& system, std::shared_ptr<executor_resources> resources);

/// Spawns a drafter's executor: also runs whole draft rounds (atom::propose)
/// with a draft_proposer over KV blocks of `block_size` tokens.
executor_actor spawn_draft_executor(caf::actor_system& system, std::shared_ptr<executor_resources> resources,
                                    std::int32_t block_size);

}  // namespace troupe

#include "actors/kv_manager_actor.hpp"

namespace troupe {

namespace {

struct kv_manager_state {
  std::unique_ptr<block_manager> blocks;
  static inline const char* name = "kv_manager";
};

kv_manager_actor::behavior_type kv_manager_behavior(kv_manager_actor::stateful_pointer<kv_manager_state> self,
                                                    block_manager_config config) {
  self->state.blocks = std::make_unique<block_manager>(config);
  return {
      [self](const kv_request_ptr& request) -> kv_reply_ptr {
        return std::make_shared<const kv_reply>(self->state.blocks->plan(*request));
      },
  };
}

}  // namespace

kv_manager_actor spawn_kv_manager(caf::actor_system& system, const block_manager_config& config) {
  return system.spawn(kv_manager_behavior, config);
}

}  // namespace troupe

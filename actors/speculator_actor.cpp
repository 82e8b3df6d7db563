// The speculator actor: one message to the draft executor per round.

#include "actors/speculator_actor.hpp"

#include <spdlog/spdlog.h>

#include "actors/reply_timeout.hpp"

namespace troupe {

namespace {

struct speculator_state {
  speculator_setup setup;
  static inline const char* name = "speculator";
};

using self_ptr = speculator_actor::stateful_pointer<speculator_state>;

speculator_actor::behavior_type speculator_behavior(self_ptr self, speculator_setup setup) {
  self->state.setup = std::move(setup);
  return {
      [self](atom::propose, const draft_request_ptr& request) -> caf::result<draft_reply_ptr> {
        if (request->jobs.empty()) return std::make_shared<const draft_reply>();
        auto promise = self->make_response_promise<draft_reply_ptr>();
        const speculator_setup& setup = self->state.setup;
        const auto round = self->request(setup.draft_executor, setup.round_timeout, atom::propose_v, request);
        round.then(
            [self, promise, reply_id = round.id()](const draft_reply_ptr& reply) mutable {
              release_reply_timeout(self, reply_id);
              promise.deliver(reply);
            },
            [self, promise, reply_id = round.id()](const caf::error& error) mutable {
              release_reply_timeout(self, reply_id);
              spdlog::warn("speculator: a draft round failed: {}", caf::to_string(error));
              promise.deliver(error);
            });
        return promise;
      },
  };
}

}  // namespace

speculator_actor spawn_speculator(caf::actor_system& system, speculator_setup setup) {
  return system.spawn(speculator_behavior, std::move(setup));
}

}  // namespace troupe

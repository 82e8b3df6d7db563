// The speculator actor: propose → draft steps on the draft executor → drafts.

#include "actors/speculator_actor.hpp"

#include <spdlog/spdlog.h>

#include <deque>

namespace troupe {

namespace {

struct pending_round {
  draft_request_ptr request;
  caf::typed_response_promise<draft_reply_ptr> promise;
};

struct speculator_state {
  speculator_setup setup;
  std::unique_ptr<draft_proposer> proposer;
  std::deque<pending_round> queue;  ///< the front is running
  static inline const char* name = "speculator";
};

using self_ptr = speculator_actor::stateful_pointer<speculator_state>;

void start_next(self_ptr self);

void finish_round(self_ptr self, caf::expected<draft_reply_ptr> outcome) {
  auto& state = self->state;
  if (outcome) {
    state.queue.front().promise.deliver(std::move(*outcome));
  } else {
    state.queue.front().promise.deliver(outcome.error());
  }
  state.queue.pop_front();
  start_next(self);
}

void run_draft_step(self_ptr self, scheduled_step step) {
  auto& state = self->state;
  auto work = std::make_shared<const scheduled_step>(std::move(step));
  self->request(state.setup.draft_executor, state.setup.step_timeout, atom::run_step_v, work)
      .then(
          [self](const step_result_ptr& result) {
            std::optional<scheduled_step> next;
            try {
              next = self->state.proposer->on_logits(result->logits);
            } catch (const std::exception& e) {
              finish_round(self, caf::make_error(caf::sec::runtime_error, std::string("speculator: ") + e.what()));
              return;
            }
            if (next) {
              run_draft_step(self, std::move(*next));
            } else {
              finish_round(self, std::make_shared<const draft_reply>(self->state.proposer->take_reply()));
            }
          },
          [self](const caf::error& error) {
            spdlog::warn("speculator: a draft step failed: {}", caf::to_string(error));
            finish_round(self, error);
          });
}

void start_next(self_ptr self) {
  auto& state = self->state;
  if (state.queue.empty()) return;
  scheduled_step first;
  try {
    first = state.proposer->begin(*state.queue.front().request);
  } catch (const std::exception& e) {
    finish_round(self, caf::make_error(caf::sec::runtime_error, std::string("speculator: ") + e.what()));
    return;
  }
  run_draft_step(self, std::move(first));
}

speculator_actor::behavior_type speculator_behavior(self_ptr self, speculator_setup setup) {
  self->state.proposer = std::make_unique<draft_proposer>(setup.block_size, setup.vocab_size);
  self->state.setup = std::move(setup);
  return {
      [self](atom::propose, const draft_request_ptr& request) -> caf::result<draft_reply_ptr> {
        auto& state = self->state;
        if (request->jobs.empty()) return std::make_shared<const draft_reply>();
        auto promise = self->make_response_promise<draft_reply_ptr>();
        state.queue.push_back({request, promise});
        if (state.queue.size() == 1) start_next(self);
        return promise;
      },
  };
}

}  // namespace

speculator_actor spawn_speculator(caf::actor_system& system, speculator_setup setup) {
  return system.spawn(speculator_behavior, std::move(setup));
}

}  // namespace troupe

#include "actors/intake_actor.hpp"

#include <spdlog/spdlog.h>

#include <optional>

namespace troupe {

namespace {

struct intake_state {
  intake_setup setup;
  std::size_t next_tokenizer = 0;
  static inline const char* name = "intake";
};

admitted_request_ptr admit(const intake_setup& setup, const submission& job, const prepared_prompt& prompt) {
  const generation_request& request = job.request;
  auto admitted = std::make_shared<admitted_request>();
  admitted->spec = make_request_spec(request, prompt.ids);
  admitted->spec.constraint = prompt.constraint;
  admitted->spec.constraint_vocab = prompt.constraint_vocab;
  if (!admitted->spec.timeout_s) admitted->spec.timeout_s = setup.default_timeout_s;
  admitted->output.n = request.n;
  admitted->output.skip_special_tokens = request.skip_special_tokens;
  admitted->output.stop = request.stop;
  admitted->output.logprobs = request.sampling.logprobs || request.sampling.top_logprobs > 0;
  admitted->sink = job.sink;
  admitted->accepted.request_id = request.request_id;
  admitted->accepted.prompt_tokens = static_cast<int>(prompt.ids.size());
  admitted->accepted.prompt_text = prompt.text;
  admitted->arrival_s = job.arrival_s;
  return admitted;
}

void on_generate(intake_actor::stateful_pointer<intake_state> self, const submission_ptr& job) {
  auto& state = self->state;
  if (auto problem = check_request(job->request, state.setup.limits)) {
    job->sink.error({job->request.request_id, problem->kind, problem->message, problem->param});
    return;
  }
  const tokenizer_actor worker = state.setup.tokenizers[state.next_tokenizer++ % state.setup.tokenizers.size()];
  self->request(worker, state.setup.encode_timeout, atom::encode_v, job)
      .then(
          [self, job](const prepared_prompt_ptr& prompt) {
            const auto& setup = self->state.setup;
            if (prompt->error) {
              job->sink.error(*prompt->error);
              return;
            }
            if (auto problem = check_prompt_length(prompt->ids.size(), job->request, setup.limits)) {
              job->sink.error({job->request.request_id, problem->kind, problem->message, problem->param});
              return;
            }
            self->send(setup.scheduler, atom::submit_v, admit(setup, *job, *prompt));
          },
          [job](const caf::error& error) {
            job->sink.error({job->request.request_id, error_kind::internal,
                             "preparing the prompt failed: " + caf::to_string(error), ""});
          });
}

// Which pool slot the worker at `address` fills, if any.
std::optional<std::size_t> worker_slot(const intake_setup& setup, const caf::actor_addr& address) {
  for (std::size_t i = 0; i < setup.tokenizers.size(); ++i) {
    if (setup.tokenizers[i].address() == address) return i;
  }
  return std::nullopt;
}

void supervise(intake_actor::stateful_pointer<intake_state> self, const tokenizer_actor& worker) {
  self->monitor(worker);
  self->link_to(worker);
}

// A worker died: a fresh one takes its slot (round robin and output shard
// alike). A shutdown stops the pool for good.
void on_worker_down(intake_actor::stateful_pointer<intake_state> self, const caf::down_msg& down) {
  auto& setup = self->state.setup;
  const std::optional<std::size_t> slot = worker_slot(setup, down.source);
  if (!slot || down.reason == caf::exit_reason::user_shutdown) return;
  spdlog::error("tokenizer worker {} died ({}): restarting it", *slot, caf::to_string(down.reason));
  tokenizer_actor replacement = spawn_tokenizer(self->system(), setup.worker);
  supervise(self, replacement);
  setup.tokenizers[*slot] = replacement;
  self->send(setup.scheduler, atom::shard_v, static_cast<std::int32_t>(*slot),
             caf::actor_cast<caf::actor>(replacement));
}

intake_actor::behavior_type intake_behavior(intake_actor::stateful_pointer<intake_state> self, intake_setup setup) {
  self->state.setup = std::move(setup);
  for (const tokenizer_actor& worker : self->state.setup.tokenizers) supervise(self, worker);
  self->set_down_handler([self](caf::down_msg& down) { on_worker_down(self, down); });
  // A failed worker's exit arrives here through its link and as a down
  // message (which restarts it); only a shutdown ends the intake and,
  // through the links, the workers.
  self->set_exit_handler([self](caf::exit_msg& exit) {
    if (exit.reason == caf::exit_reason::user_shutdown || exit.reason == caf::exit_reason::kill)
      self->quit(exit.reason);
  });
  return {
      [self](atom::generate, const submission_ptr& job) { on_generate(self, job); },
      [self](atom::configure, const config_change_ptr& change) -> std::string {
        return apply_limit_change(*change, self->state.setup.limits);
      },
  };
}

}  // namespace

intake_actor spawn_intake(caf::actor_system& system, intake_setup setup) {
  return system.spawn(intake_behavior, std::move(setup));
}

}  // namespace troupe

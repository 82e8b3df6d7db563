#include "actors/intake_actor.hpp"

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

intake_actor::behavior_type intake_behavior(intake_actor::stateful_pointer<intake_state> self, intake_setup setup) {
  self->state.setup = std::move(setup);
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

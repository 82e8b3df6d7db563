#include "actors/tokenizer_actor.hpp"

#include <spdlog/spdlog.h>
#include <stdexcept>

#include "actors/core/request_constraint.hpp"

namespace troupe {

namespace {

struct tokenizer_state {
  tokenizer_setup setup;
  static inline const char* name = "tokenizer";
};

/// The test hook's failure, thrown where a tokenizer bug would throw.
struct injected_tokenizer_fault : std::runtime_error {
  injected_tokenizer_fault() : std::runtime_error("injected tokenizer fault") {}
};

bool fault_hit(const tokenizer_setup& setup, const generation_request& request) {
  const std::string& marker = setup.fault_marker;
  if (marker.empty()) return false;
  return request.prompt_text.find(marker) != std::string::npos ||
         request.chat_messages_json.find(marker) != std::string::npos;
}

prepared_prompt_ptr fail_prepare(const submission& job, const std::string& what) {
  auto out = std::make_shared<prepared_prompt>();
  out->error = error_event{job.request.request_id, error_kind::internal, "preparing the prompt failed: " + what, ""};
  return out;
}

prepared_prompt_ptr prepare(const tokenizer_state& state, const submission& job) {
  auto out = std::make_shared<prepared_prompt>();
  if (fault_hit(state.setup, job.request)) throw injected_tokenizer_fault();
  prepared_prompt_result result = state.setup.preparer->prepare(job.request);
  if (result.error) {
    out->error = error_event{job.request.request_id, error_kind::invalid_request, *result.error, result.param};
    return out;
  }
  compiled_request_constraint constraint = compile_request_constraint(state.setup.constraints.get(), job.request);
  if (constraint.error) {
    out->error = std::move(constraint.error);
    return out;
  }
  out->constraint = std::move(constraint.constraint);
  out->constraint_vocab = constraint.vocab;
  out->ids = std::move(result.ids);
  out->text = std::move(result.text);
  return out;
}

// An exception while preparing one prompt (a tokenizer or template bug on
// hostile input) fails that request, not the worker and the jobs after it.
prepared_prompt_ptr prepare_guarded(const tokenizer_state& state, const submission& job) {
  // The test hook's "exit": the failure escapes the handler and the worker dies.
  if (state.setup.fault_exits && fault_hit(state.setup, job.request)) throw injected_tokenizer_fault();
  try {
    return prepare(state, job);
  } catch (const std::exception& e) {
    spdlog::error("tokenizer: preparing request {} failed: {}", job.request.request_id, e.what());
    return fail_prepare(job, e.what());
  }
}

// A failed /tokenize call answers with an internal error, as a failed prompt does.
text_task_result_ptr run_text_guarded(const tokenizer_state& state, const text_task& task) {
  try {
    return std::make_shared<const text_task_result>(state.setup.preparer->run(task));
  } catch (const std::exception& e) {
    spdlog::error("tokenizer: a /tokenize or /detokenize call failed: {}", e.what());
    text_task_result out;
    out.error = error_event{{}, error_kind::internal, std::string("tokenizing failed: ") + e.what(), {}, {}};
    return std::make_shared<const text_task_result>(std::move(out));
  }
}

tokenizer_actor::behavior_type tokenizer_behavior(tokenizer_actor::stateful_pointer<tokenizer_state> self,
                                                  tokenizer_setup setup) {
  self->state.setup = std::move(setup);
  return {
      [self](atom::encode, const submission_ptr& job) { return prepare_guarded(self->state, *job); },
      [self](atom::tokenize, const text_task_ptr& task) { return run_text_guarded(self->state, *task); },
  };
}

}  // namespace

tokenizer_actor spawn_tokenizer(caf::actor_system& system, tokenizer_setup setup) {
  return system.spawn<caf::detached>(tokenizer_behavior, std::move(setup));
}

}  // namespace troupe

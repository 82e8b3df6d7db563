#include "actors/tokenizer_actor.hpp"

#include <spdlog/spdlog.h>
#include <map>

#include "actors/core/request_constraint.hpp"

namespace troupe {

namespace {

struct open_stream {
  output_stream stream;
  event_sink sink;
};

struct tokenizer_state {
  std::shared_ptr<const prompt_preparer> preparer;
  std::shared_ptr<constraints::constraint_compiler> constraints;
  std::map<request_handle, open_stream> streams;
  static inline const char* name = "tokenizer";
};

prepared_prompt_ptr prepare(const tokenizer_state& state, const submission& job) {
  auto out = std::make_shared<prepared_prompt>();
  prepared_prompt_result result = state.preparer->prepare(job.request);
  if (result.error) {
    out->error = error_event{job.request.request_id, error_kind::invalid_request, *result.error, result.param};
    return out;
  }
  compiled_request_constraint constraint = compile_request_constraint(state.constraints.get(), job.request);
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

void send_tokens(tokenizer_state& state, const stream_batch& batch, stop_matches& stops) {
  for (const token_event& token : batch.tokens) {
    const auto it = state.streams.find(token.request);
    if (it == state.streams.end()) continue;  // failed or finished already
    token_outcome outcome = it->second.stream.on_token(token.choice, token.sample);
    if (outcome.delta) it->second.sink.delta(*outcome.delta);
    if (outcome.stop_string_matched) stops.choices.emplace_back(token.request, token.choice);
  }
}

void send_finishes(tokenizer_state& state, const stream_batch& batch) {
  for (const finish_event& finish : batch.finished) {
    const auto it = state.streams.find(finish.request);
    if (it == state.streams.end()) continue;
    finish_outcome outcome =
        it->second.stream.on_finished(finish.choice, finish.reason, finish.usage, finish.request_done);
    if (outcome.delta) it->second.sink.delta(*outcome.delta);
    if (outcome.finished) it->second.sink.finished(*outcome.finished);
    if (finish.request_done) state.streams.erase(it);
  }
}

tokenizer_actor::behavior_type tokenizer_behavior(tokenizer_actor::stateful_pointer<tokenizer_state> self,
                                                  std::shared_ptr<const prompt_preparer> preparer,
                                                  std::shared_ptr<constraints::constraint_compiler> constraints) {
  self->state.preparer = std::move(preparer);
  self->state.constraints = std::move(constraints);
  return {
      [self](atom::encode, const submission_ptr& job) { return prepare(self->state, *job); },
      [self](atom::open, const stream_open_ptr& open) {
        output_stream stream(self->state.preparer->tokenizer(), open->accepted.request_id, open->output);
        self->state.streams.emplace(open->handle, open_stream{std::move(stream), open->sink});
        open->sink.accepted(open->accepted);
      },
      [self](atom::events, const stream_batch_ptr& batch) {
        auto stops = std::make_shared<stop_matches>();
        send_tokens(self->state, *batch, *stops);
        send_finishes(self->state, *batch);
        for (const auto& [handle, error] : batch->errors) {
          const auto it = self->state.streams.find(handle);
          if (it == self->state.streams.end()) continue;
          it->second.sink.error(error);
          self->state.streams.erase(it);
        }
        return stop_matches_ptr{std::move(stops)};
      },
  };
}

}  // namespace

tokenizer_actor spawn_tokenizer(caf::actor_system& system, std::shared_ptr<const prompt_preparer> preparer,
                                std::shared_ptr<constraints::constraint_compiler> constraints) {
  return system.spawn(tokenizer_behavior, std::move(preparer), std::move(constraints));
}

}  // namespace troupe

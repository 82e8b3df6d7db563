#include "actors/tokenizer_actor.hpp"

#include <spdlog/spdlog.h>
#include <map>
#include <stdexcept>

#include "actors/core/request_constraint.hpp"

namespace troupe {

namespace {

struct open_stream {
  output_stream stream;
  event_sink sink;
};

struct tokenizer_state {
  tokenizer_setup setup;
  std::map<request_handle, open_stream> streams;
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
// hostile input) fails that request, not the worker and the streams it holds.
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
                                                  tokenizer_setup setup) {
  self->state.setup = std::move(setup);
  return {
      [self](atom::encode, const submission_ptr& job) { return prepare_guarded(self->state, *job); },
      [self](atom::open, const stream_open_ptr& open) {
        output_stream stream(self->state.setup.preparer->tokenizer(), open->accepted.request_id, open->output);
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

tokenizer_actor spawn_tokenizer(caf::actor_system& system, tokenizer_setup setup) {
  return system.spawn(tokenizer_behavior, std::move(setup));
}

}  // namespace troupe

#include "actors/detokenizer_actor.hpp"

#include <spdlog/spdlog.h>

#include <map>
#include <stdexcept>

namespace troupe {

namespace {

struct open_stream {
  output_stream stream;
  event_sink sink;
  bool poisoned = false;  ///< the test hook's marker is in its prompt
};

struct detokenizer_state {
  detokenizer_setup setup;
  std::map<request_handle, open_stream> streams;
  std::vector<request_handle> failed_at_open;  ///< reported with the next reply, so the scheduler aborts them
  static inline const char* name = "detokenizer";
};

using stream_iterator = std::map<request_handle, open_stream>::iterator;

/// The test hook's failure, thrown where a detokenizer bug would throw.
struct injected_output_fault : std::runtime_error {
  injected_output_fault() : std::runtime_error("injected output fault") {}
};

std::string failure_message(const std::string& what) { return "streaming the output failed: " + what; }

void on_open(detokenizer_state& state, const stream_open& open) {
  const std::string& id = open.accepted.request_id;
  try {
    const std::string& marker = state.setup.fault_marker;
    const bool poisoned = !marker.empty() && open.accepted.prompt_text.find(marker) != std::string::npos;
    output_stream stream(state.setup.tokenizer, id, open.output);
    state.streams.insert_or_assign(open.handle, open_stream{std::move(stream), open.sink, poisoned});
    open.sink.accepted(open.accepted);
  } catch (const std::exception& e) {
    spdlog::error("detokenizer: opening the stream of request {} failed: {}", id, e.what());
    state.streams.erase(open.handle);
    open.sink.error({id, error_kind::internal, failure_message(e.what()), ""});
    state.failed_at_open.push_back(open.handle);
  }
}

// One request's output failed: its sink gets the error and the scheduler is
// told to abort it; the shard's other streams go on.
void fail_stream(detokenizer_state& state, stream_iterator it, const std::string& what, stream_feedback& feedback) {
  const std::string& id = it->second.stream.request_id();
  spdlog::error("detokenizer: streaming request {} failed: {}", id, what);
  it->second.sink.error({id, error_kind::internal, failure_message(what), ""});
  feedback.failed.push_back(it->first);
  state.streams.erase(it);
}

void send_tokens(detokenizer_state& state, const stream_batch& batch, stream_feedback& feedback) {
  for (const token_event& token : batch.tokens) {
    const auto it = state.streams.find(token.request);
    if (it == state.streams.end()) continue;  // failed or finished already
    // The test hook: "output_exit" throws outside the guard, so the shard dies.
    if (it->second.poisoned && state.setup.fault_exits) throw injected_output_fault();
    try {
      if (it->second.poisoned) throw injected_output_fault();
      token_outcome outcome = it->second.stream.on_token(token.choice, token.sample);
      if (outcome.delta) it->second.sink.delta(*outcome.delta);
      if (outcome.stop_string_matched) feedback.stops.emplace_back(token.request, token.choice);
    } catch (const std::exception& e) {
      fail_stream(state, it, e.what(), feedback);
    }
  }
}

void send_finishes(detokenizer_state& state, const stream_batch& batch, stream_feedback& feedback) {
  for (const finish_event& finish : batch.finished) {
    const auto it = state.streams.find(finish.request);
    if (it == state.streams.end()) continue;
    try {
      finish_outcome outcome =
          it->second.stream.on_finished(finish.choice, finish.reason, finish.usage, finish.request_done);
      if (outcome.delta) it->second.sink.delta(*outcome.delta);
      if (outcome.finished) it->second.sink.finished(*outcome.finished);
    } catch (const std::exception& e) {
      fail_stream(state, it, e.what(), feedback);
      continue;
    }
    if (finish.request_done) state.streams.erase(it);
  }
}

void send_errors(detokenizer_state& state, const stream_batch& batch) {
  for (const auto& [handle, error] : batch.errors) {
    const auto it = state.streams.find(handle);
    if (it == state.streams.end()) continue;
    it->second.sink.error(error);
    state.streams.erase(it);
  }
}

detokenizer_actor::behavior_type detokenizer_behavior(detokenizer_actor::stateful_pointer<detokenizer_state> self,
                                                      detokenizer_setup setup) {
  self->state.setup = std::move(setup);
  return {
      [self](atom::open, const stream_open_ptr& open) { on_open(self->state, *open); },
      [self](atom::events, const stream_batch_ptr& batch) {
        auto feedback = std::make_shared<stream_feedback>();
        feedback->failed = std::exchange(self->state.failed_at_open, {});
        send_tokens(self->state, *batch, *feedback);
        send_finishes(self->state, *batch, *feedback);
        send_errors(self->state, *batch);
        return stream_feedback_ptr{std::move(feedback)};
      },
  };
}

}  // namespace

detokenizer_actor spawn_detokenizer(caf::actor_system& system, detokenizer_setup setup) {
  return system.spawn(detokenizer_behavior, std::move(setup));
}

}  // namespace troupe

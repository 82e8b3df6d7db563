#pragma once
// The detokenizer actors: the output shards. Shard h % shards streams
// request h: it keeps the request's output_stream (incremental detokenizer,
// stop-string matcher) and calls its sink, so a request's text is always
// made by one actor. They do nothing else, so event delivery never queues
// behind prompt preparation (the tokenizer workers' job). An exception
// while streaming one request fails that request only (its sink gets the
// error, the scheduler aborts it); a shard that dies anyway is restarted
// by the intake and only the requests it streamed fail.

#include <memory>
#include <string>

#include "actors/messages.hpp"
#include "model/text/tokenizer.hpp"

namespace troupe {

/// What every shard starts with (a restarted one too).
struct detokenizer_setup {
  std::shared_ptr<const text::tokenizer> tokenizer;
  /// Test hook (knob test_tokenizer_fault_marker, fault "output" or
  /// "output_exit"): a request whose prompt contains this text makes the
  /// shard throw on its first token; empty: never.
  std::string fault_marker;
  /// Test hook ("output_exit"): that failure escapes the handler, so the
  /// shard dies, instead of failing the request only.
  bool fault_exits = false;
};

/// Spawns one output shard.
detokenizer_actor spawn_detokenizer(caf::actor_system& system, detokenizer_setup setup);

}  // namespace troupe

#pragma once
// OpenAI response JSON: complete responses, streamed chunks, logprobs in
// each endpoint's shape, usage. Pure functions over engine events' data.

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "api/http/openai_request.hpp"
#include "troupe/request.hpp"

namespace troupe::api {

/// What every response and chunk of one API request repeats.
struct response_identity {
  endpoint_kind endpoint = endpoint_kind::completions;
  std::string id;            ///< "cmpl-…" or "chatcmpl-…"
  std::int64_t created = 0;  ///< unix time, seconds
  std::string model;
};

/// `bytes` random bytes as lower-case hex (2 × bytes characters).
std::string random_hex(std::size_t bytes);

/// The X-Request-Id of a response: the client's `given` one when it is
/// short and plain (at most 128 of [A-Za-z0-9-_.:]), otherwise a fresh one.
std::string request_id_for(std::string_view given);

/// `data` as one HTTP/1.1 chunk: its size in hex, CRLF, the bytes, CRLF.
std::string http_chunk(std::string_view data);

/// A fresh response id: "cmpl-" or "chatcmpl-" and 32 hex digits.
std::string make_response_id(endpoint_kind endpoint);

/// `{"prompt_tokens", "completion_tokens", "total_tokens",
/// "prompt_tokens_details": {"cached_tokens"}}`.
boost::json::object usage_json(const usage_info& usage);

/// Completions logprobs `{tokens, token_logprobs, top_logprobs, text_offset}`;
/// offsets start at `text_offset`, which advances past the tokens' text.
/// top_logprobs maps token text → logprob and includes the sampled token.
boost::json::object completion_logprobs_json(std::span<const token_logprobs> tokens, std::size_t& text_offset);

/// Chat logprobs `{content: [{token, logprob, bytes, top_logprobs}]}`.
boost::json::object chat_logprobs_json(std::span<const token_logprobs> tokens);

/// A tool call as the API reports it.
struct rendered_tool_call {
  std::string id;         ///< "call_" and 24 hex digits; 9 letters and digits for Mistral (its template checks)
  std::string name;       ///< the function's name
  std::string arguments;  ///< JSON object text
};

/// A fresh tool-call id in the form `family`'s templates accept back.
std::string make_tool_call_id(tool_call_family family);

/// The OpenAI finish_reason of a chat choice: "tool_calls" when it stopped
/// after calling tools, else the engine's reason.
const char* chat_finish_reason(finish_reason reason, bool called_tools);

/// One finished choice of a complete (non-streamed) response.
struct choice_result {
  int index = 0;
  std::string text;                      ///< echo prefix (if any) + generated text
  std::size_t logprob_text_offset = 0;   ///< where the generated text starts in `text`
  std::vector<token_logprobs> logprobs;  ///< one per generated token when asked for
  finish_reason reason = finish_reason::stop;
  std::optional<std::string> stop_reason;
  /// chat: calls parsed out of the output; `text` is then the rest (content
  /// is null when that is empty).
  std::vector<rendered_tool_call> tool_calls;
};

/// The complete response object (`text_completion` or `chat.completion`).
boost::json::object response_json(const response_identity& identity, std::span<const choice_result> choices,
                                  const usage_info& usage, bool with_logprobs);

/// Builds the chunks of one streamed response. With `usage_field` every
/// chunk carries `"usage": null` (OpenAI does so when include_usage is set).
class chunk_builder {
 public:
  chunk_builder(response_identity identity, bool usage_field);

  /// Chat's first chunk of a choice: delta {role: "assistant", content: ""}.
  boost::json::object role(int index) const;
  /// New text for a choice; `logprobs` is null or the endpoint's logprobs object.
  boost::json::object text(int index, std::string_view text, boost::json::value logprobs) const;
  /// Chat: a tool call's first chunk, delta.tool_calls[{index, id, type, function: {name, arguments: ""}}].
  boost::json::object tool_call_start(int index, int call_index, const rendered_tool_call& call) const;
  /// Chat: more of a tool call's arguments, delta.tool_calls[{index, function: {arguments}}].
  boost::json::object tool_call_arguments(int index, int call_index, std::string_view arguments) const;
  /// The choice's last chunk: empty delta/text with finish_reason ("tool_calls"
  /// for a chat choice that stopped after `called_tools`).
  boost::json::object finish(int index, finish_reason reason, const std::optional<std::string>& stop_reason,
                             bool called_tools = false) const;
  /// The usage chunk (empty choices) sent before [DONE] when asked for.
  boost::json::object usage(const usage_info& usage) const;

  const response_identity& identity() const { return identity_; }

 private:
  boost::json::object chunk(boost::json::object choice) const;

  response_identity identity_;
  bool usage_field_;
};

/// One SSE event: "data: <json>\n\n".
std::string sse_event(const boost::json::value& payload);

/// The SSE stream's terminator.
inline constexpr std::string_view sse_done_event = "data: [DONE]\n\n";

}  // namespace troupe::api

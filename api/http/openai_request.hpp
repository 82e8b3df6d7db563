#pragma once
// OpenAI (and vLLM-extra) request bodies → validated engine requests. Every
// field is type-, range- and size-checked against the engine's limits;
// failures throw api_error (400 naming the field, 404 unknown model, 413
// prompt longer than the context).

#include <boost/json/value.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "api/http/request_limits.hpp"
#include "model/chat/tool_call_schema.hpp"
#include "troupe/engine.hpp"
#include "troupe/request.hpp"

namespace troupe::api {

/// Which OpenAI endpoint a request is for (the response shapes differ).
enum class endpoint_kind : std::uint8_t { completions, chat };

/// How tool calls are read out of chat choices.
struct tool_call_settings {
  /// The format parsed; none when the request has no tools, tool_choice is
  /// "none", or the model has no known format.
  tool_call_family family = tool_call_family::none;
  bool parallel = true;  ///< parallel_tool_calls: false keeps only each choice's first call
  tool_choice choice;    ///< what the client asked for (required/named: for the constraint engine)
};

/// A validated generation: one engine request per prompt, and how to answer.
struct parsed_generation {
  endpoint_kind endpoint = endpoint_kind::completions;
  std::string model;                        ///< the served model name echoed in responses
  std::vector<generation_request> prompts;  ///< one per prompt; each has `n` choices
  int n = 1;
  bool stream = false;
  bool include_usage = false;  ///< stream_options.include_usage
  bool echo = false;           ///< completions: prepend the prompt text to each choice
  bool logprobs = false;       ///< report logprobs in the endpoint's shape
  int top_logprobs = 0;        ///< alternatives per token
  tool_call_settings tools;    ///< chat: parsing tool calls out of the output
};

/// `POST /v1/completions` (`body`: the request object): `prompt` is a
/// string, a list of strings, a list of token ids or a list of such lists
/// (one engine request each).
parsed_generation parse_completions_request(const boost::json::value& body, const request_limits& limits,
                                            const model_info& model);

/// `POST /v1/chat/completions` (`body`: the request object): `messages`
/// with string or list-of-text-parts content (normalised to strings),
/// `tools` passed to the chat template.
parsed_generation parse_chat_request(const boost::json::value& body, const request_limits& limits,
                                     const model_info& model);

}  // namespace troupe::api

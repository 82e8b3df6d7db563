#pragma once
// What a caller submits to the engine and the events it gets back. Plain
// structs with no CAF, Beast or JSON types, so embedders and the HTTP layer
// share them. Installed as <troupe/request.hpp>.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "constraints/constraint.hpp"
#include "kernels/sampling.hpp"

namespace troupe {

/// How the prompt is given: exactly one form per request.
enum class prompt_kind : std::uint8_t {
  text,       ///< `prompt_text`, tokenized with the tokenizer's special tokens (BOS)
  token_ids,  ///< `prompt_token_ids`, used as is
  chat,       ///< `chat_messages_json` rendered through the model's chat template
};

/// Why a choice stopped.
enum class finish_reason : std::uint8_t {
  stop,    ///< eos, a stop string or a stop token id
  length,  ///< max_tokens or the model's context length
  abort,   ///< cancelled by the caller, a disconnect or a timeout
};

/// Lower-case OpenAI name: "stop", "length", "abort".
inline const char* finish_reason_name(finish_reason reason) {
  switch (reason) {
    case finish_reason::stop:
      return "stop";
    case finish_reason::length:
      return "length";
    case finish_reason::abort:
      return "abort";
  }
  return "stop";
}

/// One generation request. Validated by the engine at admission; the limits
/// are engine_config fields.
struct generation_request {
  std::string request_id;  ///< caller's id; the engine assigns one when empty

  prompt_kind kind = prompt_kind::text;
  std::string prompt_text;
  std::vector<std::int32_t> prompt_token_ids;
  std::string chat_messages_json;         ///< JSON array of {role, content, ...} messages
  std::string chat_tools_json;            ///< JSON array of tools, or empty
  std::string chat_template_kwargs_json;  ///< JSON object of extra template variables, or empty
  bool add_generation_prompt = true;

  sampling_params sampling;
  std::optional<std::uint64_t> seed;  ///< none: the engine draws one
  int max_tokens = 16;                ///< < 0: up to the context length
  int min_tokens = 0;
  bool ignore_eos = false;
  bool speculative = true;                   ///< false: no draft tokens for this request (when the engine speculates)
  std::vector<std::string> stop;             ///< stop strings (not included in the output)
  std::vector<std::int32_t> stop_token_ids;  ///< extra ids that end the choice (included in usage)
  bool skip_special_tokens = true;
  int n = 1;          ///< parallel samples sharing the prompt
  bool echo = false;  ///< completions: prepend the prompt text to the output
  /// Structured output (response_format json_object / json_schema, or a
  /// regex, choice list or grammar): none means free text.
  std::optional<constraints::constraint_spec> constraint;
  std::string constraint_field;  ///< the request field the constraint came from (errors name it)

  int priority = 0;                   ///< lower runs first (policy `priority`)
  std::optional<double> deadline_ms;  ///< finish within this many ms of arrival (policy `deadline`)
  std::string user;                   ///< tenant for the `fair` policy
  std::uint64_t cache_salt = 0;       ///< prefix-cache partition: cached prompt blocks are shared only between
                                      ///< requests of equal salt (the server sets it per API key or user)
  std::optional<double> timeout_s;    ///< abort after this long
  /// Where it came from (the server sets one per HTTP connection or
  /// WebSocket): prompts awaiting preparation are bounded per origin (knob
  /// max_pending_prompts_per_connection) and prepared in turns across
  /// origins. 0: none (only the global bounds apply).
  std::uint64_t origin = 0;
};

/// The engine accepted the request and knows its prompt.
struct accepted_event {
  std::string request_id;
  int prompt_tokens = 0;
  std::string prompt_text;  ///< the prompt as text (rendered chat, or decoded ids) for `echo`
};

/// Log-probability of one sampled token and its most likely alternatives.
struct token_logprobs {
  std::int32_t token = 0;
  std::string text;  ///< the token's own text (may be a partial UTF-8 character)
  float logprob = 0.0f;
  std::vector<std::pair<std::string, float>> top;  ///< (token text, logprob), most likely first
  std::vector<std::int32_t> top_ids;
};

/// New output for one choice: text that became final and the tokens behind it.
struct delta_event {
  std::string request_id;
  int choice = 0;
  std::string text;                      ///< may be empty while text is held back (stop strings, UTF-8)
  std::vector<std::int32_t> token_ids;   ///< tokens sampled since the previous delta
  std::vector<token_logprobs> logprobs;  ///< one per token when logprobs were asked for
};

/// Token counts for a request (all choices).
struct usage_info {
  int prompt_tokens = 0;
  int cached_prompt_tokens = 0;  ///< prompt tokens served from the prefix cache
  int completion_tokens = 0;
};

/// One choice finished; the request ends when every choice has.
struct finished_event {
  std::string request_id;
  int choice = 0;
  finish_reason reason = finish_reason::stop;
  std::optional<std::string> stop_reason;  ///< the stop string that matched, if any
  usage_info usage;                        ///< totals so far; final on the last choice
  bool request_done = false;               ///< true on the last choice's event
};

/// Kinds of request failure, each with its HTTP status in the API layer.
enum class error_kind : std::uint8_t {
  invalid_request,  ///< 400
  too_long,         ///< 413: prompt longer than the context
  overloaded,       ///< 429/503: queue full or deadline cannot be met
  internal,         ///< 500
  shutting_down,    ///< 503
  cancelled,        ///< 499: cancelled before it ran (a text task; a cancelled generation finishes with `abort`)
};

/// The request failed; no further events follow for it.
struct error_event {
  std::string request_id;
  error_kind kind = error_kind::internal;
  std::string message;
  std::string param;  ///< the offending request field, when one is to blame
  /// What went wrong, for machines ("prompt_queue_full", "template_error");
  /// empty: the kind says it all.
  std::string code;
};

/// A /tokenize or /detokenize call (engine::run_text_task).
struct text_task {
  enum class kind : std::uint8_t {
    encode,       ///< `text` to ids
    encode_chat,  ///< `chat_messages_json` rendered through the chat template, then to ids
    decode,       ///< `ids` to text
  };
  kind type = kind::encode;
  std::string text;
  std::string chat_messages_json;  ///< JSON array of messages
  std::string chat_tools_json;     ///< JSON array of tools, or empty
  bool add_generation_prompt = true;
  bool add_special_tokens = true;  ///< encode, encode_chat
  std::vector<std::int32_t> ids;
  bool skip_special_tokens = false;  ///< decode
  std::uint64_t origin = 0;          ///< as generation_request::origin
  /// engine::cancel(id) drops the task while it waits (its result is then
  /// an error of kind `cancelled`); empty: it cannot be cancelled.
  std::string id;
};

/// What a text task made: ids (encode) or text (decode), or why not.
struct text_task_result {
  std::vector<std::int32_t> ids;
  std::string text;
  /// A template that refused the messages: invalid_request, param
  /// "messages", code "template_error"; a bound: overloaded; a cancel
  /// before it ran: cancelled.
  std::optional<error_event> error;
};

}  // namespace troupe

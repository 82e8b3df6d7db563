#pragma once
// Shared by the completions and chat parsers: the fields both endpoints
// accept (sampling, stop conditions, vLLM extras). Internal to api/http.

#include <array>
#include <string_view>

#include "api/http/json_fields.hpp"
#include "api/http/openai_request.hpp"

namespace troupe::api {

/// Keys every generation endpoint accepts (harmless OpenAI bookkeeping
/// fields such as `metadata` and `store` are accepted and ignored).
// clang-format off
inline constexpr std::array<std::string_view, 32> common_request_keys = {
    "model", "max_tokens", "temperature", "top_p", "n", "stream", "stream_options", "stop",
    "presence_penalty", "frequency_penalty", "logit_bias", "seed", "user", "response_format",
    // structured output (constraint_fields.hpp)
    "structured_outputs", "guided_json", "guided_regex", "guided_choice", "guided_grammar",
    // vLLM's extras, then Troupe's own
    "top_k", "min_p", "repetition_penalty", "ignore_eos", "min_tokens", "stop_token_ids",
    "skip_special_tokens", "priority", "deadline_ms", "speculative",
    // accepted and ignored
    "metadata", "store", "service_tier"};
// clang-format on

/// Reads the shared fields into `out` (model, n, stream, stream_options)
/// and `base` (sampling, stops, vLLM extras); omitted sampling fields and
/// max_tokens take `limits.sampling`. The length fields differ per endpoint:
/// see read_max_tokens.
void read_common_fields(const json_field& fields, const request_limits& limits, const model_info& model,
                        parsed_generation& out, generation_request& base);

/// Reads max_tokens-like `key` into base.max_tokens (range [1, context]).
void read_max_tokens(const json_field& fields, std::string_view key, const model_info& model, generation_request& base);

/// Reads min_tokens once max_tokens is known (range [0, max_tokens]).
void read_min_tokens(const json_field& fields, generation_request& base);

/// Reads and normalises `messages` (text parts joined into strings) into a
/// JSON array string for the chat template.
std::string read_chat_messages(const json_field& fields);

/// Checks the whole request's output budget (every prompt × n choices of
/// max_tokens; see check_output_budget) once its prompts are read: a 400
/// naming max_tokens when over the engine's max_request_output_tokens.
void check_request_output_budget(const parsed_generation& out, const request_limits& limits, const model_info& model);

/// Checks one token id against the vocabulary (400 naming `param`).
void check_token_id(std::int64_t id, const model_info& model, const std::string& param);

}  // namespace troupe::api

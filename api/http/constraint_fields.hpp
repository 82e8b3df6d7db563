#pragma once
// Structured-output request fields, shared by the completions and chat
// parsers (and so by the WebSocket API): OpenAI's response_format, vLLM's
// structured_outputs object and its older guided_* fields. Internal to api/http.

#include "api/http/json_fields.hpp"
#include "troupe/request.hpp"

namespace troupe::api {

/// Reads the request's constraint into base.constraint (and the field it
/// came from into base.constraint_field): response_format json_object or
/// json_schema ("text" is no constraint), structured_outputs {json, regex,
/// choice, grammar, json_object, structural_tag}, or guided_json / guided_regex /
/// guided_choice / guided_grammar. More than one is a 400 naming the second.
void read_constraint(const json_field& fields, generation_request& base);

}  // namespace troupe::api

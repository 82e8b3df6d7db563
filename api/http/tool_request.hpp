#pragma once
// Chat requests' tool fields: `tools`, `tool_choice` and
// `parallel_tool_calls`, validated against each other and the model's
// tool-call format. Internal to api/http.

#include <string>

#include "api/http/json_fields.hpp"
#include "api/http/openai_request.hpp"

namespace troupe::api {

/// Reads the tool fields of a chat request into `out.tools` and
/// `base.chat_tools_json` (the tools the template renders; empty when there
/// are none or tool_choice is "none"). 400 naming the field for a bad tool,
/// a tool_choice that is not auto/none/required/{"type":"function",…}, a
/// named function no tool has, or required/named without tools or on a
/// model with no tool-call format. Required and named choices set
/// base.constraint to the family's forced call format (a structural tag,
/// field "tool_choice"); 400 when the request has another constraint.
void read_tool_fields(const json_field& fields, const request_limits& limits, const model_info& model,
                      parsed_generation& out, generation_request& base);

}  // namespace troupe::api

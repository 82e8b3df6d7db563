// POST /v1/chat/completions request parsing: messages are normalised (text
// parts joined into a string) before they reach the chat template.

#include <algorithm>
#include <boost/json/serialize.hpp>

#include "api/http/api_error.hpp"
#include "api/http/openai_request.hpp"
#include "api/http/request_fields.hpp"
#include "api/http/tool_request.hpp"
#include "base/utf8.hpp"

namespace troupe::api {

namespace {

constexpr auto chat_only_keys = std::to_array<std::string_view>(
    {"messages", "max_completion_tokens", "logprobs", "top_logprobs", "tools", "tool_choice", "parallel_tool_calls",
     "chat_template_kwargs", "add_generation_prompt"});
constexpr auto message_keys =
    std::to_array<std::string_view>({"role", "content", "name", "tool_calls", "tool_call_id"});
constexpr auto roles = std::to_array<std::string_view>({"system", "developer", "user", "assistant", "tool"});

std::vector<std::string_view> chat_keys() {
  std::vector<std::string_view> keys(common_request_keys.begin(), common_request_keys.end());
  keys.insert(keys.end(), chat_only_keys.begin(), chat_only_keys.end());
  return keys;
}

/// List-of-parts content → one string; only text parts are supported.
std::string join_text_parts(const boost::json::array& parts, const std::string& param) {
  std::string text;
  for (std::size_t j = 0; j < parts.size(); ++j) {
    const std::string part_param = param + "[" + std::to_string(j) + "]";
    if (!parts[j].is_object())
      throw invalid_field(part_param, "'" + part_param + "' must be an object", "invalid_type");
    const json_field part = request_fields(parts[j], part_param);
    const std::string type = part.get_string("type", 64).value_or("");
    if (type != "text") {
      throw invalid_field(part.child_path("type"),
                          "content part type '" + truncate_utf8(type, 32) + "' is not supported", "unsupported_value");
    }
    static constexpr auto part_keys = std::to_array<std::string_view>({"type", "text"});
    part.reject_unknown(part_keys);
    if (j > 0) text += '\n';
    text += part.at("text").string();
  }
  return text;
}

boost::json::object normalise_message(const boost::json::value& value, std::size_t index) {
  const std::string param = "messages[" + std::to_string(index) + "]";
  if (!value.is_object()) throw invalid_field(param, "'" + param + "' must be an object", "invalid_type");
  const json_field fields = request_fields(value, param);
  fields.reject_unknown(message_keys);
  const std::optional<std::string> role = fields.get_string("role", 32);
  if (!role || std::find(roles.begin(), roles.end(), *role) == roles.end()) {
    throw invalid_field(fields.child_path("role"),
                        "'" + fields.child_path("role") + "' must be one of system, developer, user, assistant, tool");
  }
  boost::json::object message;
  message["role"] = *role;
  const std::optional<json_field> content = fields.find("content");
  const std::optional<json_field> tool_calls = fields.get_array("tool_calls");
  if (!content) {
    if (*role != "assistant" || !tool_calls) {
      throw invalid_field(fields.child_path("content"), "'" + fields.child_path("content") + "' is required",
                          "missing_field");
    }
    message["content"] = nullptr;
  } else if (content->value().is_string()) {
    message["content"] = content->value().get_string();
  } else if (content->value().is_array()) {
    message["content"] = join_text_parts(content->array(), content->path());
  } else {
    content->fail_type("a string or an array of content parts");
  }
  if (const auto name = fields.get_string("name", 256)) message["name"] = *name;
  if (tool_calls) message["tool_calls"] = tool_calls->value();
  if (const auto id = fields.get_string("tool_call_id", 256)) message["tool_call_id"] = *id;
  return message;
}

}  // namespace

std::string read_chat_messages(const json_field& fields) {
  const std::optional<json_field> messages_field = fields.get_array("messages");
  if (!messages_field) throw invalid_field("messages", "'messages' is required", "missing_field");
  const boost::json::array& messages = messages_field->array();
  if (messages.empty()) throw invalid_field("messages", "'messages' must not be empty", "empty_prompt");
  boost::json::array normalised;
  normalised.reserve(messages.size());
  for (std::size_t i = 0; i < messages.size(); ++i) normalised.push_back(normalise_message(messages[i], i));
  return boost::json::serialize(normalised);
}

namespace {

void read_chat_extras(const json_field& fields, const request_limits& limits, parsed_generation& out,
                      generation_request& base) {
  out.logprobs = fields.get_bool("logprobs").value_or(false);
  if (const auto top = fields.get_int("top_logprobs", 0, limits.engine.max_top_logprobs)) {
    if (!out.logprobs && *top > 0) throw invalid_field("top_logprobs", "'top_logprobs' requires 'logprobs': true");
    out.top_logprobs = static_cast<int>(*top);
  }
  if (const std::optional<json_field> kwargs = fields.get_object("chat_template_kwargs")) {
    base.chat_template_kwargs_json = boost::json::serialize(kwargs->value());
  }
  base.add_generation_prompt = fields.get_bool("add_generation_prompt").value_or(true);
}

}  // namespace

parsed_generation parse_chat_request(const boost::json::value& body, const request_limits& limits,
                                     const model_info& model) {
  const json_field fields = request_fields(body);
  fields.reject_unknown(chat_keys());
  parsed_generation out;
  out.endpoint = endpoint_kind::chat;
  generation_request base;
  base.max_tokens = -1;  // chat default: up to the context length
  read_common_fields(fields, limits, model, out, base);
  read_max_tokens(fields, "max_tokens", model, base);
  read_max_tokens(fields, "max_completion_tokens", model, base);  // supersedes the deprecated max_tokens
  read_min_tokens(fields, base);
  read_chat_extras(fields, limits, out, base);
  base.sampling.logprobs = out.logprobs;
  base.sampling.top_logprobs = out.top_logprobs;
  base.kind = prompt_kind::chat;
  read_tool_fields(fields, limits, model, out, base);
  base.chat_messages_json = read_chat_messages(fields);
  out.prompts.push_back(std::move(base));
  check_request_output_budget(out, limits, model);
  return out;
}

}  // namespace troupe::api

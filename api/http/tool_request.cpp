#include "api/http/tool_request.hpp"

#include <algorithm>
#include <boost/json/serialize.hpp>

#include "api/http/api_error.hpp"
#include "base/utf8.hpp"

namespace troupe::api {

namespace {

constexpr std::string_view choice_shapes =
    "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": "
    "...}}";

/// Checks one tool; returns its function's name.
std::string check_tool(const boost::json::value& tool, std::size_t index) {
  const std::string param = "tools[" + std::to_string(index) + "]";
  if (!tool.is_object()) throw invalid_field(param, "'" + param + "' must be an object", "invalid_type");
  const json_field fields = request_fields(tool, param);
  if (fields.get_string("type", 32).value_or("") != "function") {
    throw invalid_field(fields.child_path("type"), "'" + fields.child_path("type") + "' must be \"function\"");
  }
  const std::optional<json_field> function = fields.get_object("function");
  if (!function) throw invalid_field(fields.child_path("function"), "'function' is required", "missing_field");
  const std::string name(function->at("name").string(256));
  function->get_string("description");
  function->get_object("parameters");
  return name;
}

tool_choice read_tool_choice(const json_field& fields) {
  const std::optional<json_field> field = fields.find("tool_choice");
  if (!field || field->value().is_null()) return {};
  const boost::json::value& value = field->value();
  if (value.is_string()) {
    if (value.get_string() == "auto") return {};
    if (value.get_string() == "none") return {tool_choice::mode::none, {}};
    if (value.get_string() == "required") return {tool_choice::mode::required, {}};
    throw invalid_field("tool_choice", std::string(choice_shapes), "unsupported_value");
  }
  if (!value.is_object()) throw invalid_field("tool_choice", std::string(choice_shapes), "invalid_type");
  static constexpr auto choice_keys = std::to_array<std::string_view>({"type", "function"});
  field->reject_unknown(choice_keys);
  if (field->get_string("type", 32).value_or("") != "function") {
    throw invalid_field("tool_choice.type", "'tool_choice.type' must be \"function\"");
  }
  const std::optional<json_field> function = field->get_object("function");
  if (!function) throw invalid_field("tool_choice.function", "'tool_choice.function' is required", "missing_field");
  static constexpr auto function_keys = std::to_array<std::string_view>({"name"});
  function->reject_unknown(function_keys);
  return {tool_choice::mode::named, std::string(function->at("name").string(256))};
}

/// Required and named choices need tools to choose from and a format to read calls in.
void check_choice(const tool_choice& choice, const std::vector<std::string>& names, const model_info& model) {
  if (choice.kind != tool_choice::mode::required && choice.kind != tool_choice::mode::named) return;
  if (names.empty()) {
    throw invalid_field("tool_choice", "'tool_choice' \"required\" or a function needs 'tools'", "missing_field");
  }
  if (choice.kind == tool_choice::mode::named &&
      std::find(names.begin(), names.end(), choice.function) == names.end()) {
    throw invalid_field("tool_choice.function.name",
                        "no tool named '" + truncate_utf8(choice.function, 64) + "' in 'tools'", "unknown_tool");
  }
  if (parse_tool_call_family(model.tool_call_parser).value_or(tool_call_family::none) == tool_call_family::none) {
    throw invalid_field("tool_choice",
                        "this model has no tool-call format to read calls in (see the tool_call_parser knob)",
                        "unsupported_value");
  }
}

/// Required and named choices become a structural-tag constraint: the output
/// must be calls in the family's format whose arguments match the tool's
/// parameters. Another constraint in the same request is a 400.
void force_tool_calls(const boost::json::array& tools, const tool_call_settings& settings, generation_request& base) {
  if (settings.choice.kind != tool_choice::mode::required && settings.choice.kind != tool_choice::mode::named) return;
  if (base.constraint) {
    throw invalid_field("tool_choice",
                        "'tool_choice' \"required\" or a function cannot be combined with '" + base.constraint_field +
                            "': both constrain the output",
                        "conflicting_fields");
  }
  const forced_tool_calls forced = forced_tool_call_format(tools, settings.choice, settings.family, settings.parallel);
  if (forced.structures.empty()) return;
  base.constraint =
      constraints::constraint_spec{constraints::constraint_kind::structural_tag, structural_tag_json(forced)};
  base.constraint_field = "tool_choice";
}

}  // namespace

void read_tool_fields(const json_field& fields, const request_limits& limits, const model_info& model,
                      parsed_generation& out, generation_request& base) {
  out.tools.choice = read_tool_choice(fields);
  out.tools.parallel = fields.get_bool("parallel_tool_calls").value_or(true);
  std::vector<std::string> names;
  const std::optional<json_field> tools_field = fields.get_array("tools");
  if (tools_field) {
    const boost::json::array& tools = tools_field->array();
    if (tools.size() > static_cast<std::size_t>(limits.max_tools)) {
      throw invalid_field("tools", "'tools' has more than " + std::to_string(limits.max_tools) + " entries",
                          "too_many");
    }
    for (std::size_t i = 0; i < tools.size(); ++i) names.push_back(check_tool(tools[i], i));
  }
  check_choice(out.tools.choice, names, model);
  if (names.empty() || out.tools.choice.kind == tool_choice::mode::none) return;
  base.chat_tools_json = boost::json::serialize(tools_field->value());
  out.tools.family = parse_tool_call_family(model.tool_call_parser).value_or(tool_call_family::none);
  force_tool_calls(tools_field->array(), out.tools, base);
}

}  // namespace troupe::api

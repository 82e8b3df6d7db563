#include "model/chat/tool_call_schema.hpp"

#include <algorithm>
#include <boost/json/serialize.hpp>

namespace troupe {

namespace {

/// The function object of an OpenAI tool, or null.
const boost::json::object* function_of(const boost::json::value& tool) {
  const boost::json::object* object = tool.if_object();
  const boost::json::value* function = object != nullptr ? object->if_contains("function") : nullptr;
  return function != nullptr ? function->if_object() : nullptr;
}

std::string name_of(const boost::json::object& function) {
  const boost::json::value* name = function.if_contains("name");
  return name != nullptr && name->is_string() ? std::string(name->get_string()) : std::string();
}

boost::json::object parameters_of(const boost::json::object& function) {
  const boost::json::value* parameters = function.if_contains("parameters");
  if (parameters != nullptr && parameters->is_object()) return parameters->get_object();
  return {{"type", "object"}};
}

/// `{"name": <name>, <arguments_key>: <parameters>}` and nothing else.
boost::json::object call_object_schema(const boost::json::object& function, std::string_view arguments_key) {
  boost::json::object properties{{"name", {{"type", "string"}, {"const", name_of(function)}}},
                                 {arguments_key, parameters_of(function)}};
  return {{"type", "object"},
          {"properties", std::move(properties)},
          {"required", boost::json::array{"name", arguments_key}},
          {"additionalProperties", false}};
}

/// The tools the choice lets the model call.
std::vector<const boost::json::object*> callable(const boost::json::array& tools, const tool_choice& choice) {
  std::vector<const boost::json::object*> functions;
  for (const boost::json::value& tool : tools) {
    const boost::json::object* function = function_of(tool);
    if (function == nullptr) continue;
    if (choice.kind == tool_choice::mode::named && name_of(*function) != choice.function) continue;
    functions.push_back(function);
  }
  return functions;
}

}  // namespace

forced_tool_calls forced_tool_call_format(const boost::json::array& tools, const tool_choice& choice,
                                          tool_call_family family, bool parallel) {
  forced_tool_calls forced;
  if (choice.kind != tool_choice::mode::required && choice.kind != tool_choice::mode::named) return forced;
  const std::vector<const boost::json::object*> functions = callable(tools, choice);
  if (functions.empty()) return forced;
  switch (family) {
    case tool_call_family::llama3_json:
      for (const auto* function : functions)
        forced.structures.push_back({"", call_object_schema(*function, "parameters"), ""});
      forced.repeatable = parallel;
      forced.separator = "; ";
      break;
    case tool_call_family::hermes:
      for (const auto* function : functions) {
        forced.structures.push_back({"<tool_call>\n", call_object_schema(*function, "arguments"), "\n</tool_call>"});
      }
      forced.repeatable = parallel;
      forced.separator = "\n";
      break;
    case tool_call_family::mistral: {
      boost::json::array alternatives;
      for (const auto* function : functions) alternatives.push_back(call_object_schema(*function, "arguments"));
      boost::json::object schema{{"type", "array"}, {"items", {{"anyOf", std::move(alternatives)}}}, {"minItems", 1}};
      if (!parallel) schema["maxItems"] = 1;
      forced.structures.push_back({"[TOOL_CALLS]", std::move(schema), ""});
      break;
    }
    case tool_call_family::deepseek_v3:
      // One call: the outer begin/end tags wrap the whole list, so a repeat would need a grammar of its own.
      for (const auto* function : functions) {
        forced.structures.push_back(
            {"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>" + name_of(*function) + "\n```json\n",
             parameters_of(*function), "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"});
      }
      break;
    case tool_call_family::none:
      break;
  }
  return forced;
}

std::string structural_tag_json(const forced_tool_calls& forced) {
  boost::json::array structures;
  boost::json::array triggers;
  for (const tool_call_structure& structure : forced.structures) {
    structures.push_back({{"begin", structure.begin}, {"schema", structure.schema}, {"end", structure.end}});
    const boost::json::string trigger(structure.begin.empty() ? std::string("{") : structure.begin);
    if (std::find(triggers.begin(), triggers.end(), boost::json::value(trigger)) == triggers.end()) {
      triggers.push_back(trigger);
    }
  }
  boost::json::object tag{
      {"type", "structural_tag"}, {"structures", std::move(structures)}, {"triggers", std::move(triggers)}};
  if (forced.repeatable) tag["separator"] = forced.separator;
  return boost::json::serialize(tag);
}

}  // namespace troupe

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

/// Copies `from`'s definitions ("$defs", "definitions") into `to`: local
/// references such as "#/$defs/x" in a tool's parameters resolve against the
/// root of the schema that embeds them (the first definition of a name wins).
void hoist_definitions(const boost::json::object& from, boost::json::object& to) {
  for (const std::string_view key : {"$defs", "definitions"}) {
    const boost::json::value* definitions = from.if_contains(key);
    if (definitions == nullptr || !definitions->is_object()) continue;
    boost::json::value& target = to[key];
    if (!target.is_object()) target = boost::json::object();
    for (const auto& [name, schema] : definitions->get_object()) target.as_object().emplace(name, schema);
  }
}

/// `{"name": <name>, <arguments_key>: <parameters>}` and nothing else.
boost::json::object call_object_schema(const boost::json::object& function, std::string_view arguments_key) {
  const boost::json::object parameters = parameters_of(function);
  boost::json::object properties{{"name", {{"type", "string"}, {"const", name_of(function)}}},
                                 {arguments_key, parameters}};
  boost::json::object schema{{"type", "object"},
                             {"properties", std::move(properties)},
                             {"required", boost::json::array{"name", arguments_key}},
                             {"additionalProperties", false}};
  hoist_definitions(parameters, schema);
  return schema;
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
      boost::json::object definitions;
      for (const auto* function : functions) {
        alternatives.push_back(call_object_schema(*function, "arguments"));
        hoist_definitions(alternatives.back().get_object(), definitions);
      }
      boost::json::object schema{{"type", "array"}, {"items", {{"anyOf", std::move(alternatives)}}}, {"minItems", 1}};
      hoist_definitions(definitions, schema);
      if (!parallel) schema["maxItems"] = 1;
      // [TOOL_CALLS] is a control token in Mistral's tokenizers, which a mask
      // never allows (and skip_special_tokens drops): the forced output starts
      // at the array, which the parser reads as calls at the start.
      forced.structures.push_back({"", std::move(schema), ""});
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
    const bool array = structure.schema.contains("items");
    const boost::json::string trigger(!structure.begin.empty() ? structure.begin : array ? "[" : "{");
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

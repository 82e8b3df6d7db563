#include "api/http/constraint_fields.hpp"

#include <boost/json/serialize.hpp>
#include <optional>
#include <vector>

#include "api/http/api_error.hpp"

namespace troupe::api {

namespace {

using constraints::constraint_kind;
using constraints::constraint_spec;

/// Constraint text the engine accepts at most (the compiler refuses more too).
constexpr std::size_t max_constraint_bytes = 1 << 20;

/// A constraint and the request field it came from.
struct found_constraint {
  constraint_spec spec;
  std::string field;
};

/// A JSON schema (or structural tag) given as an object, or as a string holding one (vLLM).
std::string read_schema(const json_field& field) {
  if (field.value().is_object()) return boost::json::serialize(field.value());
  if (field.value().is_string()) return std::string(field.string(max_constraint_bytes));
  field.fail_type("a JSON schema object");
}

/// Choices as a JSON array of strings, at least one.
std::string read_choices(const json_field& field) {
  const boost::json::array& choices = field.array();
  if (choices.empty()) throw invalid_field(field.path(), "'" + field.path() + "' must not be empty");
  for (std::size_t i = 0; i < choices.size(); ++i) field.at(i).string(max_constraint_bytes);
  return boost::json::serialize(field.value());
}

std::optional<found_constraint> read_response_format(const json_field& fields) {
  const std::optional<json_field> format = fields.get_object("response_format");
  if (!format) return std::nullopt;
  static constexpr auto format_keys = std::to_array<std::string_view>({"type", "json_schema"});
  format->reject_unknown(format_keys);
  const std::string type(format->at("type").string(64));
  if (type == "text") return std::nullopt;
  if (type == "json_object") return found_constraint{{constraint_kind::json_object, ""}, "response_format"};
  if (type != "json_schema") {
    throw invalid_field(format->child_path("type"),
                        "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"",
                        "unsupported_value");
  }
  const std::optional<json_field> schema_format = format->get_object("json_schema");
  if (!schema_format) {
    throw invalid_field(format->child_path("json_schema"), "'response_format.json_schema' is required",
                        "missing_field");
  }
  static constexpr auto schema_keys = std::to_array<std::string_view>({"name", "description", "schema", "strict"});
  schema_format->reject_unknown(schema_keys);
  schema_format->get_string("name", 256);
  schema_format->get_string("description", max_constraint_bytes);
  schema_format->get_bool("strict");
  const std::optional<json_field> schema = schema_format->get_object("schema");
  if (!schema) {
    throw invalid_field(schema_format->child_path("schema"), "'response_format.json_schema.schema' is required",
                        "missing_field");
  }
  return found_constraint{{constraint_kind::json_schema, boost::json::serialize(schema->value())}, schema->path()};
}

/// One constraint field of vLLM's (structured_outputs member or guided_* key) by its kind.
found_constraint read_vllm_field(const json_field& field, constraint_kind kind) {
  switch (kind) {
    case constraint_kind::json_schema:
    case constraint_kind::structural_tag:
      return {{kind, read_schema(field)}, field.path()};
    case constraint_kind::choice:
      return {{kind, read_choices(field)}, field.path()};
    case constraint_kind::json_object:
      if (!field.boolean()) throw invalid_field(field.path(), "'" + field.path() + "' may only be true");
      return {{kind, ""}, field.path()};
    default:
      return {{kind, std::string(field.string(max_constraint_bytes))}, field.path()};
  }
}

struct vllm_key {
  std::string_view name;
  constraint_kind kind;
};

constexpr auto structured_output_keys = std::to_array<vllm_key>({{"json", constraint_kind::json_schema},
                                                                 {"regex", constraint_kind::regex},
                                                                 {"choice", constraint_kind::choice},
                                                                 {"grammar", constraint_kind::grammar},
                                                                 {"json_object", constraint_kind::json_object},
                                                                 {"structural_tag", constraint_kind::structural_tag}});
constexpr auto guided_keys = std::to_array<vllm_key>({{"guided_json", constraint_kind::json_schema},
                                                      {"guided_regex", constraint_kind::regex},
                                                      {"guided_choice", constraint_kind::choice},
                                                      {"guided_grammar", constraint_kind::grammar}});

void read_vllm_keys(const json_field& object, std::span<const vllm_key> keys, std::vector<found_constraint>& found) {
  for (const vllm_key& key : keys) {
    if (const std::optional<json_field> field = object.find(key.name))
      found.push_back(read_vllm_field(*field, key.kind));
  }
}

}  // namespace

void read_constraint(const json_field& fields, generation_request& base) {
  std::vector<found_constraint> found;
  if (auto format = read_response_format(fields)) found.push_back(std::move(*format));
  if (const std::optional<json_field> structured = fields.get_object("structured_outputs")) {
    std::vector<std::string_view> names;
    for (const vllm_key& key : structured_output_keys) names.push_back(key.name);
    structured->reject_unknown(names);
    read_vllm_keys(*structured, structured_output_keys, found);
  }
  read_vllm_keys(fields, guided_keys, found);
  if (found.empty()) return;
  if (found.size() > 1) {
    throw invalid_field(
        found[1].field,
        "only one constraint per request: '" + found[0].field + "' and '" + found[1].field + "' are both given",
        "conflicting_fields");
  }
  base.constraint = std::move(found[0].spec);
  base.constraint_field = std::move(found[0].field);
}

}  // namespace troupe::api

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <map>

#include "constraints/constraint_rules.hpp"
#include "constraints/json_grammar.hpp"
#include "constraints/regex_parser.hpp"

namespace troupe::constraints {
namespace {

namespace json = boost::json;

/// Integer ranges up to this many values become a list of literals.
constexpr std::int64_t max_enumerated_range = 256;

/// Regexes of the string formats the compiler decides.
const std::map<std::string, std::string, std::less<>>& format_patterns() {
  static const std::string date = "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])";
  static const std::string time =
      "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
  static const std::map<std::string, std::string, std::less<>> formats = {
      {"date", date},
      {"time", time},
      {"date-time", date + "T" + time},
      {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
      {"email", "[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(\\.[A-Za-z0-9-]{1,63}){1,4}"},
      {"ipv4", "((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"},
  };
  return formats;
}

/// `e` without the bytes a JSON string cannot hold unescaped (controls,
/// '"' and '\'), so a pattern's matches need no escaping.
expression_ptr json_safe(const expression_ptr& e) {
  if (e->type == expression::kind::byte_set) {
    std::vector<byte_range> kept;
    for (auto r : e->ranges) {
      for (int lo = r.lo; lo <= r.hi;) {
        if (lo < 0x20 || lo == '"' || lo == '\\') {
          ++lo;
          continue;
        }
        int hi = lo;
        while (hi + 1 <= r.hi && hi + 1 != '"' && hi + 1 != '\\') ++hi;
        kept.push_back({static_cast<std::uint8_t>(lo), static_cast<std::uint8_t>(hi)});
        lo = hi + 1;
      }
    }
    return byte_set(std::move(kept));
  }
  if (e->items.empty()) return e;
  auto copy = std::make_shared<expression>(*e);
  for (auto& item : copy->items) item = json_safe(item);
  return copy;
}

class schema_compiler {
 public:
  schema_compiler(const json::value& root, compile_budget& budget, rule_set& rules)
      : root_(root), budget_(budget), rules_(rules), json_(rules) {}

  expression_ptr value(const json::value& schema, std::size_t depth) {
    budget_.check();
    if (depth > budget_.limits().max_depth)
      fail("the schema nests deeper than " + std::to_string(budget_.limits().max_depth));
    if (schema.is_bool()) {
      if (!schema.as_bool()) fail("a 'false' schema matches nothing");
      return json_.any_value();
    }
    if (!schema.is_object()) fail("a schema must be an object or a boolean");
    const json::object& s = schema.as_object();
    for (const char* key :
         {"not", "if", "patternProperties", "prefixItems", "dependentSchemas", "unevaluatedProperties"}) {
      if (s.contains(key)) fail(std::string("'") + key + "' is not supported");
    }
    if (const auto* ref = s.if_contains("$ref")) return reference(*ref, depth);
    if (const auto* values = s.if_contains("enum")) return enumeration(*values);
    if (const auto* value = s.if_contains("const")) return literal(json::serialize(*value));
    for (const char* key : {"anyOf", "oneOf"}) {
      if (const auto* list = s.if_contains(key)) return alternatives(*list, depth);
    }
    if (const auto* list = s.if_contains("allOf")) {
      if (!list->is_array() || list->as_array().size() != 1) fail("'allOf' is supported with one schema only");
      return value(list->as_array()[0], depth + 1);
    }
    return typed(s, depth);
  }

 private:
  [[noreturn]] void fail(const std::string& message) const { budget_.fail("json_schema: " + message); }

  expression_ptr reference(const json::value& ref, std::size_t depth) {
    if (!ref.is_string() || ref.as_string().empty() || ref.as_string()[0] != '#') {
      fail("'$ref' must be a local reference such as \"#/$defs/name\"");
    }
    const std::string target(ref.as_string());
    if (auto it = rules_by_ref_.find(target); it != rules_by_ref_.end()) return call(it->second);
    boost::system::error_code error;
    const json::value* schema = root_.find_pointer(std::string_view(target).substr(1), error);
    if (!schema) fail("'$ref' \"" + target + "\" points nowhere");
    // The rule exists before its body, so recursive references resolve.
    const std::size_t rule = rules_.add_rule(target);
    rules_by_ref_.emplace(target, rule);
    rules_.bodies[rule] = value(*schema, depth + 1);
    return call(rule);
  }

  expression_ptr enumeration(const json::value& values) {
    if (!values.is_array() || values.as_array().empty()) fail("'enum' must be a non-empty array");
    std::vector<expression_ptr> items;
    for (const auto& v : values.as_array()) items.push_back(literal(json::serialize(v)));
    return choice(std::move(items));
  }

  expression_ptr alternatives(const json::value& list, std::size_t depth) {
    if (!list.is_array() || list.as_array().empty()) fail("'anyOf' / 'oneOf' must be a non-empty array");
    std::vector<expression_ptr> items;
    for (const auto& item : list.as_array()) items.push_back(value(item, depth + 1));
    return choice(std::move(items));
  }

  expression_ptr typed(const json::object& s, std::size_t depth) {
    const json::value* type = s.if_contains("type");
    if (!type) {
      if (s.contains("properties") || s.contains("additionalProperties")) return of_type("object", s, depth);
      if (s.contains("items")) return of_type("array", s, depth);
      return json_.any_value();
    }
    if (type->is_string()) return of_type(type->as_string(), s, depth);
    if (!type->is_array() || type->as_array().empty()) fail("'type' must be a string or a non-empty array");
    std::vector<expression_ptr> items;
    for (const auto& t : type->as_array()) {
      if (!t.is_string()) fail("'type' entries must be strings");
      items.push_back(of_type(t.as_string(), s, depth));
    }
    return choice(std::move(items));
  }

  expression_ptr of_type(std::string_view type, const json::object& s, std::size_t depth) {
    if (type == "object") return object(s, depth);
    if (type == "array") return array(s, depth);
    if (type == "string") return string(s);
    if (type == "integer") return integer(s);
    if (type == "number") return json_builder::number(minimum(s) >= 0);
    if (type == "boolean") return choice({literal("true"), literal("false")});
    if (type == "null") return literal("null");
    fail("unknown type '" + std::string(type) + "'");
  }

  expression_ptr object(const json::object& s, std::size_t depth) {
    const json::value* properties = s.if_contains("properties");
    const json::value* additional = s.if_contains("additionalProperties");
    if (!properties) {
      if (additional && additional->is_bool() && !additional->as_bool()) return json_builder::object_with({}, {});
      return json_builder::object_of(additional && additional->is_object() ? value(*additional, depth + 1)
                                                                           : json_.any_value());
    }
    if (!properties->is_object()) fail("'properties' must be an object");
    std::vector<std::string> required;
    if (const auto* list = s.if_contains("required")) {
      if (!list->is_array()) fail("'required' must be an array");
      for (const auto& name : list->as_array()) {
        if (!name.is_string()) fail("'required' entries must be strings");
        if (!properties->as_object().contains(name.as_string())) {
          fail("required property '" + std::string(name.as_string()) + "' is not among 'properties'");
        }
        required.emplace_back(name.as_string());
      }
    }
    std::vector<expression_ptr> items;
    std::vector<bool> must;
    for (const auto& [key, schema] : properties->as_object()) {
      budget_.check_states(items.size() * 8, "schema");
      items.push_back(json_builder::member(key, value(schema, depth + 1)));
      must.push_back(std::find(required.begin(), required.end(), key) != required.end());
    }
    return json_builder::object_with(std::move(items), std::move(must));
  }

  expression_ptr array(const json::object& s, std::size_t depth) {
    const json::value* items = s.if_contains("items");
    const auto item = items ? value(*items, depth + 1) : json_.any_value();
    const std::size_t min = count(s, "minItems", 0);
    const std::size_t max = count(s, "maxItems", unbounded);
    if (max < min) fail("'maxItems' is below 'minItems'");
    return json_builder::array_of(item, min, max);
  }

  expression_ptr string(const json::object& s) {
    if (const auto* pattern = s.if_contains("pattern")) {
      if (!pattern->is_string()) fail("'pattern' must be a string");
      return json_builder::quoted(json_safe(parse_regex(pattern->as_string(), budget_)));
    }
    if (const auto* format = s.if_contains("format"); format && format->is_string()) {
      const auto it = format_patterns().find(std::string_view(format->as_string()));
      if (it != format_patterns().end()) return json_builder::quoted(parse_regex(it->second, budget_));
    }
    const std::size_t min = count(s, "minLength", 0);
    const std::size_t max = count(s, "maxLength", unbounded);
    if (max < min) fail("'maxLength' is below 'minLength'");
    return json_builder::quoted(repeat(json_builder::string_char(), min, max));
  }

  expression_ptr integer(const json::object& s) {
    const double low = minimum(s);
    const double high = maximum(s);
    if (low > high) fail("'minimum' is above 'maximum'");
    if (high - low < max_enumerated_range) {
      std::vector<expression_ptr> values;
      for (auto v = static_cast<std::int64_t>(std::ceil(low)); v <= static_cast<std::int64_t>(std::floor(high)); ++v) {
        values.push_back(literal(std::to_string(v)));
      }
      if (values.empty()) fail("no integer lies between 'minimum' and 'maximum'");
      return choice(std::move(values));
    }
    return json_builder::integer(low >= 0);
  }

  /// The inclusive lower bound of a number schema (-inf when absent).
  double minimum(const json::object& s) const {
    double low = -std::numeric_limits<double>::infinity();
    if (const auto* v = s.if_contains("minimum"); v && v->is_number()) low = v->to_number<double>();
    if (const auto* v = s.if_contains("exclusiveMinimum"); v && v->is_number()) {
      low = std::max(low, std::nextafter(v->to_number<double>(), std::numeric_limits<double>::infinity()));
    }
    return low;
  }

  double maximum(const json::object& s) const {
    double high = std::numeric_limits<double>::infinity();
    if (const auto* v = s.if_contains("maximum"); v && v->is_number()) high = v->to_number<double>();
    if (const auto* v = s.if_contains("exclusiveMaximum"); v && v->is_number()) {
      high = std::min(high, std::nextafter(v->to_number<double>(), -std::numeric_limits<double>::infinity()));
    }
    return high;
  }

  std::size_t count(const json::object& s, const char* key, std::size_t fallback) const {
    const json::value* v = s.if_contains(key);
    if (!v) return fallback;
    if (!v->is_int64() && !v->is_uint64()) fail(std::string("'") + key + "' must be a non-negative integer");
    if (v->is_int64() && v->as_int64() < 0) fail(std::string("'") + key + "' must be a non-negative integer");
    return static_cast<std::size_t>(v->to_number<std::uint64_t>());
  }

  const json::value& root_;
  compile_budget& budget_;
  rule_set& rules_;
  json_builder json_;
  std::map<std::string, std::size_t> rules_by_ref_;
};

}  // namespace

expression_ptr json_schema_expression(const json::value& schema, rule_set& rules, compile_budget& budget) {
  schema_compiler compiler(schema, budget, rules);
  return compiler.value(schema, 0);
}

rule_set json_schema_rules(std::string_view schema_json, compile_budget& budget) {
  boost::system::error_code error;
  json::value schema = json::parse(schema_json, error);
  if (error) budget.fail("json_schema: not valid JSON (" + error.message() + ")");
  // OpenAI's wrapper {"name": ..., "schema": {...}, "strict": true} is accepted too.
  if (schema.is_object() && schema.as_object().contains("schema") && !schema.as_object().contains("type") &&
      !schema.as_object().contains("properties")) {
    json::value inner = schema.as_object()["schema"];
    schema = std::move(inner);
  }
  rule_set rules;
  rules.root = rules.add_rule("root");
  rules.bodies[rules.root] = json_schema_expression(schema, rules, budget);
  return rules;
}

}  // namespace troupe::constraints

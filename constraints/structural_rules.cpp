// Structural tags (vLLM's and xgrammar's shape): the output is made of
// structures, each a `begin` literal, a JSON document under a schema and an
// `end` literal. Troupe's form is the one tool_choice "required" needs: the
// output starts with a structure and holds nothing but structures.

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include "constraints/constraint_rules.hpp"

namespace troupe::constraints {
namespace {

namespace json = boost::json;

/// `object[key]` as a string; `fallback` when absent.
std::string text_member(const json::object& object, std::string_view key, std::string_view where,
                        compile_budget& budget, std::string_view fallback = "") {
  const json::value* value = object.if_contains(key);
  if (value == nullptr) return std::string(fallback);
  if (!value->is_string())
    budget.fail("structural_tag: '" + std::string(where) + std::string(key) + "' must be a string");
  return std::string(value->get_string());
}

/// `begin`, the schema's document, `end`.
expression_ptr structure(const json::value& item, std::size_t index, rule_set& rules, compile_budget& budget) {
  const std::string where = "structures[" + std::to_string(index) + "].";
  if (!item.is_object()) budget.fail("structural_tag: '" + where.substr(0, where.size() - 1) + "' must be an object");
  const json::object& object = item.get_object();
  for (const auto& [key, value] : object) {
    if (key != "begin" && key != "schema" && key != "end") {
      budget.fail("structural_tag: unknown field '" + where + std::string(key) + "'");
    }
  }
  const json::value* schema = object.if_contains("schema");
  if (schema == nullptr) budget.fail("structural_tag: '" + where + "schema' is required");
  std::vector<expression_ptr> items;
  items.push_back(literal(text_member(object, "begin", where, budget)));
  items.push_back(json_schema_expression(*schema, rules, budget));
  items.push_back(literal(text_member(object, "end", where, budget)));
  return sequence(std::move(items));
}

/// Refuses unknown fields and a mistyped `type` or `triggers`.
void check_tag_fields(const json::object& tag, compile_budget& budget) {
  for (const auto& [key, value] : tag) {
    if (key != "type" && key != "structures" && key != "triggers" && key != "separator") {
      budget.fail("structural_tag: unknown field '" + std::string(key) + "'");
    }
  }
  if (const json::value* type = tag.if_contains("type"); type && *type != json::value("structural_tag")) {
    budget.fail("structural_tag: 'type' must be \"structural_tag\"");
  }
  if (const json::value* triggers = tag.if_contains("triggers")) {
    if (!triggers->is_array()) budget.fail("structural_tag: 'triggers' must be an array of strings");
    for (const json::value& trigger : triggers->get_array()) {
      if (!trigger.is_string()) budget.fail("structural_tag: 'triggers' must be an array of strings");
    }
  }
}

}  // namespace

rule_set structural_tag_rules(std::string_view tag_json, compile_budget& budget) {
  boost::system::error_code error;
  const json::value tag = json::parse(tag_json, error);
  if (error) budget.fail("structural_tag: not valid JSON (" + error.message() + ")");
  if (!tag.is_object()) budget.fail("structural_tag: must be an object");
  check_tag_fields(tag.get_object(), budget);
  const json::value* structures = tag.get_object().if_contains("structures");
  if (structures == nullptr || !structures->is_array() || structures->get_array().empty()) {
    budget.fail("structural_tag: 'structures' must be a non-empty array");
  }
  rule_set rules;
  rules.root = rules.add_rule("root");
  std::vector<expression_ptr> alternatives;
  for (const json::value& item : structures->get_array()) {
    budget.check_states(alternatives.size() * 8, "structural_tag");
    alternatives.push_back(structure(item, alternatives.size(), rules, budget));
  }
  const std::size_t one_rule = rules.add_rule("structure");
  rules.bodies[one_rule] = choice(std::move(alternatives));
  // A separator makes the structure repeatable: one or more, separated by it.
  if (tag.get_object().contains("separator")) {
    const std::string separator = text_member(tag.get_object(), "separator", "", budget);
    auto more = repeat(sequence({literal(separator), call(one_rule)}), 0, unbounded);
    rules.bodies[rules.root] = sequence({call(one_rule), std::move(more)});
  } else {
    rules.bodies[rules.root] = call(one_rule);
  }
  return rules;
}

}  // namespace troupe::constraints

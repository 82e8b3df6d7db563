#include <boost/json/parse.hpp>

#include "constraints/constraint_rules.hpp"
#include "constraints/json_grammar.hpp"
#include "constraints/regex_parser.hpp"

namespace troupe::constraints {

rule_set regex_rules(std::string_view pattern, compile_budget& budget) {
  rule_set rules;
  rules.root = rules.add_rule("root");
  rules.bodies[rules.root] = parse_regex(pattern, budget);
  return rules;
}

rule_set choice_rules(std::string_view choices_json, compile_budget& budget) {
  boost::system::error_code error;
  const auto parsed = boost::json::parse(choices_json, error);
  if (error || !parsed.is_array() || parsed.as_array().empty())
    budget.fail("choice must be a non-empty array of strings");
  std::vector<expression_ptr> alternatives;
  for (const auto& item : parsed.as_array()) {
    if (!item.is_string()) budget.fail("choice must be a non-empty array of strings");
    alternatives.push_back(literal(item.as_string()));
  }
  rule_set rules;
  rules.root = rules.add_rule("root");
  rules.bodies[rules.root] = choice(std::move(alternatives));
  return rules;
}

rule_set json_object_rules() {
  rule_set rules;
  json_builder json(rules);
  rules.root = rules.add_rule("root");
  rules.bodies[rules.root] = json.any_object();
  return rules;
}

}  // namespace troupe::constraints

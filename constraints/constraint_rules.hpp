#pragma once
// Each constraint kind's text as a rule set (the compiler determinizes it).
// All throw constraint_error through `budget` for invalid or costly input.

#include <boost/json/fwd.hpp>
#include <string_view>

#include "constraints/budget.hpp"
#include "constraints/expression.hpp"

namespace troupe::constraints {

/// A regular expression matched in full.
rule_set regex_rules(std::string_view pattern, compile_budget& budget);
/// A JSON array of strings: the output is exactly one of them.
rule_set choice_rules(std::string_view choices_json, compile_budget& budget);
/// Any JSON object.
rule_set json_object_rules();
/// A JSON schema (the subset OpenAI strict mode and vLLM accept).
rule_set json_schema_rules(std::string_view schema_json, compile_budget& budget);
/// The expression of one JSON schema (`schema`, its own root for local
/// `$ref`s), its rules added to `rules`: structural tags hold several.
expression_ptr json_schema_expression(const boost::json::value& schema, rule_set& rules, compile_budget& budget);
/// A structural tag: one or more `begin` literal, JSON schema, `end`
/// literal structures, with a separator between repeats; nothing else.
rule_set structural_tag_rules(std::string_view tag_json, compile_budget& budget);
/// A GBNF grammar (llama.cpp syntax) starting at rule `root`.
rule_set gbnf_rules(std::string_view grammar, compile_budget& budget);

}  // namespace troupe::constraints

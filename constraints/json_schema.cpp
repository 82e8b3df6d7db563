#include "constraints/constraint_rules.hpp"

namespace troupe::constraints {

rule_set json_schema_rules(std::string_view, compile_budget& budget) { budget.fail("json_schema: not yet"); }
rule_set gbnf_rules(std::string_view, compile_budget& budget) { budget.fail("grammar: not yet"); }

}  // namespace troupe::constraints

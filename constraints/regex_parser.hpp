#pragma once
// Regular expressions (the subset JSON-schema patterns and vLLM users need)
// as byte-level expressions: literals, escapes, classes with UTF-8 ranges,
// '.', alternation, groups, ? * + {m,n}. The whole text must match: a
// leading '^' and trailing '$' are implied and may be written.

#include <string_view>

#include "constraints/budget.hpp"
#include "constraints/expression.hpp"

namespace troupe::constraints {

/// Parses `pattern`; throws constraint_error (through `budget`) naming the
/// offset for unsupported or malformed syntax.
expression_ptr parse_regex(std::string_view pattern, compile_budget& budget);

}  // namespace troupe::constraints

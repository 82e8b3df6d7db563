#pragma once
// An independent check of a JSON value against the schema subset the
// constraint compiler supports (written apart from the compiler, from the
// JSON Schema meaning of each keyword).

#include <boost/json.hpp>
#include <string>

namespace troupe::constraints::testing {

/// Empty when `value` satisfies `schema` (resolving "$ref" in `root`), else
/// the JSON path of the first violation.
std::string schema_violation(const boost::json::value& value, const boost::json::value& schema,
                             const boost::json::value& root, const std::string& path = "$");

}  // namespace troupe::constraints::testing

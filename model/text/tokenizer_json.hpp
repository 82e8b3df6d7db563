#pragma once
// Reading tokenizer.json / tokenizer_config.json: the parser that reports
// line and column, and the json_rules that word every failed read the way
// the text layer always has, as a std::runtime_error naming the file and the
// JSON path, e.g. "tokenizer.json: model.merges[12]: expected a string, got
// a number". The reader itself is base/json_field.hpp.

#include <boost/json/value.hpp>
#include <string>
#include <string_view>

#include "base/json_field.hpp"

namespace troupe::text {

/// Rules for the tokenizer file that errors call `file_name`
/// ("tokenizer.json"): a null member is present (HF's configs use null for
/// "none"), integers are never written as floats, and failures throw
/// std::runtime_error "<file>: <path>: <message>" ("<file>: <message>" at
/// the root).
file_json_rules tokenizer_json_rules(std::string file_name);

/// Parses a whole JSON document; throws std::runtime_error with the file
/// name, line and column on a syntax error.
boost::json::value parse_json_document(std::string_view text, std::string_view file_name);

}  // namespace troupe::text

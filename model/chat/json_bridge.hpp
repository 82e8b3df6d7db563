#pragma once
// Between Boost.JSON and template values: render contexts come in as JSON,
// and the tojson filter writes JSON exactly as Python's json.dumps does with
// transformers' arguments. Internal to model/chat.

#include <boost/json/value.hpp>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>

#include "model/chat/value.hpp"

namespace troupe::jinja {

/// A JSON value as the template sees it: objects become dicts (key order
/// kept), arrays lists, integers int, other numbers float. Throws
/// script_error for strings that are not valid UTF-8 or nesting deeper than
/// max_value_depth.
value from_json(const boost::json::value& json);

/// json.dumps options (transformers' tojson defaults: ensure_ascii=False,
/// indent=None, separators=None, sort_keys=False).
struct json_dump_options {
  bool ensure_ascii = false;
  std::optional<std::string> indent;          ///< None, or the text one level indents by
  std::optional<std::string> item_separator;  ///< default ", " (or "," with indent)
  std::optional<std::string> key_separator;   ///< default ": "
  bool sort_keys = false;
  /// Longest text the dump may build: limit_error (before each indent or
  /// string is appended) past it. Indents nest, so `indent` alone cannot bound it.
  std::size_t max_bytes = std::numeric_limits<std::size_t>::max();
};

/// json.dumps(v, ...); TypeError "Object of type X is not JSON serializable"
/// for values JSON cannot hold.
std::string to_json_text(const value& v, const json_dump_options& options);

}  // namespace troupe::jinja

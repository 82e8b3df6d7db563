#pragma once
// Strict readers for request JSON: every wrong type, range or size becomes a
// 400 api_error whose `param` names the field's path.

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace troupe::api {

/// Parses a request body that must be one JSON object (UTF-8 checked, depth
/// bounded); anything else is a 400 with code "invalid_json".
boost::json::object parse_json_object(std::string_view body);

/// "string", "integer", "number", "boolean", "array", "object" or "null".
const char* json_type_name(const boost::json::value& value);

/// The value as an integer: int64, uint64 within range, or an integral double.
std::optional<std::int64_t> json_integer(const boost::json::value& value);

/// Reads typed optional fields of one object. A JSON null counts as absent,
/// as in OpenAI's API. Ranges are inclusive unless stated otherwise.
class field_reader {
 public:
  /// `prefix` is prepended to keys in error params, e.g. "messages[2]." .
  explicit field_reader(const boost::json::object& object, std::string prefix = {});

  /// The field, or nullptr when absent or null.
  const boost::json::value* find(std::string_view key) const;
  /// The error `param` for a key: prefix + key.
  std::string path(std::string_view key) const;

  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::int64_t> get_int(std::string_view key, std::int64_t min, std::int64_t max) const;
  /// A finite number in [min, max], or (min, max] when `min_exclusive`.
  std::optional<double> get_number(std::string_view key, double min, double max, bool min_exclusive = false) const;
  /// A string of at most `max_bytes` bytes.
  std::optional<std::string> get_string(std::string_view key, std::size_t max_bytes) const;
  const boost::json::object* get_object(std::string_view key) const;
  const boost::json::array* get_array(std::string_view key) const;

  /// Rejects the first key not listed in `known` (OpenAI's "unrecognized
  /// request argument"), so a misspelt field never passes silently.
  void reject_unknown(std::span<const std::string_view> known) const;

  /// 400 for `key`: "'<path>' must be <expected>, got <type>".
  [[noreturn]] void fail_type(std::string_view key, std::string_view expected) const;

 private:
  const boost::json::object& object_;
  std::string prefix_;
};

}  // namespace troupe::api

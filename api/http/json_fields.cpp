#include "api/http/json_fields.hpp"

#include <algorithm>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <cmath>
#include <limits>

#include "api/http/api_error.hpp"
#include "api/http/utf8.hpp"
#include "model/chat/exact_json.hpp"

namespace troupe::api {

namespace {

std::string format_number(double value) {
  std::string text = std::to_string(value);
  while (text.size() > 1 && text.back() == '0') text.pop_back();
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text;
}

}  // namespace

boost::json::object parse_json_object(std::string_view body) {
  for (std::size_t offset = 0; offset < body.size();) {
    const std::size_t length = utf8_sequence_length(body.substr(offset));
    if (length == 0) {
      throw api_error(400, "invalid_request_error",
                      "request body is not valid UTF-8 (byte offset " + std::to_string(offset) + ")", {},
                      "invalid_utf8");
    }
    offset += length;
  }
  // Correctly rounded doubles: chat bodies reach the template's tojson,
  // which must print what Python's json.loads would have read.
  boost::json::error_code ec;
  boost::json::value value = parse_json_exact(body, ec, /*max_depth=*/64);  // deep nesting is an attack
  if (ec) {
    throw api_error(400, "invalid_request_error", "request body is not valid JSON: " + ec.message(), {},
                    "invalid_json");
  }
  if (!value.is_object()) {
    throw api_error(400, "invalid_request_error",
                    std::string("request body must be a JSON object, got ") + json_type_name(value), {},
                    "invalid_json");
  }
  return std::move(value.as_object());
}

const char* json_type_name(const boost::json::value& value) {
  switch (value.kind()) {
    case boost::json::kind::string:
      return "string";
    case boost::json::kind::int64:
    case boost::json::kind::uint64:
      return "integer";
    case boost::json::kind::double_:
      return "number";
    case boost::json::kind::bool_:
      return "boolean";
    case boost::json::kind::array:
      return "array";
    case boost::json::kind::object:
      return "object";
    case boost::json::kind::null:
      return "null";
  }
  return "unknown";
}

std::optional<std::int64_t> json_integer(const boost::json::value& value) {
  if (value.is_int64()) return value.get_int64();
  if (value.is_uint64()) {
    if (value.get_uint64() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
    return static_cast<std::int64_t>(value.get_uint64());
  }
  if (value.is_double()) {
    const double number = value.get_double();
    // 2^63 is the first double outside int64.
    if (!std::isfinite(number) || std::trunc(number) != number || std::fabs(number) >= 9.2233720368547758e18) {
      return std::nullopt;
    }
    return static_cast<std::int64_t>(number);
  }
  return std::nullopt;
}

field_reader::field_reader(const boost::json::object& object, std::string prefix)
    : object_(object), prefix_(std::move(prefix)) {}

const boost::json::value* field_reader::find(std::string_view key) const {
  const boost::json::value* value = object_.if_contains(key);
  return (value == nullptr || value->is_null()) ? nullptr : value;
}

std::string field_reader::path(std::string_view key) const {
  // Keys come from the client: bound what is echoed back in errors.
  return prefix_ + truncate_utf8(key, 64);
}

void field_reader::fail_type(std::string_view key, std::string_view expected) const {
  throw invalid_field(
      path(key), "'" + path(key) + "' must be " + std::string(expected) + ", got " + json_type_name(object_.at(key)),
      "invalid_type");
}

std::optional<bool> field_reader::get_bool(std::string_view key) const {
  const boost::json::value* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_bool()) fail_type(key, "a boolean");
  return value->get_bool();
}

std::optional<std::int64_t> field_reader::get_int(std::string_view key, std::int64_t min, std::int64_t max) const {
  const boost::json::value* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number()) fail_type(key, "an integer");
  const std::optional<std::int64_t> number = json_integer(*value);
  if (!number || *number < min || *number > max) {
    throw invalid_field(path(key), "'" + path(key) + "' must be an integer in [" + std::to_string(min) + ", " +
                                       std::to_string(max) + "], got " + boost::json::serialize(*value));
  }
  return number;
}

std::optional<double> field_reader::get_number(std::string_view key, double min, double max, bool min_exclusive) const {
  const boost::json::value* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number()) fail_type(key, "a number");
  const double number = value->to_number<double>();
  const bool above_min = min_exclusive ? number > min : number >= min;
  if (!std::isfinite(number) || !above_min || number > max) {
    throw invalid_field(path(key), "'" + path(key) + "' must be a number in " + (min_exclusive ? "(" : "[") +
                                       format_number(min) + ", " + format_number(max) + "], got " +
                                       boost::json::serialize(*value));
  }
  return number;
}

std::optional<std::string> field_reader::get_string(std::string_view key, std::size_t max_bytes) const {
  const boost::json::value* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_string()) fail_type(key, "a string");
  if (value->get_string().size() > max_bytes) {
    throw invalid_field(path(key), "'" + path(key) + "' is longer than " + std::to_string(max_bytes) + " bytes",
                        "too_long");
  }
  return std::string(value->get_string());
}

const boost::json::object* field_reader::get_object(std::string_view key) const {
  const boost::json::value* value = find(key);
  if (value == nullptr) return nullptr;
  if (!value->is_object()) fail_type(key, "an object");
  return &value->get_object();
}

const boost::json::array* field_reader::get_array(std::string_view key) const {
  const boost::json::value* value = find(key);
  if (value == nullptr) return nullptr;
  if (!value->is_array()) fail_type(key, "an array");
  return &value->get_array();
}

void field_reader::reject_unknown(std::span<const std::string_view> known) const {
  for (const auto& entry : object_) {
    const std::string_view key = entry.key();
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      throw invalid_field(path(key), "unrecognized request argument '" + path(key) + "'", "unknown_field");
    }
  }
}

}  // namespace troupe::api

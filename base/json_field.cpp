#include "base/json_field.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>

#include "base/utf8.hpp"

namespace troupe {

namespace {

/// A range bound as messages print it: "2", "0.5", "-2" (no trailing zeros).
std::string format_bound(double value) {
  std::string text = std::to_string(value);
  while (text.size() > 1 && text.back() == '0') text.pop_back();
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text;
}

}  // namespace

std::string_view json_type_name(const boost::json::value& value) {
  switch (value.kind()) {
    case boost::json::kind::null:
      return "null";
    case boost::json::kind::bool_:
      return "boolean";
    case boost::json::kind::int64:
    case boost::json::kind::uint64:
      return "integer";
    case boost::json::kind::double_:
      return "number";
    case boost::json::kind::string:
      return "string";
    case boost::json::kind::array:
      return "array";
    case boost::json::kind::object:
      return "object";
  }
  return "unknown";
}

std::optional<std::int64_t> json_integer(const boost::json::value& value, bool integral_doubles) {
  if (value.is_int64()) return value.get_int64();
  if (value.is_uint64()) {
    if (value.get_uint64() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
    return static_cast<std::int64_t>(value.get_uint64());
  }
  if (integral_doubles && value.is_double()) {
    const double number = value.get_double();
    // 2^63 is the first double outside int64.
    if (!std::isfinite(number) || std::trunc(number) != number || std::fabs(number) >= 9.2233720368547758e18) {
      return std::nullopt;
    }
    return static_cast<std::int64_t>(number);
  }
  return std::nullopt;
}

std::string_view json_kind_phrase(json_kind kind) {
  // In the order of json_kind's enumerators.
  static constexpr std::array<std::string_view, 6> phrases = {"a boolean", "an integer", "a number",
                                                              "a string",  "an array",   "an object"};
  return phrases[static_cast<std::size_t>(kind)];
}

std::string_view expected_phrase(const json_failure& failure) {
  return failure.expected_text.empty() ? json_kind_phrase(failure.expected) : failure.expected_text;
}

file_json_rules::file_json_rules(std::string file_name, wording words)
    : file_name_(std::move(file_name)), words_(words) {}

void file_json_rules::raise(const json_failure& failure) const {
  throw std::runtime_error(file_name_ + ": " + words_(failure));
}

json_field::json_field(const boost::json::value& value, const json_rules& rules, std::string path)
    : value_(&value), rules_(&rules), path_(std::move(path)) {}

void json_field::raise(const json_failure& failure) const {
  rules_->raise(failure);
  // Compilers do not trust [[noreturn]] on a virtual call; nor should a
  // read that would otherwise go on with the wrong type.
  throw std::logic_error("json_rules::raise returned");
}

void json_field::fail_kind(json_kind expected) const {
  raise({.problem = json_problem::wrong_type, .path = path_, .value = value_, .expected = expected});
}

void json_field::fail_type(std::string_view expected) const {
  raise({.problem = json_problem::wrong_type, .path = path_, .value = value_, .expected_text = expected});
}

void json_field::fail(std::string_view message) const {
  raise({.problem = json_problem::custom, .path = path_, .value = value_, .message = message});
}

void json_field::fail(std::string_view key, std::string_view message) const {
  const std::string member_path = child_path(key);
  raise({.problem = json_problem::custom,
         .path = member_path,
         .value = object().if_contains(key),
         .key = key,
         .message = message});
}

const boost::json::object& json_field::object() const {
  if (!value_->is_object()) fail_kind(json_kind::object);
  return value_->get_object();
}

const boost::json::array& json_field::array() const {
  if (!value_->is_array()) fail_kind(json_kind::array);
  return value_->get_array();
}

std::string_view json_field::string(std::size_t max_bytes) const {
  if (!value_->is_string()) fail_kind(json_kind::string);
  const boost::json::string& text = value_->get_string();
  if (text.size() > max_bytes) {
    raise({.problem = json_problem::too_long, .path = path_, .value = value_, .limit = max_bytes});
  }
  return {text.data(), text.size()};
}

bool json_field::boolean() const {
  if (!value_->is_bool()) fail_kind(json_kind::boolean);
  return value_->get_bool();
}

std::int64_t json_field::integer(std::int64_t min, std::int64_t max) const {
  const bool integral = value_->is_int64() || value_->is_uint64();
  if (!(integral || (rules_->integral_doubles && value_->is_double()))) fail_kind(json_kind::integer);
  const std::optional<std::int64_t> number = json_integer(*value_, rules_->integral_doubles);
  if (!number || *number < min || *number > max) {
    const std::string range = "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
    raise({.problem = json_problem::out_of_range,
           .path = path_,
           .value = value_,
           .expected = json_kind::integer,
           .range = range});
  }
  return *number;
}

double json_field::number() const {
  if (!value_->is_number()) fail_kind(json_kind::number);
  return value_->to_number<double>();
}

double json_field::number(double min, double max, bool min_exclusive) const {
  const double number = this->number();
  const bool above_min = min_exclusive ? number > min : number >= min;
  if (!std::isfinite(number) || !above_min || number > max) {
    const std::string range = (min_exclusive ? "(" : "[") + format_bound(min) + ", " + format_bound(max) + "]";
    raise({.problem = json_problem::out_of_range,
           .path = path_,
           .value = value_,
           .expected = json_kind::number,
           .range = range});
  }
  return number;
}

std::string json_field::child_path(std::string_view key) const {
  const bool shorten = rules_->max_key_bytes != std::string_view::npos;
  const std::string name = shorten ? truncate_utf8(key, rules_->max_key_bytes) : std::string(key);
  return path_.empty() ? name : path_ + "." + name;
}

std::optional<json_field> json_field::find(std::string_view key) const {
  const boost::json::value* member = object().if_contains(key);
  if (member == nullptr || member->is_null()) return std::nullopt;
  return json_field(*member, *rules_, child_path(key));
}

json_field json_field::at(std::string_view key) const {
  const boost::json::value* member = object().if_contains(key);
  if (member == nullptr || (rules_->null_is_absent && member->is_null())) {
    const std::string member_path = child_path(key);
    raise({.problem = json_problem::missing, .path = path_, .key = key, .member_path = member_path});
  }
  return json_field(*member, *rules_, child_path(key));
}

json_field json_field::at(std::size_t index) const {
  const boost::json::array& elements = array();
  if (index >= elements.size()) raise({.problem = json_problem::no_element, .path = path_, .limit = index});
  return json_field(elements[index], *rules_, path_ + "[" + std::to_string(index) + "]");
}

std::optional<bool> json_field::get_bool(std::string_view key) const {
  const auto member = find(key);
  return member ? std::optional(member->boolean()) : std::nullopt;
}

std::optional<std::int64_t> json_field::get_int(std::string_view key, std::int64_t min, std::int64_t max) const {
  const auto member = find(key);
  return member ? std::optional(member->integer(min, max)) : std::nullopt;
}

std::optional<double> json_field::get_number(std::string_view key) const {
  const auto member = find(key);
  return member ? std::optional(member->number()) : std::nullopt;
}

std::optional<double> json_field::get_number(std::string_view key, double min, double max, bool min_exclusive) const {
  const auto member = find(key);
  return member ? std::optional(member->number(min, max, min_exclusive)) : std::nullopt;
}

std::optional<std::string> json_field::get_string(std::string_view key, std::size_t max_bytes) const {
  const auto member = find(key);
  return member ? std::optional(std::string(member->string(max_bytes))) : std::nullopt;
}

std::optional<json_field> json_field::get_object(std::string_view key) const {
  auto member = find(key);
  if (member) member->object();
  return member;
}

std::optional<json_field> json_field::get_array(std::string_view key) const {
  auto member = find(key);
  if (member) member->array();
  return member;
}

void json_field::reject_unknown(std::span<const std::string_view> known) const {
  for (const auto& entry : object()) {
    const std::string_view key = entry.key();
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      const std::string member_path = child_path(key);
      raise({.problem = json_problem::unknown_member,
             .path = path_,
             .value = &entry.value(),
             .key = key,
             .member_path = member_path});
    }
  }
}

}  // namespace troupe

#pragma once
// The one path-tracking JSON reader: a value together with where it sits in
// its document ("model.merges[3]", "messages[2].content"), and typed,
// checked reads of it and of its members. What a failed check says and
// throws belongs to the caller: each passes json_rules whose raise() words a
// json_failure in its own terms (a 400 api_error naming the request field, a
// runtime_error naming the model file and field, ...).

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace troupe {

/// JSON type of `value` as messages name it: "null", "boolean", "integer"
/// (int64 and uint64), "number" (double), "string", "array" or "object".
std::string_view json_type_name(const boost::json::value& value);

/// The value as an int64: an int64, a uint64 up to INT64_MAX, and with
/// `integral_doubles` a finite double without fraction inside int64's range.
std::optional<std::int64_t> json_integer(const boost::json::value& value, bool integral_doubles = false);

/// What a read asks a value to be.
enum class json_kind { boolean, integer, number, string, array, object };

/// "a boolean", "an integer", "a number", "a string", "an array", "an object".
std::string_view json_kind_phrase(json_kind kind);

/// What went wrong in a read.
enum class json_problem {
  wrong_type,      ///< `value` is not `expected`
  out_of_range,    ///< `value` is not `expected` within `range` (a uint64 beyond int64 included)
  too_long,        ///< `value` is a string longer than `limit` bytes
  missing,         ///< the object at `path` has no member `key`
  no_element,      ///< the array at `path` has no element `limit`
  unknown_member,  ///< the object at `path` has member `key`, which the reader does not know
  custom,          ///< the caller's own `message` about the value at `path`
};

/// One failed read, for json_rules::raise to put into words.
struct json_failure {
  json_problem problem = json_problem::custom;
  std::string_view path;                      ///< where: "a.b[3]", "" at the document's root
  const boost::json::value* value = nullptr;  ///< the value read, when there is one
  json_kind expected = json_kind::object;     ///< wrong_type, out_of_range: what was asked for
  std::string_view expected_text;             ///< wrong_type: the caller's own phrase, overriding `expected`
  std::string_view range;                     ///< out_of_range: "[0, 16777215]", "(0, 1]"
  std::string_view key;                       ///< missing, unknown_member, custom on a member: its key
  std::string_view member_path;               ///< missing, unknown_member: the member's path
  std::size_t limit = 0;                      ///< too_long: the byte limit; no_element: the index
  std::string_view message;                   ///< custom: the caller's text
};

/// expected_text when given, else json_kind_phrase(expected).
std::string_view expected_phrase(const json_failure& failure);

/// How one caller reads JSON: which values count as absent or as integers,
/// how keys appear in paths, and what a failed read throws. One object
/// serves every json_field made from it and must outlive them.
class json_rules {
 public:
  /// at(key) treats a null member as missing (find() always does).
  bool null_is_absent = false;
  /// integer() accepts a double without fraction (clients send 2.0).
  bool integral_doubles = false;
  /// Keys longer than this are shortened in paths (keys chosen by a client).
  std::size_t max_key_bytes = std::string_view::npos;

  /// Throws the caller's exception for `failure`; must not return.
  [[noreturn]] virtual void raise(const json_failure& failure) const = 0;

 protected:
  json_rules() = default;
  json_rules(const json_rules&) = default;
  json_rules& operator=(const json_rules&) = default;
  ~json_rules() = default;
};

/// Rules for reading one named file: failures throw std::runtime_error
/// "<file name>: <words>", where `words` is the caller's wording of the
/// failure (the model loader's and the tokenizer's differ).
class file_json_rules final : public json_rules {
 public:
  using wording = std::string (*)(const json_failure& failure);
  file_json_rules(std::string file_name, wording words);
  [[noreturn]] void raise(const json_failure& failure) const override;

 private:
  std::string file_name_;
  wording words_;
};

/// A JSON value, its path and the rules it is read by. Reads check the
/// value and raise a json_failure when it is not what they ask for; members
/// that are absent or null count as not set. Cheap to copy (the path is).
class json_field {
 public:
  /// `value` and `rules` must outlive the field; `path` is where `value`
  /// sits ("" for a document's root).
  json_field(const boost::json::value& value, const json_rules& rules, std::string path = {});

  /// The value as it is (no check).
  const boost::json::value& value() const { return *value_; }
  /// Where the value sits: "a.b[3]", "" at the root.
  const std::string& path() const { return path_; }
  /// The rules it is read by (for a field made at a custom path).
  const json_rules& rules() const { return *rules_; }

  /// The value as an object.
  const boost::json::object& object() const;
  /// The value as an array.
  const boost::json::array& array() const;
  /// The value as a string of at most `max_bytes` bytes.
  std::string_view string(std::size_t max_bytes = std::string_view::npos) const;
  /// The value as a bool.
  bool boolean() const;
  /// The value as an integer in [min, max].
  std::int64_t integer(std::int64_t min = std::numeric_limits<std::int64_t>::min(),
                       std::int64_t max = std::numeric_limits<std::int64_t>::max()) const;
  /// The value as a double (any JSON number).
  double number() const;
  /// The value as a finite double in [min, max], or (min, max] when `min_exclusive`.
  double number(double min, double max, bool min_exclusive = false) const;

  /// Member `key` of this object, or nullopt when absent or null.
  std::optional<json_field> find(std::string_view key) const;
  /// True when member `key` is present and not null.
  bool has(std::string_view key) const { return find(key).has_value(); }
  /// Member `key` of this object; missing when absent (or null, by the rules).
  json_field at(std::string_view key) const;
  /// Element `index` of this array.
  json_field at(std::size_t index) const;
  /// The path of member `key`: "<path>.<key>", or "<key>" at the root.
  std::string child_path(std::string_view key) const;

  // Optional members: nullopt when absent or null, else read as above
  // (get_object and get_array check the kind and return the member).
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::int64_t> get_int(std::string_view key, std::int64_t min = std::numeric_limits<std::int64_t>::min(),
                                      std::int64_t max = std::numeric_limits<std::int64_t>::max()) const;
  std::optional<double> get_number(std::string_view key) const;
  std::optional<double> get_number(std::string_view key, double min, double max, bool min_exclusive = false) const;
  std::optional<std::string> get_string(std::string_view key, std::size_t max_bytes = std::string_view::npos) const;
  std::optional<json_field> get_object(std::string_view key) const;
  std::optional<json_field> get_array(std::string_view key) const;

  /// Raises unknown_member for the first key of this object not in `known`,
  /// so a misspelt field never passes silently.
  void reject_unknown(std::span<const std::string_view> known) const;

  /// Raises wrong_type: this value is not `expected` (a phrase: "a string or
  /// an array of strings").
  [[noreturn]] void fail_type(std::string_view expected) const;
  /// Raises the caller's own `message` about this value.
  [[noreturn]] void fail(std::string_view message) const;
  /// Raises the caller's own `message` about member `key` (present or not):
  /// a custom failure whose path is the member's.
  [[noreturn]] void fail(std::string_view key, std::string_view message) const;

 private:
  [[noreturn]] void raise(const json_failure& failure) const;
  [[noreturn]] void fail_kind(json_kind expected) const;

  const boost::json::value* value_;
  const json_rules* rules_;
  std::string path_;
};

}  // namespace troupe

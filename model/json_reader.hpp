#pragma once
// Typed, checked access to the fields of a JSON object read from a model
// file. Every error names the file and the field path, e.g.
// "config.json: field 'rope_scaling.factor' must be a number, got string".

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

/// Parses `text` as JSON; throws std::runtime_error "<source>: not valid JSON: ..." on failure.
boost::json::value parse_json_text(std::string_view text, std::string_view source);

/// Reads the file at `path` (at most `max_bytes` bytes, else an error) and
/// parses it as JSON; errors name `source` (usually the file's name).
boost::json::value read_json_file(const std::filesystem::path& path, std::uintmax_t max_bytes, std::string_view source);

/// Reads the whole file at `path` as bytes; errors (missing, too large) name `source`.
std::string read_text_file(const std::filesystem::path& path, std::uintmax_t max_bytes, std::string_view source);

/// Reads the fields of one JSON object. A field that is absent or JSON null
/// counts as "not set" everywhere; a field of the wrong type is an error.
class json_reader {
 public:
  /// `value` must be an object (else an error naming `source` and `path`).
  /// `path` is the dotted name of this object inside the file ("" at the top).
  json_reader(const boost::json::value& value, std::string source, std::string path = "");

  /// True when `key` is present and not null.
  bool has(std::string_view key) const;
  /// An integer field (a float with no fraction is rejected too: HF writes ints as ints).
  std::optional<std::int64_t> get_int(std::string_view key) const;
  /// An integer field that must be set.
  std::int64_t require_int(std::string_view key) const;
  /// A number field (integer or float), as double.
  std::optional<double> get_number(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  /// A field holding either one integer or a list of integers (HF eos_token_id).
  /// Not set: empty.
  std::vector<std::int64_t> get_int_or_int_list(std::string_view key) const;
  /// A list of strings. Not set: empty.
  std::vector<std::string> get_string_list(std::string_view key) const;
  /// A nested object field; nullopt when not set.
  std::optional<json_reader> get_object(std::string_view key) const;
  /// The raw value of `key`, or nullptr when absent.
  const boost::json::value* find(std::string_view key) const;
  const boost::json::object& object() const { return *object_; }

  /// "<path>.<key>" (or just "<key>" at the top level).
  std::string field_name(std::string_view key) const;
  /// Throws std::runtime_error "<source>: field '<path.key>' <message>".
  [[noreturn]] void fail(std::string_view key, std::string_view message) const;
  const std::string& source() const { return source_; }

 private:
  const boost::json::object* object_;
  std::string source_;
  std::string path_;
};

/// JSON type name of `value` for error messages ("string", "object", ...).
std::string_view json_kind_name(const boost::json::value& value);

}  // namespace troupe

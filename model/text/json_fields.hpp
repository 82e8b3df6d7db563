#pragma once
// Checked access to tokenizer.json / tokenizer_config.json values. Every
// failure throws std::runtime_error naming the file and the JSON path, e.g.
// "tokenizer.json: model.merges[12]: expected a string".

#include <boost/json.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace troupe::text {

/// A JSON value together with its path, for error messages.
struct json_node {
  const boost::json::value& value;
  std::string path;  ///< e.g. "tokenizer.json: pre_tokenizer.pretokenizers[1]"; the root is "tokenizer.json:"

  /// Throws std::runtime_error "<path>: <message>".
  [[noreturn]] void fail(std::string_view message) const;

  /// The value as an object; throws if it is not one.
  const boost::json::object& object() const;
  /// The value as an array; throws if it is not one.
  const boost::json::array& array() const;
  /// The value as a string; throws if it is not one.
  std::string_view string() const;
  /// The value as an integer in [min, max]; throws otherwise.
  std::int64_t integer(std::int64_t min, std::int64_t max) const;
  /// The value as a bool; throws if it is not one.
  bool boolean() const;

  /// Member `key` of this object; throws if absent.
  json_node at(std::string_view key) const;
  /// Member `key` of this object, or nullopt if absent or null.
  std::optional<json_node> find(std::string_view key) const;
  /// Element `index` of this array.
  json_node at(std::size_t index) const;

  /// Optional string member (absent or null -> nullopt).
  std::optional<std::string> optional_string(std::string_view key) const;
  /// Optional bool member with a default (absent or null -> fallback).
  bool optional_bool(std::string_view key, bool fallback) const;
  /// The "type" member of a component object.
  std::string_view type() const;
  /// Path of member `key` ("file: key" at the root, "path.key" below).
  std::string child_path(std::string_view key) const;
};

/// Parses a whole JSON document; throws std::runtime_error with the file
/// name, line and column on a syntax error.
boost::json::value parse_json_document(std::string_view text, std::string_view file_name);

}  // namespace troupe::text

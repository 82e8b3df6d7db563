#include "model/text/json_fields.hpp"

#include <algorithm>
#include <stdexcept>

namespace troupe::text {

namespace {

std::string_view kind_name(const boost::json::value& value) {
  switch (value.kind()) {
    case boost::json::kind::null:
      return "null";
    case boost::json::kind::bool_:
      return "a bool";
    case boost::json::kind::int64:
    case boost::json::kind::uint64:
    case boost::json::kind::double_:
      return "a number";
    case boost::json::kind::string:
      return "a string";
    case boost::json::kind::array:
      return "an array";
    case boost::json::kind::object:
      return "an object";
  }
  return "a value";
}

}  // namespace

std::string json_node::child_path(std::string_view key) const {
  return path + (path.ends_with(':') ? " " : ".") + std::string(key);
}

void json_node::fail(std::string_view message) const {
  throw std::runtime_error(path + (path.ends_with(':') ? " " : ": ") + std::string(message));
}

boost::json::value parse_json_document(std::string_view text, std::string_view file_name) {
  boost::json::stream_parser parser;
  boost::system::error_code error;
  const std::size_t consumed = parser.write(text.data(), text.size(), error);
  if (!error) parser.finish(error);
  if (error) {
    const std::size_t offset = std::min(consumed, text.size());
    std::size_t line = 1;
    std::size_t column = 1;
    for (std::size_t i = 0; i < offset; ++i) {
      column = text[i] == '\n' ? 1 : column + 1;
      line += text[i] == '\n' ? 1 : 0;
    }
    throw std::runtime_error(std::string(file_name) + ": invalid JSON at line " + std::to_string(line) + ", column " +
                             std::to_string(column) + ": " + error.message());
  }
  return parser.release();
}

const boost::json::object& json_node::object() const {
  if (!value.is_object()) fail("expected an object, got " + std::string(kind_name(value)));
  return value.get_object();
}

const boost::json::array& json_node::array() const {
  if (!value.is_array()) fail("expected an array, got " + std::string(kind_name(value)));
  return value.get_array();
}

std::string_view json_node::string() const {
  if (!value.is_string()) fail("expected a string, got " + std::string(kind_name(value)));
  const auto& text = value.get_string();
  return {text.data(), text.size()};
}

std::int64_t json_node::integer(std::int64_t min, std::int64_t max) const {
  std::int64_t result = 0;
  if (value.is_int64()) {
    result = value.get_int64();
  } else if (value.is_uint64()) {
    const std::uint64_t unsigned_value = value.get_uint64();
    if (unsigned_value > static_cast<std::uint64_t>(max))
      fail("integer " + std::to_string(unsigned_value) + " out of range");
    result = static_cast<std::int64_t>(unsigned_value);
  } else {
    fail("expected an integer, got " + std::string(kind_name(value)));
  }
  if (result < min || result > max) {
    fail("integer " + std::to_string(result) + " out of range [" + std::to_string(min) + ", " + std::to_string(max) +
         "]");
  }
  return result;
}

bool json_node::boolean() const {
  if (!value.is_bool()) fail("expected a bool, got " + std::string(kind_name(value)));
  return value.get_bool();
}

json_node json_node::at(std::string_view key) const {
  const auto& members = object();
  const auto found = members.find(key);
  if (found == members.end()) fail("missing field \"" + std::string(key) + "\"");
  return {found->value(), child_path(key)};
}

std::optional<json_node> json_node::find(std::string_view key) const {
  const auto& members = object();
  const auto found = members.find(key);
  if (found == members.end() || found->value().is_null()) return std::nullopt;
  return json_node{found->value(), child_path(key)};
}

json_node json_node::at(std::size_t index) const {
  const auto& elements = array();
  if (index >= elements.size()) fail("index " + std::to_string(index) + " out of range");
  return {elements[index], path + "[" + std::to_string(index) + "]"};
}

std::optional<std::string> json_node::optional_string(std::string_view key) const {
  const auto member = find(key);
  if (!member) return std::nullopt;
  return std::string(member->string());
}

bool json_node::optional_bool(std::string_view key, bool fallback) const {
  const auto member = find(key);
  return member ? member->boolean() : fallback;
}

std::string_view json_node::type() const { return at("type").string(); }

}  // namespace troupe::text

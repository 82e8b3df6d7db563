#include "model/json_reader.hpp"

#include <boost/json/parse.hpp>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

namespace troupe {

namespace {

[[noreturn]] void fail_source(std::string_view source, std::string_view message) {
  throw std::runtime_error(std::string(source) + ": " + std::string(message));
}

}  // namespace

std::string_view json_kind_name(const boost::json::value& value) {
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
  return "?";
}

boost::json::value parse_json_text(std::string_view text, std::string_view source) {
  boost::json::error_code error;
  boost::json::parse_options options;
  options.max_depth = 64;
  boost::json::value value = boost::json::parse(boost::json::string_view(text.data(), text.size()), error, {}, options);
  if (error) fail_source(source, "not valid JSON: " + error.message());
  return value;
}

std::string read_text_file(const std::filesystem::path& path, std::uintmax_t max_bytes, std::string_view source) {
  std::error_code error;
  const std::uintmax_t size = std::filesystem::file_size(path, error);
  if (error) fail_source(source, "cannot read " + path.string() + ": " + error.message());
  if (size > max_bytes) {
    fail_source(source, "file is " + std::to_string(size) + " bytes, over the limit of " + std::to_string(max_bytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_source(source, "cannot open " + path.string());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return std::move(buffer).str();
}

boost::json::value read_json_file(const std::filesystem::path& path, std::uintmax_t max_bytes,
                                  std::string_view source) {
  return parse_json_text(read_text_file(path, max_bytes, source), source);
}

json_reader::json_reader(const boost::json::value& value, std::string source, std::string path)
    : object_(value.if_object()), source_(std::move(source)), path_(std::move(path)) {
  if (object_ == nullptr) {
    if (path_.empty()) fail_source(source_, "must hold a JSON object, got " + std::string(json_kind_name(value)));
    fail_source(source_, "field '" + path_ + "' must be an object, got " + std::string(json_kind_name(value)));
  }
}

const boost::json::value* json_reader::find(std::string_view key) const {
  return object_->if_contains(boost::json::string_view(key.data(), key.size()));
}

bool json_reader::has(std::string_view key) const {
  const boost::json::value* value = find(key);
  return value != nullptr && !value->is_null();
}

std::string json_reader::field_name(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

void json_reader::fail(std::string_view key, std::string_view message) const {
  fail_source(source_, "field '" + field_name(key) + "' " + std::string(message));
}

namespace {

// An integer held by `value`, or nullopt when it is not an integer that fits int64.
std::optional<std::int64_t> integer_of(const boost::json::value& value) {
  if (value.is_int64()) return value.get_int64();
  if (value.is_uint64() && value.get_uint64() <= static_cast<std::uint64_t>(INT64_MAX)) {
    return static_cast<std::int64_t>(value.get_uint64());
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::int64_t> json_reader::get_int(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  const boost::json::value& value = *find(key);
  if (auto integer = integer_of(value)) return integer;
  if (value.is_uint64()) fail(key, "is too large");
  fail(key, "must be an integer, got " + std::string(json_kind_name(value)));
}

std::int64_t json_reader::require_int(std::string_view key) const {
  if (auto value = get_int(key)) return *value;
  fail(key, "is missing");
}

std::optional<double> json_reader::get_number(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  const boost::json::value& value = *find(key);
  if (value.is_double()) return value.get_double();
  if (value.is_int64()) return static_cast<double>(value.get_int64());
  if (value.is_uint64()) return static_cast<double>(value.get_uint64());
  fail(key, "must be a number, got " + std::string(json_kind_name(value)));
}

std::optional<bool> json_reader::get_bool(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  const boost::json::value& value = *find(key);
  if (!value.is_bool()) fail(key, "must be true or false, got " + std::string(json_kind_name(value)));
  return value.get_bool();
}

std::optional<std::string> json_reader::get_string(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  const boost::json::value& value = *find(key);
  if (!value.is_string()) fail(key, "must be a string, got " + std::string(json_kind_name(value)));
  return std::string(value.get_string());
}

std::vector<std::int64_t> json_reader::get_int_or_int_list(std::string_view key) const {
  if (!has(key)) return {};
  const boost::json::value& value = *find(key);
  if (auto single = integer_of(value)) return {*single};
  const boost::json::array* list = value.if_array();
  if (list == nullptr) fail(key, "must be an integer or a list of integers, got " + std::string(json_kind_name(value)));
  std::vector<std::int64_t> out;
  for (const boost::json::value& item : *list) {
    auto integer = integer_of(item);
    if (!integer) fail(key, "must be a list of integers, found " + std::string(json_kind_name(item)));
    out.push_back(*integer);
  }
  return out;
}

std::vector<std::string> json_reader::get_string_list(std::string_view key) const {
  if (!has(key)) return {};
  const boost::json::value& value = *find(key);
  const boost::json::array* list = value.if_array();
  if (list == nullptr) fail(key, "must be a list of strings, got " + std::string(json_kind_name(value)));
  std::vector<std::string> out;
  for (const boost::json::value& item : *list) {
    if (!item.is_string()) fail(key, "must be a list of strings, found " + std::string(json_kind_name(item)));
    out.emplace_back(item.get_string());
  }
  return out;
}

std::optional<json_reader> json_reader::get_object(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  const boost::json::value& value = *find(key);
  if (!value.is_object()) fail(key, "must be an object, got " + std::string(json_kind_name(value)));
  return json_reader(value, source_, field_name(key));
}

}  // namespace troupe

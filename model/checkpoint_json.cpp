#include "model/checkpoint_json.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

namespace troupe {

namespace {

[[noreturn]] void fail_source(std::string_view source, std::string_view message) {
  throw std::runtime_error(std::string(source) + ": " + std::string(message));
}

std::string field(std::string_view path) { return "field '" + std::string(path) + "' "; }

std::string message_of(const json_failure& failure) {
  switch (failure.problem) {
    case json_problem::wrong_type: {
      const std::string got = ", got " + std::string(json_type_name(*failure.value));
      if (failure.path.empty() && failure.expected_text.empty() && failure.expected == json_kind::object) {
        return "must hold a JSON object" + got;
      }
      const bool boolean = failure.expected_text.empty() && failure.expected == json_kind::boolean;
      return field(failure.path) + "must be " + std::string(boolean ? "true or false" : expected_phrase(failure)) + got;
    }
    case json_problem::out_of_range:
      if (failure.value->is_uint64()) return field(failure.path) + "is too large";
      return field(failure.path) + "(" + boost::json::serialize(*failure.value) + ") must be in " +
             std::string(failure.range);
    case json_problem::too_long:
      return field(failure.path) + "is longer than " + std::to_string(failure.limit) + " bytes";
    case json_problem::missing:
      return field(failure.member_path) + "is missing";
    case json_problem::no_element:
      return field(failure.path) + "has no element " + std::to_string(failure.limit);
    case json_problem::unknown_member:
      return field(failure.member_path) + "is not a known field";
    case json_problem::custom:
      break;
  }
  return failure.path.empty() ? std::string(failure.message) : field(failure.path) + std::string(failure.message);
}

}  // namespace

file_json_rules checkpoint_json_rules(std::string source) {
  file_json_rules rules(std::move(source), message_of);
  rules.null_is_absent = true;
  return rules;
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

std::vector<std::int64_t> get_int_or_int_list(const json_field& object, std::string_view key) {
  const std::optional<json_field> field = object.find(key);
  if (!field) return {};
  const boost::json::value& value = field->value();
  if (auto single = json_integer(value)) return {*single};
  const boost::json::array* list = value.if_array();
  if (list == nullptr) {
    object.fail(key, "must be an integer or a list of integers, got " + std::string(json_type_name(value)));
  }
  std::vector<std::int64_t> out;
  for (const boost::json::value& item : *list) {
    const std::optional<std::int64_t> integer = json_integer(item);
    if (!integer) object.fail(key, "must be a list of integers, found " + std::string(json_type_name(item)));
    out.push_back(*integer);
  }
  return out;
}

std::vector<std::string> get_string_list(const json_field& object, std::string_view key) {
  const std::optional<json_field> field = object.find(key);
  if (!field) return {};
  const boost::json::value& value = field->value();
  const boost::json::array* list = value.if_array();
  if (list == nullptr) object.fail(key, "must be a list of strings, got " + std::string(json_type_name(value)));
  std::vector<std::string> out;
  for (const boost::json::value& item : *list) {
    if (!item.is_string()) object.fail(key, "must be a list of strings, found " + std::string(json_type_name(item)));
    out.emplace_back(item.get_string());
  }
  return out;
}

}  // namespace troupe

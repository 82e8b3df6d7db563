#include "model/text/tokenizer_json.hpp"

#include <algorithm>
#include <boost/json/serialize.hpp>
#include <boost/json/stream_parser.hpp>
#include <stdexcept>

namespace troupe::text {

namespace {

/// The text layer's names for what a value is: an article, and no
/// difference between integers and floats.
std::string got(const boost::json::value& value) {
  if (value.is_number()) return "a number";
  if (value.is_bool()) return "a bool";
  if (value.is_null()) return "null";
  return std::string(value.is_string() ? "a " : "an ") + std::string(json_type_name(value));
}

std::string message_of(const json_failure& failure) {
  switch (failure.problem) {
    case json_problem::wrong_type: {
      const bool boolean = failure.expected_text.empty() && failure.expected == json_kind::boolean;
      return "expected " + std::string(boolean ? "a bool" : expected_phrase(failure)) + ", got " + got(*failure.value);
    }
    case json_problem::out_of_range: {
      const std::string number = boost::json::serialize(*failure.value);
      // A uint64 is past every range the text layer asks for.
      if (failure.value->is_uint64()) return "integer " + number + " out of range";
      return "integer " + number + " out of range " + std::string(failure.range);
    }
    case json_problem::too_long:
      return "longer than " + std::to_string(failure.limit) + " bytes";
    case json_problem::missing:
      return "missing field \"" + std::string(failure.key) + "\"";
    case json_problem::no_element:
      return "index " + std::to_string(failure.limit) + " out of range";
    case json_problem::unknown_member:
      return "unknown field \"" + std::string(failure.key) + "\"";
    case json_problem::custom:
      break;
  }
  return std::string(failure.message);
}

/// "<path>: <message>", or the message alone at the root.
std::string located_message(const json_failure& failure) {
  const std::string where = failure.path.empty() ? std::string() : std::string(failure.path) + ": ";
  return where + message_of(failure);
}

}  // namespace

file_json_rules tokenizer_json_rules(std::string file_name) {
  return file_json_rules(std::move(file_name), located_message);
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

}  // namespace troupe::text

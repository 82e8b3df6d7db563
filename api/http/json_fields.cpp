#include "api/http/json_fields.hpp"

#include <boost/json/serialize.hpp>

#include "api/http/api_error.hpp"
#include "base/utf8.hpp"
#include "model/chat/exact_json.hpp"

namespace troupe::api {

namespace {

std::string quoted(std::string_view path) { return "'" + std::string(path) + "'"; }

class request_rules final : public json_rules {
 public:
  request_rules() {
    null_is_absent = true;
    integral_doubles = true;
    max_key_bytes = 64;  // keys come from the client: bound what is echoed back
  }

  [[noreturn]] void raise(const json_failure& failure) const override {
    const std::string path(failure.path);
    const std::string expected(expected_phrase(failure));
    switch (failure.problem) {
      case json_problem::wrong_type:
        throw invalid_field(
            path, quoted(path) + " must be " + expected + ", got " + std::string(json_type_name(*failure.value)),
            "invalid_type");
      case json_problem::out_of_range:
        throw invalid_field(path, quoted(path) + " must be " + expected + " in " + std::string(failure.range) +
                                      ", got " + boost::json::serialize(*failure.value));
      case json_problem::too_long:
        throw invalid_field(path, quoted(path) + " is longer than " + std::to_string(failure.limit) + " bytes",
                            "too_long");
      case json_problem::missing:
        throw invalid_field(std::string(failure.member_path), quoted(failure.member_path) + " is required",
                            "missing_field");
      case json_problem::no_element:
        throw invalid_field(path, quoted(path) + " has no element " + std::to_string(failure.limit));
      case json_problem::unknown_member:
        throw invalid_field(std::string(failure.member_path),
                            "unrecognized request argument " + quoted(failure.member_path), "unknown_field");
      case json_problem::custom:
        break;
    }
    throw invalid_field(path, std::string(failure.message));
  }
};

}  // namespace

const json_rules& request_json_rules() {
  static const request_rules rules;
  return rules;
}

boost::json::object parse_json_object(std::string_view body) {
  if (const std::optional<std::size_t> offset = find_invalid_utf8(body)) {
    throw api_error(400, "invalid_request_error",
                    "request body is not valid UTF-8 (byte offset " + std::to_string(*offset) + ")", {},
                    "invalid_utf8");
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
                    "request body must be a JSON object, got " + std::string(json_type_name(value)), {},
                    "invalid_json");
  }
  return std::move(value.as_object());
}

}  // namespace troupe::api

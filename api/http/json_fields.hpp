#pragma once
// Request JSON: parsing a body, and the json_rules by which every request
// field is read (the reader is base/json_field.hpp). Every wrong type,
// range or size becomes a 400 api_error whose `param` names the field's
// path ("messages[2].content").

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <string>
#include <string_view>

#include "base/json_field.hpp"

namespace troupe::api {

/// Parses a request body that must be one JSON object (UTF-8 checked, depth
/// bounded); anything else is a 400 with code "invalid_json".
boost::json::object parse_json_object(std::string_view body);

/// How request JSON is read: null counts as absent, as in OpenAI's API; a
/// float without fraction is an integer (clients send 2.0); keys are echoed
/// shortened to 64 bytes; every failure is a 400 invalid_field naming the path.
const json_rules& request_json_rules();

/// A reader of request JSON `value` sitting at `path` ("" for the body,
/// "messages[2]" for one message).
inline json_field request_fields(const boost::json::value& value, std::string path = {}) {
  return json_field(value, request_json_rules(), std::move(path));
}

}  // namespace troupe::api

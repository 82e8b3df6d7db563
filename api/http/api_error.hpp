#pragma once
// The API's one error type and the one place exceptions become OpenAI-style
// error JSON: `{"error": {"message", "type", "param", "code"}}`.

#include <boost/json/object.hpp>
#include <stdexcept>
#include <string>

#include "api/http/http_types.hpp"
#include "troupe/request.hpp"

namespace troupe::api {

/// An error that reaches the client: HTTP status plus OpenAI error fields.
struct api_error : std::runtime_error {
  api_error(int status, std::string type, const std::string& message, std::string param = {}, std::string code = {});

  int status;             ///< HTTP status code
  std::string type;       ///< OpenAI error type, e.g. "invalid_request_error"
  std::string param;      ///< offending request field ("n", "messages[0].content"); empty: null
  std::string code;       ///< machine-readable code ("invalid_value"); empty: null
  int retry_after_s = 0;  ///< > 0: sent as a Retry-After header (seconds)
};

/// 400 invalid_request_error naming the field at fault.
api_error invalid_field(const std::string& param, const std::string& message, std::string code = "invalid_value");

/// Maps an engine failure to its status: invalid 400, too long 413,
/// overloaded 429, shutting down 503, cancelled 499, internal 500; the code is the
/// event's when it has one (prompt_queue_full, template_error), else the kind's.
api_error api_error_from_engine(const error_event& event);

/// The one place exceptions become API errors. Call only inside a catch
/// block: rethrows the current exception and classifies it (api_error as is,
/// bad_alloc and everything else as 500 without internal details).
api_error current_exception_as_api_error() noexcept;

/// The `{"message", "type", "param", "code"}` object of an error.
boost::json::object error_object(const api_error& error);

/// `{"error": {...}}` serialized.
std::string error_json(const api_error& error);

/// A complete reply for an error: status, JSON body and Retry-After.
http_reply error_reply(const api_error& error);

}  // namespace troupe::api

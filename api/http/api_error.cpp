#include "api/http/api_error.hpp"

#include <spdlog/spdlog.h>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <new>
#include <utility>

namespace troupe::api {

api_error::api_error(int status_code, std::string error_type, const std::string& message, std::string param_name,
                     std::string error_code)
    : std::runtime_error(message),
      status(status_code),
      type(std::move(error_type)),
      param(std::move(param_name)),
      code(std::move(error_code)) {}

api_error invalid_field(const std::string& param, const std::string& message, std::string code) {
  return api_error(400, "invalid_request_error", message, param, std::move(code));
}

api_error api_error_from_engine(const error_event& event) {
  // The engine's code, where it names the cause, wins over the kind's.
  const auto code = [&](const char* fallback) { return event.code.empty() ? std::string(fallback) : event.code; };
  switch (event.kind) {
    case error_kind::invalid_request:
      return api_error(400, "invalid_request_error", event.message, event.param, code("invalid_value"));
    case error_kind::too_long:
      return api_error(413, "invalid_request_error", event.message, event.param.empty() ? "prompt" : event.param,
                       "context_length_exceeded");
    case error_kind::overloaded: {
      api_error error(429, "rate_limit_error", event.message, event.param, code("overloaded"));
      error.retry_after_s = 1;
      return error;
    }
    case error_kind::shutting_down: {
      api_error error(503, "service_unavailable_error", event.message, {}, "shutting_down");
      error.retry_after_s = 5;
      return error;
    }
    case error_kind::cancelled:
      // The client that asked went away (nginx's 499); nobody normally reads this.
      return api_error(499, "invalid_request_error", event.message, {}, code("cancelled"));
    case error_kind::internal:
      break;
  }
  return api_error(500, "server_error", event.message.empty() ? "internal error" : event.message, {}, "internal_error");
}

api_error current_exception_as_api_error() noexcept {
  try {
    throw;
  } catch (const api_error& error) {
    return error;
  } catch (const std::bad_alloc&) {
    return api_error(500, "server_error", "out of memory while handling the request", {}, "internal_error");
  } catch (const std::exception& e) {
    // Internal messages can name files or addresses: they go to the log, not the client.
    spdlog::error("request failed: {}", e.what());
    return api_error(500, "server_error", "internal error while handling the request", {}, "internal_error");
  } catch (...) {
    return api_error(500, "server_error", "internal error while handling the request", {}, "internal_error");
  }
}

boost::json::object error_object(const api_error& error) {
  boost::json::object object;
  object["message"] = error.what();
  object["type"] = error.type;
  object["param"] = error.param.empty() ? boost::json::value() : boost::json::value(error.param);
  object["code"] = error.code.empty() ? boost::json::value() : boost::json::value(error.code);
  return object;
}

std::string error_json(const api_error& error) {
  boost::json::object wrapper;
  wrapper["error"] = error_object(error);
  return boost::json::serialize(wrapper);
}

http_reply error_reply(const api_error& error) {
  http_reply reply;
  reply.status = error.status;
  reply.body = error_json(error);
  if (error.retry_after_s > 0) reply.headers.push_back({"Retry-After", std::to_string(error.retry_after_s)});
  return reply;
}

}  // namespace troupe::api

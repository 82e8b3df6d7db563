#pragma once
// The multiplexed WebSocket protocol's messages (docs/api.md, "WebSocket"):
// client frames generate / cancel / ping, server frames delta / done /
// error / pong. Pure parsing and rendering; the session lives in ws_session.cpp.

#include <boost/json/value.hpp>
#include <span>
#include <string>
#include <string_view>

#include "api/http/api_error.hpp"
#include "api/http/openai_request.hpp"

namespace troupe::api {

/// One client frame, parsed and validated.
struct ws_client_message {
  enum class kind : std::uint8_t { generate, cancel, ping };
  kind type = kind::ping;
  boost::json::value id;         ///< the client's request id (string or integer), echoed in replies
  std::string id_key;            ///< `id` serialized: the key of the socket's request table
  parsed_generation generation;  ///< generate: the validated request (always streamed)
  boost::json::value ping_data;  ///< ping: echoed in the pong
};

/// A bad client frame; `id` is null when the frame had no usable id.
struct ws_message_error : api_error {
  ws_message_error(api_error error, boost::json::value request_id);
  boost::json::value id;
};

/// Parses one text frame. Throws ws_message_error.
ws_client_message parse_ws_message(std::string_view text, const request_limits& limits, const model_info& model);

/// `{"type":"delta","id":…,"chunk":{…}}` with the SSE chunk object.
std::string ws_delta_frame(const boost::json::value& id, const boost::json::value& chunk);
/// `{"type":"done","id":…,"finish_reason":…,"finish_reasons":[…],"usage":{…}}`;
/// finish_reason is choice 0's, finish_reasons every choice's by index
/// (OpenAI names: "stop", "length", "abort", "tool_calls").
std::string ws_done_frame(const boost::json::value& id, std::span<const std::string> reasons, const usage_info& usage);
/// `{"type":"error","id":…,"error":{message,type,param,code}}`.
std::string ws_error_frame(const boost::json::value& id, const api_error& error);
/// `{"type":"pong","data":…}`.
std::string ws_pong_frame(const boost::json::value& data);

}  // namespace troupe::api

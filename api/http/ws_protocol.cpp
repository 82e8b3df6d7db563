#include "api/http/ws_protocol.hpp"

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>

#include "api/http/json_fields.hpp"
#include "api/http/response_render.hpp"
#include "base/utf8.hpp"

namespace troupe::api {

namespace {

constexpr std::size_t max_id_bytes = 256;

boost::json::value read_id(const boost::json::object& frame) {
  const boost::json::value* id = frame.if_contains("id");
  if (id == nullptr || id->is_null()) throw invalid_field("id", "'id' is required", "missing_field");
  if (id->is_string()) {
    if (id->get_string().empty() || id->get_string().size() > max_id_bytes) {
      throw invalid_field("id", "'id' must be a string of 1 to " + std::to_string(max_id_bytes) + " bytes");
    }
    return *id;
  }
  if (json_integer(*id, /*integral_doubles=*/true)) return *id;
  throw invalid_field("id", "'id' must be a string or an integer, got " + std::string(json_type_name(*id)),
                      "invalid_type");
}

parsed_generation read_generate(boost::json::object frame, const request_limits& limits, const model_info& model) {
  const boost::json::value* endpoint = frame.if_contains("endpoint");
  if (endpoint == nullptr || !endpoint->is_string() ||
      (endpoint->get_string() != "chat" && endpoint->get_string() != "completions")) {
    throw invalid_field("endpoint", "'endpoint' must be \"chat\" or \"completions\"");
  }
  const bool chat = endpoint->get_string() == "chat";
  frame.erase("type");
  frame.erase("id");
  frame.erase("endpoint");
  frame["stream"] = true;  // a socket always streams; usage arrives in the done frame
  const boost::json::value body(std::move(frame));
  parsed_generation generation =
      chat ? parse_chat_request(body, limits, model) : parse_completions_request(body, limits, model);
  generation.include_usage = false;
  return generation;
}

}  // namespace

ws_message_error::ws_message_error(api_error error, boost::json::value request_id)
    : api_error(std::move(error)), id(std::move(request_id)) {}

ws_client_message parse_ws_message(std::string_view text, const request_limits& limits, const model_info& model) {
  boost::json::object frame;
  try {
    frame = parse_json_object(text);
  } catch (const api_error& error) {
    throw ws_message_error(error, nullptr);
  }
  ws_client_message message;
  const boost::json::value* type = frame.if_contains("type");
  const std::string type_text = (type != nullptr && type->is_string()) ? std::string(type->get_string()) : "";
  if (type_text == "ping") {
    message.type = ws_client_message::kind::ping;
    if (const boost::json::value* data = frame.if_contains("data")) message.ping_data = *data;
    return message;
  }
  boost::json::value id;
  try {
    if (type_text != "generate" && type_text != "cancel") {
      throw invalid_field("type",
                          "'type' must be \"generate\", \"cancel\" or \"ping\", got " +
                              (type == nullptr ? std::string("nothing") : truncate_utf8(type_text, 32)),
                          "unknown_type");
    }
    id = read_id(frame);
    message.id = id;
    message.id_key = boost::json::serialize(id);
    if (type_text == "cancel") {
      message.type = ws_client_message::kind::cancel;
    } else {
      message.type = ws_client_message::kind::generate;
      message.generation = read_generate(std::move(frame), limits, model);
    }
  } catch (const api_error& error) {
    throw ws_message_error(error, id);
  }
  return message;
}

std::string ws_delta_frame(const boost::json::value& id, const boost::json::value& chunk) {
  return boost::json::serialize(boost::json::object{{"type", "delta"}, {"id", id}, {"chunk", chunk}});
}

std::string ws_done_frame(const boost::json::value& id, std::span<const std::string> reasons, const usage_info& usage) {
  boost::json::array all;
  for (const std::string& reason : reasons) all.emplace_back(reason);
  boost::json::value first = reasons.empty() ? boost::json::value() : boost::json::value(all.front());
  return boost::json::serialize(boost::json::object{{"type", "done"},
                                                    {"id", id},
                                                    {"finish_reason", std::move(first)},
                                                    {"finish_reasons", std::move(all)},
                                                    {"usage", usage_json(usage)}});
}

std::string ws_error_frame(const boost::json::value& id, const api_error& error) {
  return boost::json::serialize(boost::json::object{{"type", "error"}, {"id", id}, {"error", error_object(error)}});
}

std::string ws_pong_frame(const boost::json::value& data) {
  return boost::json::serialize(boost::json::object{{"type", "pong"}, {"data", data}});
}

}  // namespace troupe::api

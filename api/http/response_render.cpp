#include "api/http/response_render.hpp"

#include <algorithm>
#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>
#include <cctype>
#include <charconv>
#include <cmath>
#include <random>

#include "base/utf8.hpp"

namespace troupe::api {

namespace {

/// Text for a JSON string: token texts can be partial characters, and each
/// ill-formed byte becomes one U+FFFD.
std::string json_text(std::string_view text) { return utf8_lossy(text, utf8_repair::per_byte); }

/// The float's shortest decimal as a double (so -0.1f prints as -0.1, not
/// -0.10000000149…). JSON has no infinities; OpenAI reports those as -9999.
double json_logprob(float logprob) {
  if (!std::isfinite(logprob)) return -9999.0;
  char text[32];
  const auto end = std::to_chars(text, text + sizeof text, logprob).ptr;
  double value = 0.0;
  std::from_chars(text, end, value);
  return value;
}

boost::json::array byte_values(std::string_view text) {
  boost::json::array bytes;
  for (const char c : text) bytes.emplace_back(static_cast<int>(static_cast<unsigned char>(c)));
  return bytes;
}

boost::json::value stop_reason_json(const std::optional<std::string>& stop_reason) {
  return stop_reason ? boost::json::value(json_text(*stop_reason)) : boost::json::value();
}

/// A complete response's assistant message: content (null when only tools
/// were called) and tool_calls.
boost::json::object chat_message_json(const std::string& text, std::span<const rendered_tool_call> calls) {
  boost::json::object message{{"role", "assistant"}};
  message["content"] = calls.empty() || !text.empty() ? boost::json::value(text) : boost::json::value();
  if (calls.empty()) return message;
  boost::json::array tool_calls;
  for (const rendered_tool_call& call : calls) {
    tool_calls.push_back({{"id", call.id},
                          {"type", "function"},
                          {"function", {{"name", json_text(call.name)}, {"arguments", json_text(call.arguments)}}}});
  }
  message["tool_calls"] = std::move(tool_calls);
  return message;
}

}  // namespace

std::string request_id_for(std::string_view given) {
  const bool plain = !given.empty() && given.size() <= 128 && std::all_of(given.begin(), given.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == ':';
  });
  return plain ? std::string(given) : random_hex(16);
}

std::string http_chunk(std::string_view data) {
  char size[2 * sizeof(std::size_t)];
  const char* end = std::to_chars(size, size + sizeof size, data.size(), 16).ptr;
  std::string chunk(static_cast<const char*>(size), end);
  chunk.reserve(chunk.size() + data.size() + 4);
  chunk += "\r\n";
  chunk += data;
  chunk += "\r\n";
  return chunk;
}

std::string random_hex(std::size_t bytes) {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  static constexpr char digits[] = "0123456789abcdef";
  std::string text;
  text.reserve(bytes * 2);
  for (std::size_t i = 0; i < bytes; ++i) {
    const auto byte = static_cast<unsigned>(generator() & 0xFF);
    text += digits[byte >> 4];
    text += digits[byte & 0xF];
  }
  return text;
}

std::string make_response_id(endpoint_kind endpoint) {
  return (endpoint == endpoint_kind::chat ? "chatcmpl-" : "cmpl-") + random_hex(16);
}

std::string make_tool_call_id(tool_call_family family) {
  if (family != tool_call_family::mistral) return "call_" + random_hex(12);
  thread_local std::mt19937_64 generator{std::random_device{}()};
  static constexpr std::string_view alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id(9, 'a');
  for (char& c : id) c = alphabet[generator() % alphabet.size()];
  return id;
}

const char* chat_finish_reason(finish_reason reason, bool called_tools) {
  return called_tools && reason == finish_reason::stop ? "tool_calls" : finish_reason_name(reason);
}

boost::json::object usage_json(const usage_info& usage) {
  boost::json::object object;
  object["prompt_tokens"] = usage.prompt_tokens;
  object["completion_tokens"] = usage.completion_tokens;
  object["total_tokens"] = usage.prompt_tokens + usage.completion_tokens;
  object["prompt_tokens_details"] = boost::json::object{{"cached_tokens", usage.cached_prompt_tokens}};
  return object;
}

boost::json::object completion_logprobs_json(std::span<const token_logprobs> tokens, std::size_t& text_offset) {
  boost::json::array texts, logprobs, tops, offsets;
  for (const token_logprobs& token : tokens) {
    const std::string text = json_text(token.text);
    texts.emplace_back(text);
    logprobs.emplace_back(json_logprob(token.logprob));
    boost::json::object top;
    for (const auto& [alternative, logprob] : token.top) top.emplace(json_text(alternative), json_logprob(logprob));
    top.emplace(text, json_logprob(token.logprob));  // kept only when not among the alternatives
    tops.emplace_back(std::move(top));
    offsets.emplace_back(text_offset);
    text_offset += token.text.size();
  }
  return {{"tokens", std::move(texts)},
          {"token_logprobs", std::move(logprobs)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

boost::json::object chat_logprobs_json(std::span<const token_logprobs> tokens) {
  boost::json::array content;
  for (const token_logprobs& token : tokens) {
    boost::json::array top;
    for (const auto& [alternative, logprob] : token.top) {
      top.emplace_back(boost::json::object{
          {"token", json_text(alternative)}, {"logprob", json_logprob(logprob)}, {"bytes", byte_values(alternative)}});
    }
    content.emplace_back(boost::json::object{{"token", json_text(token.text)},
                                             {"logprob", json_logprob(token.logprob)},
                                             {"bytes", byte_values(token.text)},
                                             {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

boost::json::object response_json(const response_identity& identity, std::span<const choice_result> choices,
                                  const usage_info& usage, bool with_logprobs) {
  const bool chat = identity.endpoint == endpoint_kind::chat;
  boost::json::array choice_array;
  for (const choice_result& choice : choices) {
    boost::json::object entry;
    entry["index"] = choice.index;
    const std::string text = json_text(choice.text);
    if (chat) {
      entry["message"] = chat_message_json(text, choice.tool_calls);
    } else {
      entry["text"] = text;
    }
    boost::json::value logprobs;
    if (with_logprobs) {
      std::size_t offset = choice.logprob_text_offset;
      logprobs = chat ? chat_logprobs_json(choice.logprobs) : completion_logprobs_json(choice.logprobs, offset);
    }
    entry["logprobs"] = std::move(logprobs);
    entry["finish_reason"] =
        chat ? chat_finish_reason(choice.reason, !choice.tool_calls.empty()) : finish_reason_name(choice.reason);
    entry["stop_reason"] = stop_reason_json(choice.stop_reason);
    choice_array.emplace_back(std::move(entry));
  }
  return {{"id", identity.id},
          {"object", chat ? "chat.completion" : "text_completion"},
          {"created", identity.created},
          {"model", identity.model},
          {"choices", std::move(choice_array)},
          {"usage", usage_json(usage)}};
}

chunk_builder::chunk_builder(response_identity identity, bool usage_field)
    : identity_(std::move(identity)), usage_field_(usage_field) {}

boost::json::object chunk_builder::chunk(boost::json::object choice) const {
  const bool chat = identity_.endpoint == endpoint_kind::chat;
  boost::json::object object{{"id", identity_.id},
                             {"object", chat ? "chat.completion.chunk" : "text_completion"},
                             {"created", identity_.created},
                             {"model", identity_.model},
                             {"choices", boost::json::array{std::move(choice)}}};
  if (usage_field_) object["usage"] = nullptr;
  return object;
}

boost::json::object chunk_builder::role(int index) const {
  return chunk({{"index", index},
                {"delta", boost::json::object{{"role", "assistant"}, {"content", ""}}},
                {"logprobs", nullptr},
                {"finish_reason", nullptr}});
}

boost::json::object chunk_builder::text(int index, std::string_view text, boost::json::value logprobs) const {
  boost::json::object choice{{"index", index}};
  if (identity_.endpoint == endpoint_kind::chat) {
    choice["delta"] = boost::json::object{{"content", json_text(text)}};
  } else {
    choice["text"] = json_text(text);
  }
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = nullptr;
  return chunk(std::move(choice));
}

boost::json::object chunk_builder::tool_call_start(int index, int call_index, const rendered_tool_call& call) const {
  boost::json::object function{{"name", json_text(call.name)}, {"arguments", ""}};
  boost::json::object entry{{"index", call_index}, {"id", call.id}, {"type", "function"}, {"function", function}};
  return chunk({{"index", index},
                {"delta", {{"tool_calls", boost::json::array{std::move(entry)}}}},
                {"logprobs", nullptr},
                {"finish_reason", nullptr}});
}

boost::json::object chunk_builder::tool_call_arguments(int index, int call_index, std::string_view arguments) const {
  boost::json::object entry{{"index", call_index}, {"function", {{"arguments", json_text(arguments)}}}};
  return chunk({{"index", index},
                {"delta", {{"tool_calls", boost::json::array{std::move(entry)}}}},
                {"logprobs", nullptr},
                {"finish_reason", nullptr}});
}

boost::json::object chunk_builder::finish(int index, finish_reason reason,
                                          const std::optional<std::string>& stop_reason, bool called_tools) const {
  boost::json::object choice{{"index", index}};
  if (identity_.endpoint == endpoint_kind::chat) {
    choice["delta"] = boost::json::object{};
  } else {
    choice["text"] = "";
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = chat_finish_reason(reason, called_tools);
  choice["stop_reason"] = stop_reason_json(stop_reason);
  return chunk(std::move(choice));
}

boost::json::object chunk_builder::usage(const usage_info& usage) const {
  boost::json::object object = chunk({});
  object["choices"] = boost::json::array{};
  object["usage"] = usage_json(usage);
  return object;
}

std::string sse_event(const boost::json::value& payload) {
  std::string event = "data: ";
  event += boost::json::serialize(payload);
  event += "\n\n";
  return event;
}

}  // namespace troupe::api

#include "model/chat/tool_call_formats.hpp"

#include <algorithm>
#include <boost/json/value.hpp>
#include <initializer_list>
#include <optional>

#include "model/chat/errors.hpp"
#include "model/chat/exact_json.hpp"
#include "model/chat/json_bridge.hpp"

namespace troupe::tool_call_detail {

namespace {

constexpr std::string_view whitespace = " \t\r\n";
/// Nesting a call's JSON may have (the template engine's value depth bounds it too).
constexpr std::size_t max_json_depth = 64;

std::string_view trim(std::string_view text) {
  const std::size_t first = text.find_first_not_of(whitespace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(whitespace) - first + 1);
}

std::size_t skip_whitespace(std::string_view text, std::size_t pos) {
  while (pos < text.size() && whitespace.find(text[pos]) != std::string_view::npos) ++pos;
  return pos;
}

bool starts_with(std::string_view text, std::size_t pos, std::string_view prefix) {
  return text.substr(pos, prefix.size()) == prefix;
}

std::optional<boost::json::value> parse_json(std::string_view text) {
  boost::system::error_code ec;
  boost::json::value value = parse_json_exact(text, ec, max_json_depth);
  if (ec) return std::nullopt;
  return value;
}

/// json.dumps(value) as transformers and vLLM write arguments; nullopt when
/// the value is too deep for the template engine's values.
std::optional<std::string> dumps(const boost::json::value& value) {
  try {
    return jinja::to_json_text(jinja::from_json(value), {});
  } catch (const jinja::script_error&) {
    return std::nullopt;
  }
}

/// Arguments given as an object, or as a string holding one.
std::optional<std::string> arguments_text(const boost::json::value& arguments) {
  if (arguments.is_object()) return dumps(arguments);
  if (!arguments.is_string()) return std::nullopt;
  const std::optional<boost::json::value> inner = parse_json(arguments.get_string());
  if (!inner || !inner->is_object()) return std::nullopt;
  return dumps(*inner);
}

/// `{"name": …, <one of argument_keys>: {…}}`; missing arguments are `{}`
/// unless `require_arguments`.
std::optional<parsed_call> call_from_json(const boost::json::value& value,
                                          std::initializer_list<std::string_view> argument_keys,
                                          bool require_arguments) {
  const boost::json::object* object = value.if_object();
  if (object == nullptr) return std::nullopt;
  const boost::json::value* name = object->if_contains("name");
  if (name == nullptr || !name->is_string() || trim(name->get_string()).empty()) return std::nullopt;
  parsed_call call{std::string(trim(name->get_string())), "{}"};
  for (const std::string_view key : argument_keys) {
    if (const boost::json::value* arguments = object->if_contains(key)) {
      std::optional<std::string> text = arguments_text(*arguments);
      if (!text) return std::nullopt;
      call.arguments = std::move(*text);
      return call;
    }
  }
  if (require_arguments) return std::nullopt;
  return call;
}

scan_result malformed(std::size_t consumed) { return {scan_status::malformed, {}, consumed}; }

scan_result waiting(std::string_view region, bool at_end) { return at_end ? malformed(region.size()) : scan_result{}; }

constexpr std::string_view python_tag = "<|python_tag|>";

/// One JSON object after an optional <|python_tag|>.
scan_result scan_llama(std::string_view region, bool at_end) {
  std::size_t pos = starts_with(region, 0, python_tag) ? python_tag.size() : 0;
  pos = skip_whitespace(region, pos);
  if (pos == region.size()) return waiting(region, at_end);
  if (region[pos] != '{') return malformed(pos);
  const std::size_t end = json_container_end(region, pos);
  if (end == std::string_view::npos) return waiting(region, at_end);
  const std::optional<boost::json::value> value = parse_json(region.substr(pos, end - pos));
  std::optional<parsed_call> call;
  if (value) call = call_from_json(*value, {"parameters", "arguments"}, true);
  if (!call) return malformed(end);
  return {scan_status::calls, {std::move(*call)}, end};
}

constexpr std::string_view hermes_open = "<tool_call>";
constexpr std::string_view hermes_close = "</tool_call>";

/// `<tool_call>{…}</tool_call>`; a complete call whose close tag never came is accepted at the end.
scan_result scan_hermes(std::string_view region, bool at_end) {
  const std::size_t close = region.find(hermes_close, hermes_open.size());
  if (close == std::string_view::npos && !at_end) return {};
  const std::size_t body_end = close == std::string_view::npos ? region.size() : close;
  const std::size_t end = close == std::string_view::npos ? region.size() : close + hermes_close.size();
  const std::optional<boost::json::value> value =
      parse_json(trim(region.substr(hermes_open.size(), body_end - hermes_open.size())));
  std::optional<parsed_call> call;
  if (value) call = call_from_json(*value, {"arguments", "parameters"}, false);
  if (!call) return malformed(end);
  return {scan_status::calls, {std::move(*call)}, end};
}

constexpr std::string_view mistral_marker = "[TOOL_CALLS]";

/// `[TOOL_CALLS]` then a JSON array of calls (or one call object). At the
/// start of the output the array may come alone: [TOOL_CALLS] is a control
/// token, which skip_special_tokens drops from the text.
scan_result scan_mistral(std::string_view region, bool at_end) {
  if (region.size() < mistral_marker.size() && mistral_marker.starts_with(region) && !at_end) return {};
  const std::size_t after_marker = region.starts_with(mistral_marker) ? mistral_marker.size() : 0;
  const std::size_t pos = skip_whitespace(region, after_marker);
  if (pos == region.size()) return waiting(region, at_end);
  if (region[pos] != '[' && region[pos] != '{') return malformed(std::max<std::size_t>(after_marker, 1));
  const std::size_t end = json_container_end(region, pos);
  if (end == std::string_view::npos) return waiting(region, at_end);
  const std::optional<boost::json::value> value = parse_json(region.substr(pos, end - pos));
  if (!value) return malformed(end);
  scan_result result{scan_status::calls, {}, end};
  const boost::json::array single{*value};
  const boost::json::array& items = value->is_array() ? value->get_array() : single;
  for (const boost::json::value& item : items) {
    std::optional<parsed_call> call = call_from_json(item, {"arguments", "parameters"}, false);
    if (!call) return malformed(end);
    result.calls.push_back(std::move(*call));
  }
  if (result.calls.empty()) return malformed(end);
  return result;
}

constexpr std::string_view deepseek_calls_begin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view deepseek_calls_end = "<｜tool▁calls▁end｜>";
constexpr std::string_view deepseek_call_begin = "<｜tool▁call▁begin｜>";
constexpr std::string_view deepseek_call_end = "<｜tool▁call▁end｜>";
constexpr std::string_view deepseek_sep = "<｜tool▁sep｜>";

/// The JSON text of a call body's arguments: a ```json fence around it is optional.
std::string_view unfence(std::string_view text) {
  text = trim(text);
  if (text.starts_with("```")) {
    text.remove_prefix(3);
    if (text.starts_with("json")) text.remove_prefix(4);
  }
  if (text.ends_with("```")) text.remove_suffix(3);
  return trim(text);
}

/// `function<｜tool▁sep｜>name\n```json\n{…}\n```` between call begin and end.
std::optional<parsed_call> deepseek_call(std::string_view inner) {
  const std::size_t sep = inner.find(deepseek_sep);
  if (sep == std::string_view::npos || trim(inner.substr(0, sep)) != "function") return std::nullopt;
  const std::string_view rest = inner.substr(sep + deepseek_sep.size());
  const std::size_t newline = rest.find('\n');
  const std::string_view name = trim(rest.substr(0, newline));
  if (name.empty() || newline == std::string_view::npos) return std::nullopt;
  const std::optional<boost::json::value> arguments = parse_json(unfence(rest.substr(newline + 1)));
  if (!arguments || !arguments->is_object()) return std::nullopt;
  std::optional<std::string> text = dumps(*arguments);
  if (!text) return std::nullopt;
  return parsed_call{std::string(name), std::move(*text)};
}

/// One `<｜tool▁call▁begin｜>…<｜tool▁call▁end｜>`, after the outer begin tag when present.
scan_result scan_deepseek(std::string_view region, bool at_end) {
  std::size_t pos = 0;
  if (starts_with(region, 0, deepseek_calls_begin)) pos = skip_whitespace(region, deepseek_calls_begin.size());
  const std::string_view rest = region.substr(pos);
  if (!rest.starts_with(deepseek_call_begin)) {
    if (deepseek_call_begin.starts_with(rest)) return waiting(region, at_end);
    return malformed(pos);
  }
  const std::size_t end = region.find(deepseek_call_end, pos);
  if (end == std::string_view::npos) return waiting(region, at_end);
  const std::size_t inner = pos + deepseek_call_begin.size();
  std::optional<parsed_call> call = deepseek_call(region.substr(inner, end - inner));
  if (!call) return malformed(end + deepseek_call_end.size());
  return {scan_status::calls, {std::move(*call)}, end + deepseek_call_end.size()};
}

}  // namespace

std::size_t json_container_end(std::string_view text, std::size_t start) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = start; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

const call_format* format_of(tool_call_family family) {
  static const call_format llama{{}, {python_tag, "{"}, {}, ';', scan_llama};
  static const call_format hermes{{hermes_open}, {}, {}, 0, scan_hermes};
  static const call_format mistral{{mistral_marker}, {"["}, {}, 0, scan_mistral};
  static const call_format deepseek{
      {deepseek_calls_begin, deepseek_call_begin}, {}, {deepseek_calls_end}, 0, scan_deepseek};
  switch (family) {
    case tool_call_family::llama3_json:
      return &llama;
    case tool_call_family::hermes:
      return &hermes;
    case tool_call_family::mistral:
      return &mistral;
    case tool_call_family::deepseek_v3:
      return &deepseek;
    case tool_call_family::none:
      break;
  }
  return nullptr;
}

}  // namespace troupe::tool_call_detail

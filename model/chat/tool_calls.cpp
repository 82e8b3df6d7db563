#include "model/chat/tool_calls.hpp"

#include <algorithm>
#include <array>
#include <boost/json/value.hpp>
#include <utility>

#include "model/chat/errors.hpp"
#include "model/chat/exact_json.hpp"
#include "model/chat/json_bridge.hpp"
#include "model/chat/tool_call_formats.hpp"

namespace troupe {

namespace {

using tool_call_detail::call_format;
using tool_call_detail::format_of;
using tool_call_detail::scan_result;
using tool_call_detail::scan_status;

constexpr auto family_names = std::to_array<std::pair<tool_call_family, std::string_view>>({
    {tool_call_family::none, "none"},
    {tool_call_family::llama3_json, "llama3_json"},
    {tool_call_family::hermes, "hermes"},
    {tool_call_family::mistral, "mistral"},
    {tool_call_family::deepseek_v3, "deepseek_v3"},
});

constexpr std::string_view whitespace = " \t\r\n";

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

/// Where a call may start right at the start of the output or after a call.
std::vector<std::string_view> leading_markers(const call_format& format) {
  std::vector<std::string_view> all = format.markers;
  all.insert(all.end(), format.start_markers.begin(), format.start_markers.end());
  return all;
}

/// True when `text` is a proper prefix of one of `candidates`.
bool may_become_one_of(std::string_view text, const std::vector<std::string_view>& candidates) {
  return std::any_of(candidates.begin(), candidates.end(), [&](std::string_view candidate) {
    return text.size() < candidate.size() && candidate.starts_with(text);
  });
}

/// The candidate `text` starts with, or an empty view.
std::string_view leading_one_of(std::string_view text, const std::vector<std::string_view>& candidates) {
  for (const std::string_view candidate : candidates) {
    if (text.starts_with(candidate)) return candidate;
  }
  return {};
}

void emit_content(std::string text, std::vector<tool_call_event>& out) {
  if (text.empty()) return;
  if (!out.empty() && out.back().index < 0) {
    out.back().text += text;
  } else {
    out.push_back({-1, std::move(text), {}, {}});
  }
}

}  // namespace

std::string_view tool_call_family_name(tool_call_family family) {
  for (const auto& [value, name] : family_names) {
    if (value == family) return name;
  }
  return "none";
}

std::optional<tool_call_family> parse_tool_call_family(std::string_view name) {
  for (const auto& [value, family_name] : family_names) {
    if (family_name == name) return value;
  }
  return std::nullopt;
}

tool_call_family detect_tool_call_family(std::string_view template_text) {
  if (contains(template_text, "<｜tool▁calls▁begin｜>")) return tool_call_family::deepseek_v3;
  if (contains(template_text, "[TOOL_CALLS]")) return tool_call_family::mistral;
  if (contains(template_text, "<tool_call>")) return tool_call_family::hermes;
  // Llama 3.x teaches `{"name": function name, "parameters": …}` and replays calls in that shape.
  if (contains(template_text, "<|start_header_id|>") && contains(template_text, "\"parameters\": "))
    return tool_call_family::llama3_json;
  return tool_call_family::none;
}

std::optional<tool_call_family> resolve_tool_call_family(std::string_view knob, std::string_view template_text) {
  if (knob == "auto") return detect_tool_call_family(template_text);
  return parse_tool_call_family(knob);
}

bool tool_call_arguments_as_object(tool_call_family family) {
  return family == tool_call_family::llama3_json || family == tool_call_family::hermes ||
         family == tool_call_family::mistral;
}

void adapt_tool_call_arguments(boost::json::object& message, tool_call_family family) {
  boost::json::value* calls = message.if_contains("tool_calls");
  if (family == tool_call_family::none || calls == nullptr || !calls->is_array()) return;
  for (boost::json::value& call : calls->get_array()) {
    boost::json::value* function = call.is_object() ? call.get_object().if_contains("function") : nullptr;
    boost::json::value* arguments =
        function != nullptr && function->is_object() ? function->get_object().if_contains("arguments") : nullptr;
    if (arguments == nullptr) continue;
    if (tool_call_arguments_as_object(family) && arguments->is_string()) {
      boost::system::error_code ec;
      boost::json::value parsed = parse_json_exact(arguments->get_string(), ec, 64);
      if (!ec && parsed.is_object()) *arguments = std::move(parsed);
    } else if (!tool_call_arguments_as_object(family) && arguments->is_object()) {
      try {
        *arguments = jinja::to_json_text(jinja::from_json(*arguments), {});
      } catch (const jinja::script_error&) {
        // Too deep for the template engine: rendering it reports the error.
      }
    }
  }
}

tool_call_parser::tool_call_parser(tool_call_family family) : family_(family), state_(state::content) {
  const call_format* format = format_of(family_);
  if (format != nullptr && !format->start_markers.empty()) state_ = state::start;
}

std::vector<tool_call_event> tool_call_parser::feed(std::string_view text) {
  std::vector<tool_call_event> out;
  if (format_of(family_) == nullptr) {
    emit_content(std::string(text), out);
    return out;
  }
  buffer_.append(text);
  run(false, out);
  return out;
}

std::vector<tool_call_event> tool_call_parser::finish() {
  std::vector<tool_call_event> out;
  run(true, out);
  emit_content(std::exchange(buffer_, {}), out);
  return out;
}

void tool_call_parser::run(bool at_end, std::vector<tool_call_event>& out) {
  if (format_of(family_) == nullptr) return;
  for (bool progress = true; progress && !buffer_.empty();) {
    switch (state_) {
      case state::start:
        progress = step_start(at_end, out);
        break;
      case state::content:
        progress = step_content(at_end, out);
        break;
      case state::region:
        progress = step_region(at_end, out);
        break;
      case state::between:
        progress = step_between(at_end, out);
        break;
    }
  }
}

bool tool_call_parser::step_start(bool at_end, std::vector<tool_call_event>& out) {
  const std::vector<std::string_view> markers = leading_markers(*format_of(family_));
  const std::size_t first = std::min(buffer_.find_first_not_of(whitespace), buffer_.size());
  const std::string_view rest = std::string_view(buffer_).substr(first);
  if (!leading_one_of(rest, markers).empty()) {
    leading_ = buffer_.substr(0, first);
    buffer_.erase(0, first);
    state_ = state::region;
    return true;
  }
  if (!at_end && (rest.empty() || may_become_one_of(rest, markers))) return false;
  state_ = state::content;
  return step_content(at_end, out);
}

bool tool_call_parser::step_content(bool at_end, std::vector<tool_call_event>& out) {
  const call_format& format = *format_of(family_);
  std::size_t earliest = std::string::npos;
  for (const std::string_view marker : format.markers) earliest = std::min(earliest, buffer_.find(marker));
  if (earliest != std::string::npos) {
    emit_content(buffer_.substr(0, earliest), out);
    buffer_.erase(0, earliest);
    state_ = state::region;
    return true;
  }
  std::size_t held = 0;  // the longest tail that may still grow into a marker
  for (std::size_t length = std::min<std::size_t>(buffer_.size(), 64); length > 0 && held == 0 && !at_end; --length) {
    if (may_become_one_of(std::string_view(buffer_).substr(buffer_.size() - length), format.markers)) held = length;
  }
  emit_content(buffer_.substr(0, buffer_.size() - held), out);
  buffer_.erase(0, buffer_.size() - held);
  return false;
}

bool tool_call_parser::step_region(bool at_end, std::vector<tool_call_event>& out) {
  const call_format& format = *format_of(family_);
  scan_result result = format.scan(buffer_, at_end);
  if (result.status == scan_status::incomplete) return false;
  if (result.status == scan_status::malformed) {
    emit_content(std::exchange(leading_, {}) + buffer_.substr(0, result.consumed), out);
    state_ = state::content;
  } else {
    leading_.clear();
    for (tool_call_detail::parsed_call& call : result.calls) {
      out.push_back({calls_++, {}, std::move(call.name), std::move(call.arguments)});
    }
    state_ = state::between;
  }
  buffer_.erase(0, result.consumed);
  return true;
}

bool tool_call_parser::step_between(bool at_end, std::vector<tool_call_event>& out) {
  const call_format& format = *format_of(family_);
  const std::vector<std::string_view> markers = leading_markers(format);
  std::size_t pos = std::min(buffer_.find_first_not_of(whitespace), buffer_.size());
  if (format.separator != 0 && pos < buffer_.size() && buffer_[pos] == format.separator) {
    pos = std::min(buffer_.find_first_not_of(whitespace, pos + 1), buffer_.size());
  }
  const std::string_view rest = std::string_view(buffer_).substr(pos);
  if (const std::string_view closer = leading_one_of(rest, format.closers); !closer.empty()) {
    buffer_.erase(0, pos + closer.size());
    return true;
  }
  if (!leading_one_of(rest, markers).empty()) {
    leading_ = buffer_.substr(0, pos);
    buffer_.erase(0, pos);
    state_ = state::region;
    return true;
  }
  if (rest.empty()) {
    if (at_end) buffer_.clear();  // separators after the last call are not content
    return false;
  }
  if (!at_end && (may_become_one_of(rest, markers) || may_become_one_of(rest, format.closers))) return false;
  state_ = state::content;
  return step_content(at_end, out);
}

parsed_tool_calls parse_tool_calls(tool_call_family family, std::string_view text) {
  tool_call_parser parser(family);
  std::vector<tool_call_event> events = parser.feed(text);
  std::vector<tool_call_event> rest = parser.finish();
  events.insert(events.end(), std::make_move_iterator(rest.begin()), std::make_move_iterator(rest.end()));
  parsed_tool_calls result;
  for (tool_call_event& event : events) {
    if (event.index < 0) {
      result.content += event.text;
    } else {
      result.calls.push_back(std::move(event));
    }
  }
  return result;
}

}  // namespace troupe

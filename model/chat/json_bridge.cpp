#include "model/chat/json_bridge.hpp"

#include <algorithm>
#include <cmath>

#include "model/chat/errors.hpp"
#include "model/chat/operators.hpp"
#include "model/chat/py_format.hpp"
#include "model/chat/unicode.hpp"

namespace troupe::jinja {

namespace {

value from_json_at(const boost::json::value& json, std::size_t depth) {
  if (depth > max_value_depth) throw script_error("ValueError", "input JSON is nested too deeply");
  switch (json.kind()) {
    case boost::json::kind::null:
      return value::none();
    case boost::json::kind::bool_:
      return value::boolean(json.get_bool());
    case boost::json::kind::int64:
      return value::integer(json.get_int64());
    case boost::json::kind::uint64: {
      std::uint64_t u = json.get_uint64();
      if (u > static_cast<std::uint64_t>(INT64_MAX))
        throw script_error("OverflowError", "input integer " + std::to_string(u) + " does not fit in 64 bits");
      return value::integer(static_cast<std::int64_t>(u));
    }
    case boost::json::kind::double_:
      return value::floating(json.get_double());
    case boost::json::kind::string: {
      std::string_view text = json.get_string();
      if (!is_valid_utf8(text)) throw script_error("ValueError", "input string is not valid UTF-8");
      return value::string(std::string(text));
    }
    case boost::json::kind::array: {
      std::vector<value> items;
      items.reserve(json.get_array().size());
      for (const auto& item : json.get_array()) items.push_back(from_json_at(item, depth + 1));
      return value::list(std::move(items));
    }
    case boost::json::kind::object: {
      std::vector<std::pair<value, value>> entries;
      entries.reserve(json.get_object().size());
      for (const auto& [k, v] : json.get_object()) {
        if (!is_valid_utf8(k)) throw script_error("ValueError", "input object key is not valid UTF-8");
        entries.emplace_back(value::string(std::string(k)), from_json_at(v, depth + 1));
      }
      return value::dict(std::move(entries));
    }
  }
  return value::none();
}

void append_escaped(std::string& out, std::string_view text, bool ensure_ascii) {
  static constexpr char hex[] = "0123456789abcdef";
  auto append_u = [&](char32_t unit) {
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out.push_back(hex[(unit >> shift) & 0xF]);
  };
  out.push_back('"');
  for (char32_t c : to_code_points(text)) {
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
      if (c >= 0x10000) {
        char32_t v = c - 0x10000;
        append_u(0xD800 | (v >> 10));
        append_u(0xDC00 | (v & 0x3FF));
      } else {
        append_u(c);
      }
    } else {
      append_utf8(out, c);
    }
  }
  out.push_back('"');
}

std::string float_text(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return py_float_repr(d);
}

class json_writer {
 public:
  explicit json_writer(const json_dump_options& o)
      : options_(o),
        item_sep_(o.item_separator.value_or(o.indent ? "," : ", ")),
        key_sep_(o.key_separator.value_or(": ")) {}

  void write(const value& v, std::size_t level) {
    switch (v.kind()) {
      case value_kind::none:
        put("null");
        return;
      case value_kind::boolean:
        put(v.as_bool() ? "true" : "false");
        return;
      case value_kind::integer:
        put(std::to_string(v.as_int()));
        return;
      case value_kind::floating:
        put(float_text(v.as_float()));
        return;
      case value_kind::string:
        write_string(v.as_string());
        return;
      case value_kind::sequence:
        if (v.is_list_or_tuple()) return write_array(v.items(), level);
        break;
      case value_kind::dict:
        return write_object(v.as_dict(), level);
      default:
        break;
    }
    throw script_error("TypeError", "Object of type " + python_type_name(v) + " is not JSON serializable");
  }

  std::string out;

 private:
  /// Escaping only lengthens a string, so its raw size is checked before the
  /// copy and the escaped size after.
  void write_string(std::string_view text) {
    require_room(2 + text.size());
    append_escaped(out, text, options_.ensure_ascii);
    require_room(0);
  }

  /// Appends separators and scalars, whose sizes the template controls.
  void put(std::string_view text) {
    require_room(text.size());
    out += text;
  }

  void require_room(std::size_t more) const {
    if (!fits_in(out.size(), more, 1, options_.max_bytes)) raise_string_limit("tojson text", options_.max_bytes);
  }

  void newline(std::size_t level) {
    if (!options_.indent) return;
    if (!fits_in(out.size() + 1, level, options_.indent->size(), options_.max_bytes))
      raise_string_limit("tojson indent at depth " + std::to_string(level), options_.max_bytes);
    out.push_back('\n');
    for (std::size_t i = 0; i < level; ++i) out += *options_.indent;
  }

  void write_array(const std::vector<value>& items, std::size_t level) {
    if (items.empty()) {
      out += "[]";
      return;
    }
    out.push_back('[');
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i > 0) put(item_sep_);
      newline(level + 1);
      write(items[i], level + 1);
    }
    newline(level);
    out.push_back(']');
  }

  std::string key_text(const value& key) {
    switch (key.kind()) {
      case value_kind::string:
        return key.as_string();
      case value_kind::integer:
        return std::to_string(key.as_int());
      case value_kind::floating:
        return float_text(key.as_float());
      case value_kind::boolean:
        return key.as_bool() ? "true" : "false";
      case value_kind::none:
        return "null";
      default:
        break;
    }
    throw script_error("TypeError", "keys must be str, int, float, bool or None, not " + python_type_name(key));
  }

  void write_object(const dict_data& dict, std::size_t level) {
    if (dict.entries.empty()) {
      out += "{}";
      return;
    }
    std::vector<const std::pair<value, value>*> entries;
    for (const auto& e : dict.entries) entries.push_back(&e);
    if (options_.sort_keys)
      std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return py_less(a->first, b->first); });
    out.push_back('{');
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) put(item_sep_);
      newline(level + 1);
      write_string(key_text(entries[i]->first));
      put(key_sep_);
      write(entries[i]->second, level + 1);
    }
    newline(level);
    out.push_back('}');
  }

  const json_dump_options& options_;
  std::string item_sep_;
  std::string key_sep_;
};

}  // namespace

value from_json(const boost::json::value& json) { return from_json_at(json, 1); }

std::string to_json_text(const value& v, const json_dump_options& options) {
  json_writer writer(options);
  writer.write(v, 0);
  return std::move(writer.out);
}

}  // namespace troupe::jinja

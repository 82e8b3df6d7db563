#include "model/python_json.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <vector>

#include "base/utf8.hpp"

namespace troupe {

namespace {

void append_hex_escape(std::string& out, unsigned code_unit) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "\\u%04x", code_unit);
  out += buffer;
}

void append_string(std::string& out, std::string_view text, bool ensure_ascii) {
  out += '"';
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80 && ensure_ascii) {
      const char32_t code = decode_utf8(text, i);  // ill-formed bytes: U+FFFD
      if (code >= 0x10000) {
        const char32_t offset = code - 0x10000;
        append_hex_escape(out, 0xd800 + static_cast<unsigned>(offset >> 10));
        append_hex_escape(out, 0xdc00 + static_cast<unsigned>(offset & 0x3ff));
      } else {
        append_hex_escape(out, static_cast<unsigned>(code));
      }
      continue;
    }
    ++i;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          append_hex_escape(out, c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void append_value(std::string& out, const boost::json::value& value, const python_json_style& style, int depth);

void newline(std::string& out, int depth) {
  out += '\n';
  out.append(static_cast<std::size_t>(depth) * 2, ' ');
}

void append_object(std::string& out, const boost::json::object& object, const python_json_style& style, int depth) {
  if (object.empty()) {
    out += "{}";
    return;
  }
  std::vector<const boost::json::key_value_pair*> items;
  for (const auto& item : object) items.push_back(&item);
  if (style.sort_keys) {
    std::sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->key() < b->key(); });
  }
  out += '{';
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    newline(out, depth + 1);
    append_string(out, items[i]->key(), style.ensure_ascii);
    out += ": ";
    append_value(out, items[i]->value(), style, depth + 1);
  }
  newline(out, depth);
  out += '}';
}

void append_value(std::string& out, const boost::json::value& value, const python_json_style& style, int depth) {
  switch (value.kind()) {
    case boost::json::kind::null:
      out += "null";
      break;
    case boost::json::kind::bool_:
      out += value.get_bool() ? "true" : "false";
      break;
    case boost::json::kind::int64:
      out += std::to_string(value.get_int64());
      break;
    case boost::json::kind::uint64:
      out += std::to_string(value.get_uint64());
      break;
    case boost::json::kind::double_:
      out += python_float_repr(value.get_double());
      break;
    case boost::json::kind::string:
      append_string(out, value.get_string(), style.ensure_ascii);
      break;
    case boost::json::kind::object:
      append_object(out, value.get_object(), style, depth);
      break;
    case boost::json::kind::array: {
      const boost::json::array& array = value.get_array();
      if (array.empty()) {
        out += "[]";
        break;
      }
      out += '[';
      for (std::size_t i = 0; i < array.size(); ++i) {
        if (i > 0) out += ',';
        newline(out, depth + 1);
        append_value(out, array[i], style, depth + 1);
      }
      newline(out, depth);
      out += ']';
      break;
    }
  }
}

}  // namespace

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  if (value == 0.0) return std::signbit(value) ? "-0.0" : "0.0";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  const std::string_view scientific(buffer, static_cast<std::size_t>(result.ptr - buffer));
  const std::size_t e = scientific.find('e');
  const bool negative = scientific.front() == '-';
  std::string digits;
  for (char c : scientific.substr(negative ? 1 : 0, e - (negative ? 1 : 0))) {
    if (c != '.') digits += c;
  }
  const int exponent = std::stoi(std::string(scientific.substr(e + 1)));
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
    } else {
      const auto whole = static_cast<std::size_t>(exponent) + 1;
      if (digits.size() < whole) digits.append(whole - digits.size(), '0');
      out += digits.substr(0, whole) + "." + (digits.size() > whole ? digits.substr(whole) : "0");
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exponent_text[16];
  std::snprintf(exponent_text, sizeof exponent_text, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exponent_text;
}

std::string to_python_json(const boost::json::value& value, const python_json_style& style) {
  std::string out;
  append_value(out, value, style, 0);
  return out;
}

}  // namespace troupe

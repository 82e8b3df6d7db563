// str(), repr() and float formatting as CPython prints them.

#include "model/chat/py_format.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

#include "model/chat/errors.hpp"
#include "model/chat/unicode.hpp"

namespace troupe::jinja {

namespace {

/// Nesting bound for repr: deeper than any list a render may build, so it only
/// stops self-referencing namespaces (whose repr re-enters py_repr).
constexpr int max_repr_depth = static_cast<int>(max_value_depth) + 16;

/// repr depth across namespace objects, which call py_repr recursively.
thread_local int repr_nesting = 0;

/// The longest container text repr may build (repr_limit_scope).
thread_local std::size_t repr_byte_limit = std::numeric_limits<std::size_t>::max();

struct repr_nesting_guard {
  repr_nesting_guard() {
    if (++repr_nesting > max_repr_depth) {
      --repr_nesting;
      throw script_error("RecursionError", "maximum recursion depth exceeded while getting the repr of an object");
    }
  }
  ~repr_nesting_guard() { --repr_nesting; }
};

void append_hex(std::string& out, char32_t c, int digits) {
  static constexpr char hex[] = "0123456789abcdef";
  for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4) out.push_back(hex[(c >> shift) & 0xF]);
}

std::string sequence_repr(const value& v);
std::string repr_at(const value& v);

/// Appends an item's repr to its container's, checked as it goes: a list
/// holding one big string many times must fail before it is printed whole.
void append_item_repr(std::string& out, const value& item) {
  out += repr_at(item);
  if (out.size() > repr_byte_limit) raise_string_limit("the text of a list or dict", repr_byte_limit);
}

std::string repr_at(const value& v) {
  repr_nesting_guard guard;
  switch (v.kind()) {
    case value_kind::undefined:
      return "Undefined";
    case value_kind::none:
      return "None";
    case value_kind::boolean:
      return v.as_bool() ? "True" : "False";
    case value_kind::integer:
      return std::to_string(v.as_int());
    case value_kind::floating:
      return py_float_repr(v.as_float());
    case value_kind::string:
      return v.is_markup() ? "Markup(" + py_string_repr(v.as_string()) + ")" : py_string_repr(v.as_string());
    case value_kind::sequence:
      return sequence_repr(v);
    case value_kind::dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, item] : v.as_dict().entries) {
        if (!first) out += ", ";
        first = false;
        append_item_repr(out, k);
        out += ": ";
        append_item_repr(out, item);
      }
      return out + "}";
    }
    case value_kind::object:
      return v.as_object().repr();
  }
  return "";
}

std::string join_reprs(const std::vector<value>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    append_item_repr(out, items[i]);
  }
  return out;
}

std::string sequence_repr(const value& v) {
  const sequence_data& s = v.as_sequence();
  switch (s.flavor) {
    case sequence_flavor::list:
      return "[" + join_reprs(s.items) + "]";
    case sequence_flavor::tuple:
      return "(" + join_reprs(s.items) + (s.items.size() == 1 ? ",)" : ")");
    case sequence_flavor::range: {
      std::string out = "range(" + std::to_string(s.range_start) + ", " + std::to_string(s.range_stop);
      if (s.range_step != 1) out += ", " + std::to_string(s.range_step);
      return out + ")";
    }
    case sequence_flavor::dict_keys:
      return "dict_keys([" + join_reprs(s.items) + "])";
    case sequence_flavor::dict_values:
      return "dict_values([" + join_reprs(s.items) + "])";
    case sequence_flavor::dict_items:
      return "dict_items([" + join_reprs(s.items) + "])";
    case sequence_flavor::generator:
    case sequence_flavor::iterator:
      return "<" + s.iterator_type + " object>";
  }
  return "";
}

}  // namespace

repr_limit_scope::repr_limit_scope(std::size_t max_bytes) : saved_(repr_byte_limit) { repr_byte_limit = max_bytes; }

repr_limit_scope::~repr_limit_scope() { repr_byte_limit = saved_; }

std::string py_repr(const value& v) { return repr_at(v); }

std::string py_str(const value& v) {
  if (v.is_string()) return v.as_string();
  if (v.is_undefined()) return "";
  return repr_at(v);
}

std::string py_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0.0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto result = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<std::size_t>(result.ptr - buf));
  std::string out;
  if (sci.front() == '-') {
    out.push_back('-');
    sci.remove_prefix(1);
  }
  std::size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e))
    if (c != '.') digits.push_back(c);
  int exponent = std::stoi(std::string(sci.substr(e + 1)));
  int decpt = exponent + 1;
  auto ndigits = static_cast<int>(digits.size());
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(static_cast<std::size_t>(-decpt), '0') + digits;
    } else if (decpt >= ndigits) {
      out += digits + std::string(static_cast<std::size_t>(decpt - ndigits), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<std::size_t>(decpt)) + "." + digits.substr(static_cast<std::size_t>(decpt));
    }
    return out;
  }
  out.push_back(digits[0]);
  if (ndigits > 1) out += "." + digits.substr(1);
  out += exponent < 0 ? "e-" : "e+";
  int magnitude = std::abs(exponent);
  if (magnitude < 10) out.push_back('0');
  out += std::to_string(magnitude);
  return out;
}

std::string py_string_repr(std::string_view text) {
  bool has_single = text.find('\'') != std::string_view::npos;
  bool has_double = text.find('"') != std::string_view::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : to_code_points(text)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      out += "\\x";
      append_hex(out, c, 2);
    } else if (c < 0x7F || is_printable(c)) {
      append_utf8(out, c);
    } else if (c <= 0xFF) {
      out += "\\x";
      append_hex(out, c, 2);
    } else if (c <= 0xFFFF) {
      out += "\\u";
      append_hex(out, c, 4);
    } else {
      out += "\\U";
      append_hex(out, c, 8);
    }
  }
  out.push_back(quote);
  return out;
}

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '\'':
        out += "&#39;";
        break;
      case '"':
        out += "&#34;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

}  // namespace troupe::jinja

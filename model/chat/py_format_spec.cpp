// printf-style `%` formatting and the str.format spec mini-language.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

#include "model/chat/errors.hpp"
#include "model/chat/py_format.hpp"
#include "model/chat/unicode.hpp"

namespace troupe::jinja {

namespace {

/// Parsed "[[fill]align][sign][#][0][width][,_][.precision][type]" or a % conversion.
struct spec {
  char32_t fill = ' ';
  char align = 0;  ///< '<', '>', '=', '^' or 0 (type default)
  char sign = '-';
  bool alternate = false;
  bool zero = false;
  std::int64_t width = -1;
  char grouping = 0;
  std::int64_t precision = -1;
  char type = 0;
  std::size_t max_bytes = 0;  ///< longest text the conversion may build
};

std::string c_format(const char* pattern, int precision, double v) {
  char buf[512];
  int n = std::snprintf(buf, sizeof buf, pattern, precision, v);
  if (n < 0) return {};
  if (static_cast<std::size_t>(n) < sizeof buf) return std::string(buf, static_cast<std::size_t>(n));
  std::string big(static_cast<std::size_t>(n) + 1, '\0');
  std::snprintf(big.data(), big.size(), pattern, precision, v);
  big.resize(static_cast<std::size_t>(n));
  return big;
}

/// %e/%f/%g body of |v| (no sign), C-compatible like Python's.
std::string float_body(double v, char type, int precision, bool alternate) {
  v = std::fabs(v);
  if (std::isinf(v)) return std::isupper(static_cast<unsigned char>(type)) ? "INF" : "inf";
  if (std::isnan(v)) return std::isupper(static_cast<unsigned char>(type)) ? "NAN" : "nan";
  char pattern[8] = {'%', '.', '*', 0, 0, 0};
  std::size_t p = 3;
  if (alternate) {
    pattern[1] = '#';
    pattern[2] = '.';
    pattern[3] = '*';
    p = 4;
  }
  pattern[p] = type;
  return c_format(pattern, precision, v);
}

std::string int_body(std::int64_t v, char type, bool alternate) {
  std::uint64_t m = v < 0 ? 0 - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
  int base = type == 'x' || type == 'X' ? 16 : type == 'o' ? 8 : type == 'b' ? 2 : 10;
  const char* digits = type == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  do {
    out.insert(out.begin(), digits[m % static_cast<std::uint64_t>(base)]);
    m /= static_cast<std::uint64_t>(base);
  } while (m != 0);
  if (alternate && base != 10) out.insert(0, type == 'X' ? "0X" : type == 'x' ? "0x" : type == 'o' ? "0o" : "0b");
  return out;
}

std::string group_digits(const std::string& body, char separator, std::size_t every) {
  std::size_t end = body.find_first_not_of("0123456789abcdefABCDEF");
  if (end == std::string::npos) end = body.size();
  std::string out;
  for (std::size_t i = 0; i < end; ++i) {
    if (i > 0 && (end - i) % every == 0) out.push_back(separator);
    out.push_back(body[i]);
  }
  return out + body.substr(end);
}

/// Pads `sign + body` to the spec's width with its fill and alignment; a
/// result past the spec's max_bytes is refused before the fill is built.
std::string pad(const std::string& sign, const std::string& body, const spec& s, char default_align) {
  char align = s.align != 0 ? s.align : default_align;
  auto len = static_cast<std::int64_t>(code_point_count(sign) + code_point_count(body));
  if (s.width <= len) return sign + body;
  auto missing = static_cast<std::size_t>(s.width - len);
  std::string fill_char;
  append_utf8(fill_char, s.fill);
  if (!fits_in(sign.size() + body.size(), missing, fill_char.size(), s.max_bytes))
    raise_string_limit("format width " + std::to_string(s.width), s.max_bytes);
  auto fill = [&](std::size_t n) {
    std::string f;
    f.reserve(n * fill_char.size());
    for (std::size_t i = 0; i < n; ++i) f += fill_char;
    return f;
  };
  if (align == '=') return sign + fill(missing) + body;
  std::size_t left = align == '<' ? 0 : align == '^' ? missing / 2 : missing;
  return fill(left) + sign + body + fill(missing - left);
}

std::string sign_of(bool negative, char sign) {
  if (negative) return "-";
  if (sign == '+') return "+";
  if (sign == ' ') return " ";
  return "";
}

std::string truncate_code_points(const std::string& text, std::int64_t precision) {
  if (precision < 0) return text;
  std::u32string cps = to_code_points(text);
  if (cps.size() <= static_cast<std::size_t>(precision)) return text;
  return to_utf8(std::u32string_view(cps).substr(0, static_cast<std::size_t>(precision)));
}

spec parse_spec(std::string_view text, std::size_t max_bytes) {
  spec s;
  s.max_bytes = max_bytes;
  std::u32string cps = to_code_points(text);
  std::size_t i = 0;
  auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '=' || c == '^'; };
  if (cps.size() >= 2 && is_align(cps[1])) {
    s.fill = cps[0];
    s.align = static_cast<char>(cps[1]);
    i = 2;
  } else if (!cps.empty() && is_align(cps[0])) {
    s.align = static_cast<char>(cps[0]);
    i = 1;
  }
  if (i < cps.size() && (cps[i] == '+' || cps[i] == '-' || cps[i] == ' ')) s.sign = static_cast<char>(cps[i++]);
  if (i < cps.size() && cps[i] == '#') s.alternate = ++i > 0;
  if (i < cps.size() && cps[i] == '0') {
    s.zero = true;
    ++i;
  }
  auto read_int = [&]() {
    std::optional<std::int64_t> n = read_decimal(std::u32string_view(cps), i);
    if (!n) throw script_error("ValueError", "Too many decimal digits in format string");
    return *n;
  };
  s.width = read_int();
  if (i < cps.size() && (cps[i] == ',' || cps[i] == '_')) s.grouping = static_cast<char>(cps[i++]);
  if (i < cps.size() && cps[i] == '.') {
    ++i;
    s.precision = read_int();
    if (s.precision < 0) throw script_error("ValueError", "Format specifier missing precision");
  }
  if (i < cps.size()) s.type = static_cast<char>(cps[i++]);
  if (i != cps.size()) throw script_error("ValueError", "Invalid format specifier");
  if (s.zero && s.align == 0) {
    s.fill = '0';
    s.align = '=';
  }
  return s;
}

std::string format_float_spec(double v, spec s) {
  char type = s.type;
  bool repr_like = type == 0 && s.precision < 0;
  auto precision = [&](char printf_type, std::int64_t absent) {
    return printf_float_precision(printf_type, s.alternate, s.precision < 0 ? absent : s.precision, s.max_bytes);
  };
  std::string body;
  if (type == '%') {
    body = float_body(v * 100.0, 'f', precision('f', 6), s.alternate) + "%";
  } else if (repr_like) {
    body = py_float_repr(std::fabs(v));
  } else if (type == 0 || type == 'n') {
    body = float_body(v, 'g', std::max(precision('g', 12), 1), s.alternate);
    if (type == 0 && body.find_first_of(".eni") == std::string::npos) body += ".0";
  } else {
    body = float_body(v, type, precision(type, 6), s.alternate);
  }
  if (s.grouping != 0) body = group_digits(body, s.grouping, 3);
  return pad(sign_of(std::signbit(v) && !std::isnan(v), s.sign), body, s, '>');
}

std::string format_int_spec(std::int64_t v, const spec& s) {
  if (s.type == 'e' || s.type == 'E' || s.type == 'f' || s.type == 'F' || s.type == 'g' || s.type == 'G' ||
      s.type == '%')
    return format_float_spec(static_cast<double>(v), s);
  if (s.precision >= 0) throw script_error("ValueError", "Precision not allowed in integer format specifier");
  if (s.type == 'c') {
    std::string out;
    append_utf8(out, static_cast<char32_t>(v));
    return pad("", out, s, '<');
  }
  char type = s.type == 0 || s.type == 'n' ? 'd' : s.type;
  if (type != 'd' && type != 'x' && type != 'X' && type != 'o' && type != 'b')
    throw script_error("ValueError", std::string("Unknown format code '") + type + "' for object of type 'int'");
  std::string body = int_body(v, type, false);
  if (s.grouping != 0) body = group_digits(body, s.grouping, type == 'd' ? 3 : 4);
  if (s.alternate && type != 'd') body.insert(0, int_body(0, type, true).substr(0, 2));
  return pad(sign_of(v < 0, s.sign), body, s, '>');
}

}  // namespace

int printf_float_precision(char type, bool alternate, std::int64_t precision, std::size_t max_bytes) {
  if (precision > std::numeric_limits<int>::max()) throw script_error("ValueError", "precision too big");
  constexpr std::int64_t all_significant_digits = 800;  // a double's exact decimal form has at most 767
  bool drops_trailing_zeros = (type == 'g' || type == 'G') && !alternate;
  if (drops_trailing_zeros) return static_cast<int>(std::min(precision, all_significant_digits));
  if (!fits_in(0, static_cast<std::uint64_t>(precision), 1, max_bytes))
    raise_string_limit("format precision " + std::to_string(precision), max_bytes);
  return static_cast<int>(precision);
}

std::string format_with_spec(const value& v, std::string_view spec_text, std::size_t max_bytes) {
  if (spec_text.empty()) return py_str(v);
  spec s = parse_spec(spec_text, max_bytes);
  if (v.is_string()) {
    if (s.type != 0 && s.type != 's')
      throw script_error("ValueError", std::string("Unknown format code '") + s.type + "' for object of type 'str'");
    if (s.sign != '-') throw script_error("ValueError", "Sign not allowed in string format specifier");
    if (s.align == '=') throw script_error("ValueError", "'=' alignment not allowed in string format specifier");
    return pad("", truncate_code_points(v.as_string(), s.precision), s, '<');
  }
  if (v.is_int() || v.is_bool()) return format_int_spec(v.as_integral(), s);
  if (v.is_float()) {
    if (s.type != 0 && std::string_view("eEfFgGn%").find(s.type) == std::string_view::npos)
      throw script_error("ValueError", std::string("Unknown format code '") + s.type + "' for object of type 'float'");
    return format_float_spec(v.as_float(), s);
  }
  throw script_error("TypeError", "unsupported format string passed to " + python_type_name(v) + ".__format__");
}

}  // namespace troupe::jinja

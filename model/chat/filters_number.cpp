// The int, float and round filters, with Python's int()/float() parsing.

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "model/chat/errors.hpp"
#include "model/chat/filters_impl.hpp"
#include "model/chat/interpreter.hpp"
#include "model/chat/operators.hpp"
#include "model/chat/str_ops.hpp"

namespace troupe::jinja {

namespace {

/// Digits with single "_" between them (Python numeric literal rules).
std::optional<std::string> strip_separators(std::string_view digits, int base) {
  std::string out;
  bool last_digit = false;
  for (char c : digits) {
    if (c == '_') {
      if (!last_digit) return std::nullopt;
      last_digit = false;
      continue;
    }
    int d = (c >= '0' && c <= '9')   ? c - '0'
            : (c >= 'a' && c <= 'z') ? c - 'a' + 10
            : (c >= 'A' && c <= 'Z') ? c - 'A' + 10
                                     : 99;
    if (d >= base) return std::nullopt;
    out.push_back(c);
    last_digit = true;
  }
  if (out.empty() || !last_digit) return std::nullopt;
  return out;
}

/// int(text, base); nullopt where Python raises ValueError.
std::optional<std::int64_t> parse_int(const std::string& raw, std::int64_t base) {
  std::string text = py_strip(raw, std::nullopt, true, true);
  std::string_view s = text;
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.size() > 2 && s[0] == '0') {
    char p = static_cast<char>(s[1] | 0x20);
    int prefixed = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (prefixed != 0 && (base == prefixed || base == 0)) {
      base = prefixed;
      s.remove_prefix(2);
      if (!s.empty() && s[0] == '_') s.remove_prefix(1);
    }
  }
  if (base == 0) base = 10;
  if (base < 2 || base > 36) return std::nullopt;
  std::optional<std::string> digits = strip_separators(s, static_cast<int>(base));
  if (!digits) return std::nullopt;
  errno = 0;
  unsigned long long magnitude = std::strtoull(digits->c_str(), nullptr, static_cast<int>(base));
  if (errno == ERANGE || magnitude > static_cast<unsigned long long>(INT64_MAX) + (negative ? 1 : 0))
    throw script_error("OverflowError", "integer " + raw + " does not fit in 64 bits");
  return negative ? static_cast<std::int64_t>(0 - magnitude) : static_cast<std::int64_t>(magnitude);
}

/// float(text); nullopt where Python raises ValueError.
std::optional<double> parse_float(const std::string& raw) {
  std::string text = py_strip(raw, std::nullopt, true, true);
  std::string lower;
  for (char c : text) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  std::string_view body = lower;
  double sign = 1.0;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    sign = body[0] == '-' ? -1.0 : 1.0;
    body.remove_prefix(1);
  }
  if (body == "inf" || body == "infinity") return sign * INFINITY;
  if (body == "nan") return std::nan("");
  std::string clean;
  bool digit_before = false, seen_digit = false;
  for (std::size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c == '_') {
      bool digit_after = i + 1 < body.size() && std::isdigit(static_cast<unsigned char>(body[i + 1]));
      if (!digit_before || !digit_after) return std::nullopt;
      continue;
    }
    bool allowed = std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == '+' || c == '-';
    if (!allowed) return std::nullopt;
    digit_before = std::isdigit(static_cast<unsigned char>(c)) != 0;
    seen_digit = seen_digit || digit_before;
    clean.push_back(c);
  }
  if (!seen_digit) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(clean.c_str(), &end);
  if (end == nullptr || *end != '\0' || clean.front() == '+' || clean.front() == '-') return std::nullopt;
  return sign * v;
}

std::optional<double> to_float(const value& v) {
  if (v.is_number()) return v.as_double();
  if (v.is_string()) return parse_float(v.as_string());
  return std::nullopt;
}

value f_int(render_state&, const value& v, call_args& args) {
  bound_args a(args, "do_int", {"default", "base"});
  if (v.is_undefined()) raise_undefined(v);  // int(Undefined) raises, and do_int does not catch it
  value fallback = a.get_or(0, value::integer(0));
  if (v.is_int() || v.is_bool()) return value::integer(v.as_integral());
  if (v.is_string()) {
    if (std::optional<std::int64_t> i =
            parse_int(v.as_string(), require_index(a.get_or(1, value::integer(10)), "base")))
      return value::integer(*i);
  }
  std::optional<double> f = to_float(v);
  if (!f || !std::isfinite(*f) || std::fabs(*f) >= 9.2e18) return fallback;
  return value::integer(static_cast<std::int64_t>(std::trunc(*f)));
}

value f_float(render_state&, const value& v, call_args& args) {
  bound_args a(args, "do_float", {"default"});
  if (v.is_undefined()) raise_undefined(v);
  std::optional<double> f = to_float(v);
  return f ? value::floating(*f) : a.get_or(0, value::floating(0.0));
}

/// Python's round(x, ndigits) for floats: correctly rounded, ties to even.
double round_float(double x, std::int64_t ndigits) {
  if (!std::isfinite(x) || ndigits > 308) return x;
  if (ndigits >= 0) {
    char buf[400];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(ndigits), x);
    return std::strtod(buf, nullptr);
  }
  if (ndigits < -308) return std::copysign(0.0, x);
  double pow1 = std::pow(10.0, static_cast<double>(-ndigits));
  double y = std::nearbyint(x / pow1) * pow1;
  return std::isfinite(y) ? y : x;
}

std::int64_t round_int(std::int64_t x, std::int64_t ndigits) {
  if (ndigits >= 0) return x;
  if (ndigits < -18) return 0;
  std::int64_t p = 1;
  for (std::int64_t i = 0; i < -ndigits; ++i) p *= 10;
  std::int64_t q = x / p, r = x % p;
  if (r < 0) {
    r += p;
    --q;
  }
  if (2 * r > p || (2 * r == p && (q & 1) != 0)) ++q;
  return q * p;
}

value f_round(render_state& st, const value& v, call_args& args) {
  bound_args a(args, "do_round", {"precision", "method"});
  std::int64_t precision = require_index(a.get_or(0, value::integer(0)), "precision");
  std::string method = a.has(1) && a.get(1)->is_string() ? a.get(1)->as_string() : "common";
  if (method != "common" && method != "ceil" && method != "floor")
    throw script_error("FilterArgumentError", "method must be common, ceil or floor");
  if (!v.is_number())
    throw script_error("TypeError", "type " + python_type_name(v) + " doesn't define __round__ method");
  if (method == "common") {
    if (v.is_float()) return value::floating(round_float(v.as_float(), precision));
    return value::integer(round_int(v.as_integral(), precision));
  }
  value scale = apply_binary(binary_op::pow, value::integer(10), value::integer(precision), st.sizes());
  double scaled = apply_binary(binary_op::mul, v, scale, st.sizes()).as_double();
  double rounded = method == "ceil" ? std::ceil(scaled) : std::floor(scaled);
  return value::floating(rounded / scale.as_double());
}

}  // namespace

void add_number_filters(filter_table& table) {
  table.emplace("int", f_int);
  table.emplace("float", f_float);
  table.emplace("round", f_round);
}

}  // namespace troupe::jinja

#include "model/chat/operators.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "model/chat/errors.hpp"
#include "model/chat/py_format.hpp"
#include "model/chat/unicode.hpp"

namespace troupe::jinja {

namespace {

const char* op_symbol(binary_op op) {
  switch (op) {
    case binary_op::add:
      return "+";
    case binary_op::sub:
      return "-";
    case binary_op::mul:
      return "*";
    case binary_op::div:
      return "/";
    case binary_op::floordiv:
      return "//";
    case binary_op::mod:
      return "%";
    case binary_op::pow:
      return "** or pow()";
  }
  return "?";
}

[[noreturn]] void unsupported(binary_op op, const value& a, const value& b) {
  throw script_error("TypeError", std::string("unsupported operand type(s) for ") + op_symbol(op) + ": '" +
                                      python_type_name(a) + "' and '" + python_type_name(b) + "'");
}

[[noreturn]] void overflow() {
  throw script_error("OverflowError", "integer result does not fit in 64 bits (the template engine's int range)");
}

/// Refuses a value of `size` bytes or items (`unit`) past the render's limit.
void check_size(std::size_t size, std::size_t max_size, const std::string& unit) {
  if (size > max_size)
    throw limit_error("value of " + std::to_string(size) + " " + unit + " exceeds the limit of " +
                      std::to_string(max_size) + " " + unit);
}

bool is_integral(const value& v) { return v.is_int() || v.is_bool(); }

value markup_or_string(std::string text, bool markup) { return value::string(std::move(text), markup); }

value add_strings(const value& a, const value& b, const size_limits& limits) {
  check_size(a.as_string().size() + b.as_string().size(), limits.string_bytes, "bytes");
  if (a.is_markup() && !b.is_markup()) return markup_or_string(a.as_string() + html_escape(b.as_string()), true);
  if (!a.is_markup() && b.is_markup()) return markup_or_string(html_escape(a.as_string()) + b.as_string(), true);
  return markup_or_string(a.as_string() + b.as_string(), a.is_markup());
}

value add(const value& a, const value& b, const size_limits& limits) {
  if (is_integral(a) && is_integral(b)) {
    std::int64_t r = 0;
    if (__builtin_add_overflow(a.as_integral(), b.as_integral(), &r)) overflow();
    return value::integer(r);
  }
  if (a.is_number() && b.is_number()) return value::floating(a.as_double() + b.as_double());
  if (a.is_string() && b.is_string()) return add_strings(a, b, limits);
  if (a.is_sequence() && b.is_sequence() && a.flavor() == b.flavor() &&
      (a.flavor() == sequence_flavor::list || a.flavor() == sequence_flavor::tuple)) {
    check_size(a.items().size() + b.items().size(), limits.items, "items");
    std::vector<value> items = a.items();
    items.insert(items.end(), b.items().begin(), b.items().end());
    return a.flavor() == sequence_flavor::list ? value::list(std::move(items)) : value::tuple(std::move(items));
  }
  if (a.is_string() && !a.is_markup())
    throw script_error("TypeError", "can only concatenate str (not \"" + python_type_name(b) + "\") to str");
  if (a.is_list_or_tuple()) {
    std::string t = python_type_name(a);
    throw script_error("TypeError", "can only concatenate " + t + " (not \"" + python_type_name(b) + "\") to " + t);
  }
  unsupported(binary_op::add, a, b);
}

value repeat(const value& seq, std::int64_t count, const size_limits& limits) {
  std::size_t n = count > 0 ? static_cast<std::size_t>(count) : 0;
  // Repeating nothing is nothing, however large the count (which could otherwise loop for ages).
  if (seq.is_string() ? seq.as_string().empty() : seq.items().empty()) n = 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (!fits_in(0, n, s.size(), limits.string_bytes))
      raise_string_limit("repeating " + std::to_string(s.size()) + " bytes " + std::to_string(n) + " times",
                         limits.string_bytes);
    std::string out;
    if (s.size() == 1) {
      out.assign(n, s[0]);
    } else {
      out.reserve(s.size() * n);
      for (std::size_t i = 0; i < n; ++i) out += s;
    }
    return markup_or_string(std::move(out), seq.is_markup());
  }
  const std::vector<value>& items = seq.items();
  if (!items.empty() && n > limits.items / items.size())
    throw limit_error("repeating " + std::to_string(items.size()) + " items " + std::to_string(n) +
                      " times exceeds the limit of " + std::to_string(limits.items) + " items");
  std::vector<value> out;
  out.reserve(items.size() * n);
  for (std::size_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return seq.flavor() == sequence_flavor::list ? value::list(std::move(out)) : value::tuple(std::move(out));
}

value multiply(const value& a, const value& b, const size_limits& limits) {
  if (is_integral(a) && is_integral(b)) {
    std::int64_t r = 0;
    if (__builtin_mul_overflow(a.as_integral(), b.as_integral(), &r)) overflow();
    return value::integer(r);
  }
  if (a.is_number() && b.is_number()) return value::floating(a.as_double() * b.as_double());
  bool a_seq = a.is_string() || a.is_list_or_tuple();
  bool b_seq = b.is_string() || b.is_list_or_tuple();
  if (a_seq && is_integral(b)) return repeat(a, b.as_integral(), limits);
  if (b_seq && is_integral(a)) return repeat(b, a.as_integral(), limits);
  if (a_seq)
    throw script_error("TypeError", "can't multiply sequence by non-int of type '" + python_type_name(b) + "'");
  if (b_seq)
    throw script_error("TypeError", "can't multiply sequence by non-int of type '" + python_type_name(a) + "'");
  unsupported(binary_op::mul, a, b);
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  if (b == 0) throw script_error("ZeroDivisionError", "integer division or modulo by zero");
  if (a == std::numeric_limits<std::int64_t>::min() && b == -1) overflow();
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

std::int64_t floor_mod(std::int64_t a, std::int64_t b) {
  if (b == 0) throw script_error("ZeroDivisionError", "integer modulo by zero");
  if (b == -1) return 0;
  std::int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

double float_mod(double a, double b) {
  if (b == 0.0) throw script_error("ZeroDivisionError", "float modulo");
  double r = std::fmod(a, b);
  if (r != 0.0) {
    if ((b < 0) != (r < 0)) r += b;
  } else {
    r = std::copysign(0.0, b);
  }
  return r;
}

double float_floor_div(double a, double b) {
  if (b == 0.0) throw script_error("ZeroDivisionError", "float floor division by zero");
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div == 0.0) return std::copysign(0.0, a / b);
  double floored = std::floor(div);
  if (div - floored > 0.5) floored += 1.0;
  return floored;
}

value power(const value& a, const value& b) {
  if (is_integral(a) && is_integral(b) && b.as_integral() >= 0) {
    std::int64_t base = a.as_integral(), exp = b.as_integral(), result = 1;
    while (exp > 0) {
      if ((exp & 1) != 0 && __builtin_mul_overflow(result, base, &result)) overflow();
      exp >>= 1;
      if (exp > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
    }
    return value::integer(result);
  }
  if (!a.is_number() || !b.is_number()) unsupported(binary_op::pow, a, b);
  double x = a.as_double(), y = b.as_double();
  if (x == 0.0 && y < 0) throw script_error("ZeroDivisionError", "0.0 cannot be raised to a negative power");
  double r = std::pow(x, y);
  if (std::isinf(r) && std::isfinite(x) && std::isfinite(y))
    throw script_error("OverflowError", "(34, 'Numerical result out of range')");
  return value::floating(r);
}

/// Markup % args escapes every argument (markupsafe's _MarkupEscapeHelper).
value escaped_format_args(const value& args) {
  auto escape_one = [](const value& v) {
    if (v.is_number()) return v;
    return value::string(v.is_markup() ? v.as_string() : html_escape(py_str(v)), true);
  };
  if (args.is_sequence() && args.flavor() == sequence_flavor::tuple) {
    std::vector<value> items;
    for (const value& v : args.items()) items.push_back(escape_one(v));
    return value::tuple(std::move(items));
  }
  if (args.is_dict()) {
    std::vector<std::pair<value, value>> entries;
    for (const auto& [k, v] : args.as_dict().entries) entries.emplace_back(k, escape_one(v));
    return value::dict(std::move(entries));
  }
  return value::tuple({escape_one(args)});
}

value modulo(const value& a, const value& b, const size_limits& limits) {
  if (a.is_string()) {
    std::string out = percent_format(a.as_string(), a.is_markup() ? escaped_format_args(b) : b, limits.string_bytes);
    check_size(out.size(), limits.string_bytes, "bytes");
    return value::string(std::move(out), a.is_markup());
  }
  if (is_integral(a) && is_integral(b)) return value::integer(floor_mod(a.as_integral(), b.as_integral()));
  if (a.is_number() && b.is_number()) return value::floating(float_mod(a.as_double(), b.as_double()));
  unsupported(binary_op::mod, a, b);
}

}  // namespace

void raise_undefined(const value& undefined) {
  const undefined_data& u = undefined.as_undefined();
  throw script_error(u.error_type, u.message);
}

value apply_binary(binary_op op, const value& a, const value& b, const size_limits& limits) {
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  switch (op) {
    case binary_op::add:
      return add(a, b, limits);
    case binary_op::mul:
      return multiply(a, b, limits);
    case binary_op::mod:
      return modulo(a, b, limits);
    case binary_op::pow:
      return power(a, b);
    default:
      break;
  }
  if (!a.is_number() || !b.is_number()) unsupported(op, a, b);
  bool ints = is_integral(a) && is_integral(b);
  switch (op) {
    case binary_op::sub: {
      if (!ints) return value::floating(a.as_double() - b.as_double());
      std::int64_t r = 0;
      if (__builtin_sub_overflow(a.as_integral(), b.as_integral(), &r)) overflow();
      return value::integer(r);
    }
    case binary_op::div:
      if (b.as_double() == 0.0)
        throw script_error("ZeroDivisionError", ints ? "division by zero" : "float division by zero");
      return value::floating(a.as_double() / b.as_double());
    case binary_op::floordiv:
      if (ints) return value::integer(floor_div(a.as_integral(), b.as_integral()));
      return value::floating(float_floor_div(a.as_double(), b.as_double()));
    default:
      break;
  }
  unsupported(op, a, b);
}

value negate(const value& v) {
  if (v.is_undefined()) raise_undefined(v);
  if (v.is_float()) return value::floating(-v.as_float());
  if (v.is_int() || v.is_bool()) {
    if (v.as_integral() == std::numeric_limits<std::int64_t>::min()) overflow();
    return value::integer(-v.as_integral());
  }
  throw script_error("TypeError", "bad operand type for unary -: '" + python_type_name(v) + "'");
}

value unary_plus(const value& v) {
  if (v.is_undefined()) raise_undefined(v);
  if (v.is_float()) return v;
  if (v.is_int() || v.is_bool()) return value::integer(v.as_integral());
  throw script_error("TypeError", "bad operand type for unary +: '" + python_type_name(v) + "'");
}

std::int64_t require_index(const value& v, std::string_view what) {
  if (v.is_int() || v.is_bool()) return v.as_integral();
  throw script_error("TypeError",
                     std::string(what) + " indices must be integers or slices, not " + python_type_name(v));
}

}  // namespace troupe::jinja

#pragma once
// Python's text forms of values, which templates print: str() and repr()
// (['a', 1], {'k': None}, True, 1e-05), printf-style `%` formatting and the
// format-spec mini-language of str.format. Internal to model/chat.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "model/chat/value.hpp"

namespace troupe::jinja {

/// Python repr(v): strings quoted, floats shortest round-trip ("1.0", "1e-05").
std::string py_repr(const value& v);
/// Python str(v): strings as-is, Undefined as "", containers as their repr.
std::string py_str(const value& v);
/// repr(float): shortest round-trip digits, exponent outside [1e-4, 1e16).
std::string py_float_repr(double d);
/// repr(str): single quotes unless the text has ' and no ", escapes like CPython.
std::string py_string_repr(std::string_view text);
/// While alive, repr()/str() of lists, tuples and dicts raise limit_error
/// once their text passes `max_bytes`, checked item by item (the render's
/// string limit; one per render, on the render's thread).
class repr_limit_scope {
 public:
  explicit repr_limit_scope(std::size_t max_bytes);
  ~repr_limit_scope();
  repr_limit_scope(const repr_limit_scope&) = delete;
  repr_limit_scope& operator=(const repr_limit_scope&) = delete;

 private:
  std::size_t saved_;
};

/// markupsafe.escape: & < > ' " as HTML entities.
std::string html_escape(std::string_view text);
/// `format % args` with Python's printf-style rules; `args` is a tuple
/// (positional), a dict (for %(name)s) or a single value. Widths and
/// precisions that would build more than `max_bytes` raise limit_error first.
std::string percent_format(std::string_view format, const value& args, std::size_t max_bytes);
/// format(v, spec) with the str.format mini-language ("{:>8.2f}"); limit_error
/// for a width or precision that would build more than `max_bytes`.
std::string format_with_spec(const value& v, std::string_view spec, std::size_t max_bytes);

/// Reads the ASCII digits at text[i...], advancing `i` past them, as CPython's
/// format parsers do (into a Py_ssize_t): -1 when there are none, nullopt
/// when the number would exceed INT64_MAX (checked before it overflows).
template <typename Char>
std::optional<std::int64_t> read_decimal(std::basic_string_view<Char> text, std::size_t& i) {
  std::int64_t n = -1;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    auto digit = static_cast<std::int64_t>(text[i] - '0');
    if (n > (std::numeric_limits<std::int64_t>::max() - digit) / 10) return std::nullopt;
    n = std::max<std::int64_t>(n, 0) * 10 + digit;
  }
  return n;
}

/// The precision to hand printf for a float conversion: 'g'-family types
/// without '#' print at most a double's 767 significant digits, so a larger
/// precision is lowered without changing the text; other precisions (each
/// printing at least that many digits) beyond `max_bytes` raise limit_error.
int printf_float_precision(char type, bool alternate, std::int64_t precision, std::size_t max_bytes);

}  // namespace troupe::jinja

#pragma once
// Python's text forms of values, which templates print: str() and repr()
// (['a', 1], {'k': None}, True, 1e-05), printf-style `%` formatting and the
// format-spec mini-language of str.format. Internal to model/chat.

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
/// markupsafe.escape: & < > ' " as HTML entities.
std::string html_escape(std::string_view text);
/// `format % args` with Python's printf-style rules; `args` is a tuple
/// (positional), a dict (for %(name)s) or a single value.
std::string percent_format(std::string_view format, const value& args);
/// format(v, spec) with the str.format mini-language ("{:>8.2f}").
std::string format_with_spec(const value& v, std::string_view spec);

}  // namespace troupe::jinja

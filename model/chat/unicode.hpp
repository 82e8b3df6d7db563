#pragma once
// Python-compatible Unicode string operations for the template
// engine. Python strings are sequences of code points; templates index,
// slice, strip and case-map them that way, so these helpers work on code
// points and reproduce CPython's rules (full case mappings, final sigma,
// str.isspace, str.isprintable). Internal to model/chat. The UTF-8 codec
// itself (to_code_points, to_utf8, ...) is base/utf8.hpp, included here for
// every user of these helpers.

#include <cstddef>
#include <string>
#include <string_view>

#include "base/utf8.hpp"

namespace troupe::jinja {

// Single code point properties, as Python's str predicates define them.
bool is_space(char32_t c);      ///< str.isspace, also regex \s
bool is_printable(char32_t c);  ///< str.isprintable (repr escapes the rest)
bool is_alpha(char32_t c);
bool is_decimal(char32_t c);
bool is_digit(char32_t c);
bool is_numeric(char32_t c);
bool is_lower(char32_t c);
bool is_upper(char32_t c);
bool is_titlecase(char32_t c);  ///< category Lt
bool is_cased(char32_t c);
bool is_identifier_start(char32_t c);
bool is_identifier_continue(char32_t c);
bool is_line_break(char32_t c);  ///< the boundaries str.splitlines() splits at
bool is_word_char(char32_t c);   ///< regex \w (alphanumeric or underscore)

// Whole-string case operations with CPython's semantics.
std::string py_lower(std::string_view text);  ///< full mapping, final sigma
std::string py_upper(std::string_view text);
std::string py_casefold(std::string_view text);
std::string py_swapcase(std::string_view text);
std::string py_title(std::string_view text);       ///< str.title
std::string py_capitalize(std::string_view text);  ///< str.capitalize (3.8+: title-case first)

// String predicates over a whole string (false for "").
bool py_isalpha(std::string_view text);
bool py_isdecimal(std::string_view text);
bool py_isdigit(std::string_view text);
bool py_isnumeric(std::string_view text);
bool py_isalnum(std::string_view text);
bool py_isspace(std::string_view text);
bool py_islower(std::string_view text);
bool py_isupper(std::string_view text);
bool py_istitle(std::string_view text);
bool py_isidentifier(std::string_view text);
bool py_isprintable(std::string_view text);

}  // namespace troupe::jinja

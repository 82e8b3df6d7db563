#pragma once
// UTF-8 and Python-compatible Unicode string operations for the template
// engine. Python strings are sequences of code points; templates index,
// slice, strip and case-map them that way, so these helpers work on code
// points and reproduce CPython's rules (full case mappings, final sigma,
// str.isspace, str.isprintable). Internal to model/chat.

#include <cstddef>
#include <string>
#include <string_view>

namespace troupe::jinja {

/// Decodes `text` (UTF-8, validated by the caller) into code points.
std::u32string to_code_points(std::string_view text);
/// Encodes code points as UTF-8.
std::string to_utf8(std::u32string_view code_points);
/// Appends one code point as UTF-8.
void append_utf8(std::string& out, char32_t code_point);
/// Number of code points in valid UTF-8 `text` (Python len()).
std::size_t code_point_count(std::string_view text);
/// True when `text` is well-formed UTF-8 (no surrogates, no overlongs).
bool is_valid_utf8(std::string_view text);
/// Byte offset of the first invalid UTF-8 sequence in `text`.
std::size_t first_invalid_utf8(std::string_view text);
/// True when every byte is ASCII, so byte and code point indices agree.
bool is_ascii(std::string_view text);

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

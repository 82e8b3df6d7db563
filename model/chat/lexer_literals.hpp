#pragma once
// Number, name and string literal rules of jinja2's lexer. Internal to model/chat.

#include <cstddef>
#include <string_view>

#include "model/chat/lexer.hpp"

namespace troupe::jinja {

/// A literal token found at some position; length 0 when nothing matched.
struct literal_match {
  token tok;
  std::size_t length = 0;
};

/// jinja2's float_re then integer_re (with 0b/0o/0x and "_" separators).
literal_match match_number(std::string_view src, std::size_t pos);
/// An identifier (Python's rules for the first and following characters).
literal_match match_name(std::string_view src, std::size_t pos);
/// A quoted string, decoded like Python's "unicode-escape" codec.
literal_match match_string(std::string_view src, std::size_t pos);

}  // namespace troupe::jinja

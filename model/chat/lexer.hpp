#pragma once
// Splits a template into tokens exactly as jinja2's lexer does under
// transformers' settings (trim_blocks, lstrip_blocks, no
// keep_trailing_newline): whitespace control with `-` and `+`, raw blocks,
// comments, and the expression tokens inside {{ }} and {% %}.
// Internal to model/chat.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::jinja {

enum class token_type {
  data,            ///< template text
  variable_begin,  ///< {{
  variable_end,    ///< }}
  block_begin,     ///< {%
  block_end,       ///< %}
  name,
  string,    ///< text holds the decoded literal
  integer,   ///< int_value
  floating,  ///< float_value
  op,        ///< text holds the operator ("+", "//", "==", "|", ...)
  eof,
};

struct token {
  token_type type = token_type::eof;
  std::string text;
  std::int64_t int_value = 0;
  double float_value = 0.0;
  std::size_t offset = 0;  ///< byte offset in the normalised source
};

/// jinja2's preprocessing: \r\n and \r become \n, and one trailing newline is dropped.
std::string normalize_template_source(std::string_view source);

/// Tokenizes normalised `source`; the last token is eof. Throws syntax_error.
std::vector<token> tokenize(std::string_view source);

/// jinja2's describe_token: the name itself, the operator, or "end of print statement" etc.
std::string describe_token(const token& t);

}  // namespace troupe::jinja

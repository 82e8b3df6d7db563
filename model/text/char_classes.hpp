#pragma once
// The Unicode character classes the HF tokenizers pipeline is defined in
// terms of (Rust's char::is_whitespace and friends). UTF-8 itself is
// base/utf8.hpp.

namespace troupe::text {

/// Unicode White_Space (Rust char::is_whitespace).
bool is_unicode_whitespace(char32_t c);

/// Unicode Numeric (general categories Nd, Nl, No; Rust char::is_numeric).
bool is_unicode_numeric(char32_t c);

/// Rust char::is_alphanumeric approximated with general categories: letters,
/// numbers and combining marks (Alphabetic includes most marks).
bool is_unicode_alphanumeric(char32_t c);

}  // namespace troupe::text

#pragma once
// UTF-8 primitives and the Unicode character classes the HF tokenizers
// pipeline is defined in terms of (Rust's char::is_whitespace and friends).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace troupe::text {

/// Byte offset of the first ill-formed UTF-8 sequence in `text`, or nullopt if
/// the whole string is well-formed (surrogates and overlongs are ill-formed).
std::optional<std::size_t> find_invalid_utf8(std::string_view text);

/// Length in bytes (1..4) of the UTF-8 sequence starting with `lead`; 1 for
/// bytes that cannot start a sequence. Assumes well-formed input.
inline std::size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return lead < 0xC0 ? 1 : 2;
  return lead < 0xF0 ? 3 : 4;
}

/// Decodes the code point at `text[pos]` of well-formed UTF-8 and advances
/// `pos` past it.
char32_t decode_utf8(std::string_view text, std::size_t& pos);

/// Appends the UTF-8 encoding of `code_point` to `out`.
void append_utf8(std::string& out, char32_t code_point);

/// Rust's String::from_utf8_lossy: each maximal ill-formed subpart becomes
/// one U+FFFD.
std::string utf8_lossy(std::string_view bytes);

/// Length of the well-formed prefix of `bytes` that can be emitted now when
/// more bytes may follow: stops before a trailing sequence that is still
/// incomplete. Ill-formed subparts inside the prefix are reported through
/// `lossy_out` (the prefix decoded with U+FFFD substitutions).
std::size_t utf8_lossy_stream(std::string_view bytes, std::string& lossy_out);

/// Unicode White_Space (Rust char::is_whitespace).
bool is_unicode_whitespace(char32_t c);

/// Unicode Numeric (general categories Nd, Nl, No; Rust char::is_numeric).
bool is_unicode_numeric(char32_t c);

/// Rust char::is_alphanumeric approximated with general categories: letters,
/// numbers and combining marks (Alphabetic includes most marks).
bool is_unicode_alphanumeric(char32_t c);

}  // namespace troupe::text

#pragma once
// UTF-8 helpers for text that must go into JSON: token texts can be partial
// characters, and echoed field names can be arbitrarily long.

#include <string>
#include <string_view>

namespace troupe::api {

/// Length of the valid UTF-8 sequence starting at `text[0]`, or 0 when the
/// bytes there are not one (overlong, surrogate, truncated or > U+10FFFF).
std::size_t utf8_sequence_length(std::string_view text);

/// `text` with every invalid byte sequence replaced by U+FFFD.
std::string sanitize_utf8(std::string_view text);

/// At most `max_bytes` of valid UTF-8 from the start of `text`, never
/// cutting a character, with "..." appended when shortened.
std::string truncate_utf8(std::string_view text, std::size_t max_bytes);

}  // namespace troupe::api

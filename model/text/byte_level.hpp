#pragma once
// GPT-2's reversible byte <-> printable-character table used by byte-level
// BPE: every byte maps to one code point (printable bytes to themselves,
// the others to U+0100 and up).

#include <cstdint>
#include <string>
#include <string_view>

namespace troupe::text {

/// The code point that stands for byte `b` in byte-level token strings.
char32_t byte_level_char(unsigned char b);

/// Appends the byte-level spelling of `bytes` (each byte as its character).
void append_byte_level(std::string_view bytes, std::string& out);

/// Converts a byte-level token spelling back to raw bytes, appending to
/// `out`. Returns false (leaving `out` unchanged) if some character is not
/// in the table; HF then falls back to the token's own UTF-8 bytes.
bool byte_level_to_bytes(std::string_view token, std::string& out);

}  // namespace troupe::text

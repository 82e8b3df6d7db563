#pragma once
// The one UTF-8 codec: validation, decoding, encoding and repair of UTF-8
// text. Well-formed means Unicode's Table 3-7: no overlongs, no surrogates,
// nothing above U+10FFFF, no sequence cut short. Decoding is lenient on
// purpose (see decode_utf8); callers that must reject ill-formed text check
// it first with find_invalid_utf8, callers that must show it repair it with
// utf8_lossy.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace troupe {

/// Byte offset of the first ill-formed sequence in `text`, or nullopt when
/// the whole text is well-formed UTF-8.
std::optional<std::size_t> find_invalid_utf8(std::string_view text);

/// True when `text` is well-formed UTF-8.
inline bool is_valid_utf8(std::string_view text) { return !find_invalid_utf8(text); }

/// True when every byte is ASCII, so byte and code point offsets agree.
bool is_ascii(std::string_view text);

/// Length in bytes (1..4) of the sequence that `lead` starts in well-formed
/// text; 1 for a byte that starts none (continuation bytes).
inline std::size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return lead < 0xC0 ? 1 : 2;
  return lead < 0xF0 ? 3 : 4;
}

/// Decodes the sequence at `text[pos]` and advances `pos` past it. The
/// continuation bytes are taken as written, so surrogates and overlongs
/// decode to their value (what Python's chr() can produce must survive a
/// round trip). A byte that starts no sequence (a continuation byte,
/// 0xF8..0xFF) or a sequence cut short by the end of `text` decodes to
/// U+FFFD and consumes one byte.
char32_t decode_utf8(std::string_view text, std::size_t& pos);

/// `text` as code points, decoded as decode_utf8 does.
std::u32string to_code_points(std::string_view text);

/// Appends the UTF-8 encoding of `code_point` (at most U+10FFFF; surrogates
/// are encoded as written, like decode_utf8 reads them).
void append_utf8(std::string& out, char32_t code_point);

/// `code_points` encoded as UTF-8.
std::string to_utf8(std::u32string_view code_points);

/// Number of code points in well-formed `text` (bytes that are not
/// continuation bytes).
std::size_t code_point_count(std::string_view text);

/// How utf8_lossy replaces what is ill-formed with U+FFFD.
enum class utf8_repair {
  per_subpart,  ///< one per maximal ill-formed subpart (Unicode's practice, Rust's from_utf8_lossy)
  per_byte,     ///< one per byte of an ill-formed sequence
};

/// `bytes` with every ill-formed part replaced by U+FFFD as `repair` says.
std::string utf8_lossy(std::string_view bytes, utf8_repair repair = utf8_repair::per_subpart);

/// For bytes that arrive in pieces: appends to `lossy_out` the longest
/// prefix of `bytes` that is final now (repaired per subpart, stopping before
/// a trailing sequence that more bytes could still complete) and returns its
/// length in bytes.
std::size_t utf8_lossy_stream(std::string_view bytes, std::string& lossy_out);

/// At most `max_bytes` of `text` (repaired per byte) without cutting a
/// character, with "..." appended when shortened: for echoing untrusted text.
std::string truncate_utf8(std::string_view text, std::size_t max_bytes);

}  // namespace troupe

#include "base/utf8.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace troupe {

namespace {

constexpr std::string_view replacement_utf8 = "\xEF\xBF\xBD";

/// Bounds of the second byte of a sequence given its lead byte (Unicode
/// Table 3-7); {0, 0} when the lead byte is not a valid start.
struct second_byte_range {
  unsigned char low;
  unsigned char high;
};

second_byte_range second_range(unsigned char lead) {
  if (lead >= 0xC2 && lead <= 0xDF) return {0x80, 0xBF};
  if (lead == 0xE0) return {0xA0, 0xBF};
  if (lead == 0xED) return {0x80, 0x9F};
  if (lead >= 0xE1 && lead <= 0xEF) return {0x80, 0xBF};
  if (lead == 0xF0) return {0x90, 0xBF};
  if (lead >= 0xF1 && lead <= 0xF3) return {0x80, 0xBF};
  if (lead == 0xF4) return {0x80, 0x8F};
  return {0, 0};
}

/// Result of checking one sequence at `pos`: `valid_length` > 0 when a
/// complete well-formed sequence starts there; otherwise `invalid_length`
/// bytes form a maximal ill-formed subpart, or `truncated` is set when the
/// input ends inside a sequence that could still become valid.
struct sequence_check {
  std::size_t valid_length = 0;
  std::size_t invalid_length = 0;
  bool truncated = false;
};

sequence_check check_sequence(std::string_view text, std::size_t pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  if (lead < 0x80) return {1, 0, false};
  const second_byte_range range = second_range(lead);
  if (range.low == 0) return {0, 1, false};
  const std::size_t length = utf8_length(lead);
  for (std::size_t i = 1; i < length; ++i) {
    if (pos + i >= text.size()) return {0, i, true};
    const auto byte = static_cast<unsigned char>(text[pos + i]);
    const unsigned char low = i == 1 ? range.low : 0x80;
    const unsigned char high = i == 1 ? range.high : 0xBF;
    if (byte < low || byte > high) return {0, i, false};
  }
  return {length, 0, false};
}

}  // namespace

std::optional<std::size_t> find_invalid_utf8(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    // Fast path over ASCII, eight bytes at a time.
    while (pos + 8 <= text.size()) {
      std::uint64_t word;
      std::memcpy(&word, text.data() + pos, 8);
      if (word & 0x8080808080808080ULL) break;
      pos += 8;
    }
    if (pos >= text.size()) break;
    const sequence_check check = check_sequence(text, pos);
    if (check.valid_length == 0) return pos;
    pos += check.valid_length;
  }
  return std::nullopt;
}

bool is_ascii(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

char32_t decode_utf8(std::string_view text, std::size_t& pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  if (lead < 0x80) {
    ++pos;
    return lead;
  }
  const std::size_t length = utf8_length(lead);
  if (lead < 0xC0 || lead >= 0xF8 || pos + length > text.size()) {
    ++pos;
    return U'\uFFFD';
  }
  char32_t code = lead & (0x7F >> length);
  for (std::size_t i = 1; i < length; ++i) code = (code << 6) | (static_cast<unsigned char>(text[pos + i]) & 0x3F);
  pos += length;
  return code;
}

std::u32string to_code_points(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (std::size_t pos = 0; pos < text.size();) out.push_back(decode_utf8(text, pos));
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string to_utf8(std::u32string_view code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (char32_t c : code_points) append_utf8(out, c);
  return out;
}

std::size_t code_point_count(std::string_view text) {
  return static_cast<std::size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::size_t utf8_lossy_stream(std::string_view bytes, std::string& lossy_out) {
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    const sequence_check check = check_sequence(bytes, pos);
    if (check.truncated) return pos;
    if (check.valid_length > 0) {
      lossy_out.append(bytes.substr(pos, check.valid_length));
      pos += check.valid_length;
    } else {
      lossy_out.append(replacement_utf8);
      pos += check.invalid_length;
    }
  }
  return pos;
}

std::string utf8_lossy(std::string_view bytes, utf8_repair repair) {
  std::string out;
  out.reserve(bytes.size());
  if (repair == utf8_repair::per_subpart) {
    const std::size_t done = utf8_lossy_stream(bytes, out);
    // An incomplete sequence at the very end is one ill-formed subpart.
    if (done < bytes.size()) out.append(replacement_utf8);
    return out;
  }
  for (std::size_t pos = 0; pos < bytes.size();) {
    const std::size_t length = check_sequence(bytes, pos).valid_length;
    out.append(length > 0 ? bytes.substr(pos, length) : replacement_utf8);
    pos += std::max<std::size_t>(length, 1);
  }
  return out;
}

std::string truncate_utf8(std::string_view text, std::size_t max_bytes) {
  std::string clean = utf8_lossy(text, utf8_repair::per_byte);
  if (clean.size() <= max_bytes) return clean;
  std::size_t end = 0;
  while (end < clean.size()) {
    const std::size_t length = utf8_length(static_cast<unsigned char>(clean[end]));
    if (end + length > max_bytes) break;
    end += length;
  }
  clean.resize(end);
  return clean + "...";
}

}  // namespace troupe

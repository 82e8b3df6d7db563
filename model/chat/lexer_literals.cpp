#include "model/chat/lexer_literals.hpp"

#include <cerrno>
#include <cstdlib>
#include <string>

#include "model/chat/errors.hpp"
#include "model/chat/unicode.hpp"

namespace troupe::jinja {

namespace {

bool is_digit_at(std::string_view s, std::size_t p) { return p < s.size() && s[p] >= '0' && s[p] <= '9'; }

/// (\d+_)*\d+ starting at p; returns the end, or p when there is no digit.
std::size_t digits_with_separators(std::string_view s, std::size_t p) {
  if (!is_digit_at(s, p)) return p;
  while (is_digit_at(s, p)) ++p;
  while (p + 1 < s.size() && s[p] == '_' && is_digit_at(s, p + 1)) {
    ++p;
    while (is_digit_at(s, p)) ++p;
  }
  return p;
}

/// e[+-]?(\d+_)*\d+ at p (case-insensitive); returns the end or 0.
std::size_t exponent_at(std::string_view s, std::size_t p) {
  if (p >= s.size() || (s[p] != 'e' && s[p] != 'E')) return 0;
  std::size_t q = p + 1;
  if (q < s.size() && (s[q] == '+' || s[q] == '-')) ++q;
  std::size_t end = digits_with_separators(s, q);
  return end == q ? 0 : end;
}

/// Matches jinja2's float_re at pos; returns the end or 0.
std::size_t float_end(std::string_view s, std::size_t pos) {
  if (pos > 0 && s[pos - 1] == '.') return 0;
  std::size_t p = digits_with_separators(s, pos);
  if (p == pos) return 0;
  std::size_t fraction_end = 0;
  if (p < s.size() && s[p] == '.') {
    std::size_t f = digits_with_separators(s, p + 1);
    if (f != p + 1) fraction_end = f;
  }
  if (fraction_end != 0) {
    if (std::size_t e = exponent_at(s, fraction_end); e != 0) return e;
  }
  if (std::size_t e = exponent_at(s, p); e != 0) return e;
  return fraction_end;
}

bool is_base_digit(char c, int base) {
  if (base == 2) return c == '0' || c == '1';
  if (base == 8) return c >= '0' && c <= '7';
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/// Matches jinja2's integer_re at pos; returns the end (or pos) and the base.
std::size_t integer_end(std::string_view s, std::size_t pos, int& base) {
  base = 10;
  if (s[pos] == '0' && pos + 1 < s.size()) {
    char kind = static_cast<char>(s[pos + 1] | 0x20);
    int prefixed = kind == 'b' ? 2 : kind == 'o' ? 8 : kind == 'x' ? 16 : 0;
    if (prefixed != 0) {
      std::size_t p = pos + 2;
      while (true) {
        std::size_t q = p < s.size() && s[p] == '_' ? p + 1 : p;
        if (q < s.size() && is_base_digit(s[q], prefixed)) {
          p = q + 1;
        } else {
          break;
        }
      }
      if (p > pos + 2) {
        base = prefixed;
        return p;
      }
    }
  }
  if (s[pos] == '0') {
    std::size_t p = pos + 1;
    while (p < s.size()) {
      std::size_t q = s[p] == '_' ? p + 1 : p;
      if (q < s.size() && s[q] == '0') {
        p = q + 1;
      } else {
        break;
      }
    }
    return p;
  }
  std::size_t p = pos + 1;
  while (p < s.size()) {
    std::size_t q = s[p] == '_' ? p + 1 : p;
    if (is_digit_at(s, q)) {
      p = q + 1;
    } else {
      break;
    }
  }
  return p;
}

std::string without_underscores(std::string_view text) {
  std::string out;
  for (char c : text)
    if (c != '_') out.push_back(c);
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// Decodes the \xXX, \uXXXX or \UXXXXXXXX escape whose letter is at in[i]; returns the index of its last digit.
std::size_t append_hex_escape(const std::u32string& in, std::size_t i, std::string& out, std::size_t offset) {
  char32_t kind = in[i];
  std::size_t digits = kind == 'x' ? 2 : (kind == 'u' ? 4 : 8);
  char32_t v = 0;
  for (std::size_t k = 0; k < digits; ++k) {
    int h = i + 1 + k < in.size() && in[i + 1 + k] < 0x80 ? hex_value(static_cast<char>(in[i + 1 + k])) : -1;
    if (h < 0) {
      const char* what = kind == 'x' ? "truncated \\xXX escape"
                                     : (kind == 'u' ? "truncated \\uXXXX escape" : "truncated \\UXXXXXXXX escape");
      throw syntax_error(what, offset);
    }
    v = v * 16 + static_cast<char32_t>(h);
  }
  if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) throw syntax_error("illegal Unicode character", offset);
  append_utf8(out, v);
  return i + digits;
}

/// Decodes the body of a string literal like Python's unicode-escape codec.
/// The character a one-letter escape stands for (\n, \t, \\, ...), or 0 when `c` is not one.
char simple_escape(char32_t c) {
  static constexpr std::string_view from = "\\'\"abfnrtv";
  static constexpr std::string_view to = "\\'\"\a\b\f\n\r\t\v";
  std::size_t at = c < 0x80 ? from.find(static_cast<char>(c)) : std::string_view::npos;
  return at == std::string_view::npos ? 0 : to[at];
}

std::string unescape(std::string_view body, std::size_t offset) {
  std::u32string in = to_code_points(body);
  std::string out;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '\\' || i + 1 >= in.size()) {
      append_utf8(out, in[i]);
      continue;
    }
    char32_t c = in[++i];
    if (char simple = simple_escape(c); simple != 0) {
      out.push_back(simple);
    } else if (c == '\n') {
      continue;  // line continuation
    } else if (c == 'x' || c == 'u' || c == 'U') {
      i = append_hex_escape(in, i, out, offset);
    } else if (c >= '0' && c <= '7') {
      char32_t v = c - '0';
      for (int k = 0; k < 2 && i + 1 < in.size() && in[i + 1] >= '0' && in[i + 1] <= '7'; ++k)
        v = v * 8 + (in[++i] - '0');
      append_utf8(out, v);
    } else if (c == 'N') {
      throw syntax_error("named unicode escapes (\\N{...}) are not supported", offset);
    } else if (c >= 0x80) {
      // Python backslash-replaces non-ASCII text before decoding, so backslash + "é" reads as "\\xe9".
      static constexpr char hex[] = "0123456789abcdef";
      int width = c <= 0xFF ? 2 : (c <= 0xFFFF ? 4 : 8);
      out.push_back('\\');
      out.push_back(width == 2 ? 'x' : (width == 4 ? 'u' : 'U'));
      for (int shift = (width - 1) * 4; shift >= 0; shift -= 4) out.push_back(hex[(c >> shift) & 0xF]);
    } else {
      out.push_back('\\');
      append_utf8(out, c);
    }
  }
  return out;
}

}  // namespace

literal_match match_number(std::string_view src, std::size_t pos) {
  literal_match m;
  if (!is_digit_at(src, pos)) return m;
  if (std::size_t end = float_end(src, pos); end != 0) {
    std::string text = without_underscores(src.substr(pos, end - pos));
    m.tok.type = token_type::floating;
    m.tok.float_value = std::strtod(text.c_str(), nullptr);
    m.length = end - pos;
    return m;
  }
  int base = 10;
  std::size_t end = integer_end(src, pos, base);
  std::string text = without_underscores(src.substr(pos, end - pos));
  errno = 0;
  long long v = std::strtoll(base == 10 ? text.c_str() : text.c_str() + 2, nullptr, base);
  if (errno == ERANGE) throw syntax_error("integer literal does not fit in 64 bits", pos);
  m.tok.type = token_type::integer;
  m.tok.int_value = v;
  m.length = end - pos;
  return m;
}

literal_match match_name(std::string_view src, std::size_t pos) {
  literal_match m;
  std::size_t p = pos;
  while (p < src.size()) {
    auto lead = static_cast<unsigned char>(src[p]);
    std::size_t len = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
    char32_t c = lead < 0x80 ? lead : to_code_points(src.substr(p, len)).front();
    bool ok = p == pos ? (c == '_' || is_identifier_start(c)) : is_identifier_continue(c);
    if (!ok) break;
    p += len;
  }
  if (p == pos) return m;
  m.tok.type = token_type::name;
  m.tok.text = std::string(src.substr(pos, p - pos));
  m.length = p - pos;
  return m;
}

literal_match match_string(std::string_view src, std::size_t pos) {
  literal_match m;
  char quote = src[pos];
  if (quote != '\'' && quote != '"') return m;
  std::size_t p = pos + 1;
  while (p < src.size() && src[p] != quote) p += src[p] == '\\' ? 2 : 1;
  if (p >= src.size()) return m;
  m.tok.type = token_type::string;
  m.tok.text = unescape(src.substr(pos + 1, p - pos - 1), pos);
  m.length = p + 1 - pos;
  return m;
}

}  // namespace troupe::jinja

#include "constraints/pattern_scanner.hpp"

#include "base/utf8.hpp"

namespace troupe::constraints {
namespace {

void add_class(char letter, std::vector<code_point_range>& out) {
  std::vector<code_point_range> ranges;
  switch (letter | 0x20) {
    case 'd':
      ranges = {{'0', '9'}};
      break;
    case 'w':
      ranges = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
      break;
    default:
      ranges = {{'\t', '\r'}, {' ', ' '}};
      break;
  }
  if (letter >= 'A' && letter <= 'Z') ranges = complement(std::move(ranges));
  out.insert(out.end(), ranges.begin(), ranges.end());
}

}  // namespace

pattern_scanner::pattern_scanner(std::string_view text, compile_budget& budget, std::string what)
    : text_(text), budget_(budget), what_(std::move(what)) {}

bool pattern_scanner::take(char c) {
  if (peek() != c || done()) return false;
  ++pos_;
  return true;
}

char32_t pattern_scanner::next_code_point() {
  if (done()) fail("unexpected end");
  const auto lead = static_cast<unsigned char>(text_[pos_]);
  const std::size_t length = utf8_length(lead);
  if (pos_ + length > text_.size() || !is_valid_utf8(text_.substr(pos_, length))) fail("ill-formed UTF-8");
  return decode_utf8(text_, pos_);
}

char32_t pattern_scanner::read_hex(std::size_t digits) {
  char32_t value = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    const char c = peek();
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') digit = (c | 0x20) - 'a' + 10;
    if (digit < 0) fail("expected a hexadecimal digit");
    value = value * 16 + static_cast<char32_t>(digit);
    skip();
  }
  if (value > 0x10FFFF) fail("code point beyond U+10FFFF");
  return value;
}

bool pattern_scanner::read_escape(char32_t& cp, std::vector<code_point_range>& ranges) {
  if (done()) fail("pattern ends with a backslash");
  const char c = peek();
  skip();
  switch (c) {
    case 'd':
    case 'D':
    case 'w':
    case 'W':
    case 's':
    case 'S':
      add_class(c, ranges);
      return true;
    case 'n':
      cp = '\n';
      return false;
    case 'r':
      cp = '\r';
      return false;
    case 't':
      cp = '\t';
      return false;
    case 'f':
      cp = '\f';
      return false;
    case 'v':
      cp = '\v';
      return false;
    case '0':
      cp = 0;
      return false;
    case 'x':
      cp = read_hex(2);
      return false;
    case 'U':
      cp = read_hex(8);
      return false;
    case 'u':
      if (take('{')) {
        std::size_t digits = 0;
        while (peek() != '}' && digits < 7) ++digits, skip();
        pos_ -= digits;
        cp = read_hex(digits);
        if (!take('}')) fail("expected '}' after \\u{");
      } else {
        cp = read_hex(4);
      }
      return false;
    default:
      if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '1' && c <= '9')) {
        pos_ -= 1;
        fail(std::string("unsupported escape \\") + c + " (anchors, backreferences and \\p classes are not supported)");
      }
      pos_ -= 1;
      cp = next_code_point();
      return false;
  }
}

std::vector<code_point_range> pattern_scanner::read_bracket() {
  const bool negated = take('^');
  std::vector<code_point_range> ranges;
  while (!take(']')) {
    if (done()) fail("unterminated character class");
    budget_.check();
    char32_t lo = 0;
    if (take('\\')) {
      if (read_escape(lo, ranges)) continue;
    } else {
      lo = next_code_point();
    }
    char32_t hi = lo;
    if (peek() == '-' && peek(1) != ']' && peek(1) != '\0') {
      skip();
      if (take('\\')) {
        std::vector<code_point_range> ignored;
        if (read_escape(hi, ignored)) fail("a class escape cannot end a range");
      } else {
        hi = next_code_point();
      }
      if (hi < lo) fail("character range out of order");
    }
    ranges.push_back({lo, hi});
  }
  return negated ? complement(std::move(ranges)) : ranges;
}

std::size_t pattern_scanner::read_number(std::size_t limit) {
  if (peek() < '0' || peek() > '9') fail("expected a number");
  std::size_t value = 0;
  while (peek() >= '0' && peek() <= '9') {
    value = value * 10 + static_cast<std::size_t>(peek() - '0');
    if (value > limit) fail("repetition count above " + std::to_string(limit));
    skip();
  }
  return value;
}

void pattern_scanner::fail(const std::string& message) const {
  budget_.fail(what_ + ": " + message + " at offset " + std::to_string(pos_));
}

std::vector<code_point_range> any_but_newline() { return complement({{'\n', '\n'}, {'\r', '\r'}}); }

}  // namespace troupe::constraints

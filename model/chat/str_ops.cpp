#include "model/chat/str_ops.hpp"

#include <algorithm>
#include <limits>

#include "model/chat/errors.hpp"
#include "model/chat/unicode.hpp"

namespace troupe::jinja {

namespace {

/// Clamps Python slice bounds [start, end) to [0, length].
std::pair<std::size_t, std::size_t> clamp_range(std::size_t length, std::optional<std::int64_t> start,
                                                std::optional<std::int64_t> end) {
  auto n = static_cast<std::int64_t>(length);
  auto fix = [n](std::int64_t i) { return i < 0 ? std::max<std::int64_t>(i + n, 0) : std::min(i, n); };
  std::int64_t s = start ? fix(*start) : 0;
  std::int64_t e = end ? fix(*end) : n;
  return {static_cast<std::size_t>(s), static_cast<std::size_t>(std::max(s, e))};
}

std::vector<std::string> split_whitespace(const std::u32string& s, std::int64_t maxsplit, bool from_right) {
  std::vector<std::string> out;
  if (!from_right) {
    std::size_t i = 0;
    while (true) {
      while (i < s.size() && is_space(s[i])) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit) {
        out.push_back(to_utf8(std::u32string_view(s).substr(i)));
        break;
      }
      std::size_t j = i;
      while (j < s.size() && !is_space(s[j])) ++j;
      out.push_back(to_utf8(std::u32string_view(s).substr(i, j - i)));
      i = j;
    }
    return out;
  }
  std::size_t i = s.size();
  while (true) {
    while (i > 0 && is_space(s[i - 1])) --i;
    if (i == 0) break;
    if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit) {
      out.push_back(to_utf8(std::u32string_view(s).substr(0, i)));
      break;
    }
    std::size_t j = i;
    while (j > 0 && !is_space(s[j - 1])) --j;
    out.push_back(to_utf8(std::u32string_view(s).substr(j, i - j)));
    i = j;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

/// Walks str.expandtabs' result: `keep(c)` for each code point other than a
/// tab, `spaces(n)` for the n spaces each tab becomes (none when tabsize <= 0).
template <typename Keep, typename Spaces>
void walk_expandtabs(const std::u32string& s, std::int64_t tabsize, Keep keep, Spaces spaces) {
  std::int64_t column = 0;
  for (char32_t c : s) {
    if (c != '\t') {
      keep(c);
      column = (c == '\n' || c == '\r') ? 0 : column + 1;
    } else if (tabsize > 0) {
      std::int64_t n = tabsize - column % tabsize;
      spaces(n);
      column += n;
    }
  }
}

}  // namespace

std::string py_strip(std::string_view text, const std::optional<std::string>& chars, bool left, bool right) {
  std::u32string s = to_code_points(text);
  std::u32string set = chars ? to_code_points(*chars) : std::u32string();
  auto strippable = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : is_space(c); };
  std::size_t begin = 0, end = s.size();
  if (left)
    while (begin < end && strippable(s[begin])) ++begin;
  if (right)
    while (end > begin && strippable(s[end - 1])) --end;
  return to_utf8(std::u32string_view(s).substr(begin, end - begin));
}

std::vector<std::string> py_split(std::string_view text, const std::optional<std::string>& sep, std::int64_t maxsplit,
                                  bool from_right) {
  if (!sep) return split_whitespace(to_code_points(text), maxsplit, from_right);
  if (sep->empty()) throw script_error("ValueError", "empty separator");
  std::vector<std::string> out;
  if (!from_right) {
    std::size_t pos = 0;
    while (maxsplit < 0 || static_cast<std::int64_t>(out.size()) < maxsplit) {
      std::size_t hit = text.find(*sep, pos);
      if (hit == std::string_view::npos) break;
      out.emplace_back(text.substr(pos, hit - pos));
      pos = hit + sep->size();
    }
    out.emplace_back(text.substr(pos));
    return out;
  }
  std::size_t end = text.size();
  while (maxsplit < 0 || static_cast<std::int64_t>(out.size()) < maxsplit) {
    if (end < sep->size()) break;
    std::size_t hit = text.rfind(*sep, end - sep->size());
    if (hit == std::string_view::npos) break;
    out.emplace_back(text.substr(hit + sep->size(), end - hit - sep->size()));
    end = hit;
  }
  out.emplace_back(text.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> py_splitlines(std::string_view text, bool keepends) {
  std::u32string s = to_code_points(text);
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (!is_line_break(s[i])) continue;
    std::size_t eol = i + 1;
    if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') eol = i + 2;
    out.push_back(to_utf8(std::u32string_view(s).substr(start, (keepends ? eol : i) - start)));
    start = eol;
    i = eol - 1;
  }
  if (start < s.size()) out.push_back(to_utf8(std::u32string_view(s).substr(start)));
  return out;
}

std::string py_replace(std::string_view text, std::string_view old_text, std::string_view new_text, std::int64_t count,
                       std::size_t max_bytes) {
  std::string out;
  auto check = [&] {
    if (out.size() > max_bytes)
      throw limit_error("string exceeds the limit of " + std::to_string(max_bytes) + " bytes");
  };
  std::int64_t done = 0;
  if (old_text.empty()) {
    std::u32string s = to_code_points(text);
    for (std::size_t i = 0; i <= s.size(); ++i) {
      if (count < 0 || done < count) {
        out += new_text;
        ++done;
      }
      if (i < s.size()) append_utf8(out, s[i]);
      check();
    }
    return out;
  }
  std::size_t hits = 0;
  for (std::size_t p = text.find(old_text);
       p != std::string_view::npos && (count < 0 || static_cast<std::int64_t>(hits) < count);
       p = text.find(old_text, p + old_text.size()))
    ++hits;
  if (new_text.size() > old_text.size() && hits > 0 &&
      (new_text.size() - old_text.size()) > (max_bytes - std::min(max_bytes, text.size())) / hits)
    throw limit_error("string exceeds the limit of " + std::to_string(max_bytes) + " bytes");
  out.reserve(text.size() + hits * new_text.size());
  std::size_t pos = 0;
  while (count < 0 || done < count) {
    std::size_t hit = text.find(old_text, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos));
    out.append(new_text);
    check();
    pos = hit + old_text.size();
    ++done;
  }
  out.append(text.substr(pos));
  check();
  return out;
}

std::int64_t py_find(std::string_view text, std::string_view sub, std::optional<std::int64_t> start,
                     std::optional<std::int64_t> end, bool from_right) {
  std::u32string s = to_code_points(text);
  std::u32string needle = to_code_points(sub);
  auto [b, e] = clamp_range(s.size(), start, end);
  if (needle.size() > e - b) return (needle.empty() && b <= s.size() && b <= e) ? static_cast<std::int64_t>(b) : -1;
  std::u32string_view window = std::u32string_view(s).substr(b, e - b);
  std::size_t hit = from_right ? window.rfind(needle) : window.find(needle);
  return hit == std::u32string_view::npos ? -1 : static_cast<std::int64_t>(b + hit);
}

std::int64_t py_count(std::string_view text, std::string_view sub, std::optional<std::int64_t> start,
                      std::optional<std::int64_t> end) {
  std::u32string s = to_code_points(text);
  std::u32string needle = to_code_points(sub);
  auto [b, e] = clamp_range(s.size(), start, end);
  if (needle.empty()) return static_cast<std::int64_t>(e - b + 1);
  std::u32string_view window = std::u32string_view(s).substr(b, e - b);
  std::int64_t n = 0;
  for (std::size_t pos = window.find(needle); pos != std::u32string_view::npos;
       pos = window.find(needle, pos + needle.size()))
    ++n;
  return n;
}

std::string py_substring(std::string_view text, std::optional<std::int64_t> start, std::optional<std::int64_t> end) {
  std::u32string s = to_code_points(text);
  auto [b, e] = clamp_range(s.size(), start, end);
  return to_utf8(std::u32string_view(s).substr(b, e - b));
}

std::string py_justify(std::string_view text, std::int64_t width, char32_t fill, char how, std::size_t max_bytes) {
  auto len = static_cast<std::int64_t>(code_point_count(text));
  if (width <= len) return std::string(text);
  std::int64_t margin = width - len;
  std::string fill_text;
  append_utf8(fill_text, fill);
  if (!fits_in(text.size(), static_cast<std::uint64_t>(margin), fill_text.size(), max_bytes))
    raise_string_limit("width " + std::to_string(width), max_bytes);
  std::int64_t left = how == '<' ? 0 : how == '>' ? margin : margin / 2 + (margin & width & 1);
  std::string out;
  out.reserve(text.size() + static_cast<std::size_t>(margin) * fill_text.size());
  for (std::int64_t i = 0; i < left; ++i) out += fill_text;
  out += text;
  for (std::int64_t i = left; i < margin; ++i) out += fill_text;
  return out;
}

std::string py_zfill(std::string_view text, std::int64_t width, std::size_t max_bytes) {
  auto len = static_cast<std::int64_t>(code_point_count(text));
  if (width <= len) return std::string(text);
  if (!fits_in(text.size(), static_cast<std::uint64_t>(width - len), 1, max_bytes))
    raise_string_limit("width " + std::to_string(width), max_bytes);
  std::string zeros(static_cast<std::size_t>(width - len), '0');
  if (!text.empty() && (text[0] == '+' || text[0] == '-'))
    return std::string(1, text[0]) + zeros + std::string(text.substr(1));
  return zeros + std::string(text);
}

std::string py_expandtabs(std::string_view text, std::int64_t tabsize, std::size_t max_bytes) {
  if (tabsize > std::numeric_limits<int>::max() || tabsize < std::numeric_limits<int>::min())
    throw script_error("OverflowError", "Python int too large to convert to C int");  // CPython's int tabsize
  std::u32string s = to_code_points(text);
  // Sized first: a few tabs with a huge tabsize must fail before allocating.
  auto bytes = text.size() - static_cast<std::size_t>(std::count(text.begin(), text.end(), '\t'));
  walk_expandtabs(
      s, tabsize, [](char32_t) {},
      [&](std::int64_t spaces) {
        if (!fits_in(bytes, static_cast<std::uint64_t>(spaces), 1, max_bytes))
          raise_string_limit("expandtabs(" + std::to_string(tabsize) + ")", max_bytes);
        bytes += static_cast<std::size_t>(spaces);
      });
  std::string out;
  out.reserve(bytes);
  walk_expandtabs(
      s, tabsize, [&](char32_t c) { append_utf8(out, c); },
      [&](std::int64_t spaces) { out.append(static_cast<std::size_t>(spaces), ' '); });
  return out;
}

}  // namespace troupe::jinja

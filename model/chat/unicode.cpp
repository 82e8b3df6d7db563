#include "model/chat/unicode.hpp"

#include <algorithm>
#include <cstdint>

#include "model/chat/unicode_tables.hpp"

namespace troupe::jinja {

namespace {

using tables::case_mapping;
using tables::cp_range;

bool in_ranges(const cp_range* ranges, std::size_t size, char32_t c) {
  const cp_range* end = ranges + size;
  const cp_range* it = std::upper_bound(ranges, end, c, [](char32_t v, const cp_range& r) { return v < r.first; });
  return it != ranges && c <= (it - 1)->last;
}

const case_mapping* find_mapping(const case_mapping* table, std::size_t size, char32_t c) {
  const case_mapping* end = table + size;
  const case_mapping* it =
      std::lower_bound(table, end, c, [](const case_mapping& m, char32_t v) { return m.from < v; });
  return it != end && it->from == c ? it : nullptr;
}

/// Appends the mapping of `c` from `table`, or `c` itself when unmapped.
void append_mapped(std::u32string& out, const case_mapping* table, std::size_t size, char32_t c) {
  const case_mapping* m = find_mapping(table, size, c);
  if (m == nullptr) {
    out.push_back(c);
    return;
  }
  for (char32_t t : m->to)
    if (t != 0) out.push_back(t);
}

void append_upper(std::u32string& out, char32_t c) { append_mapped(out, tables::to_upper, tables::to_upper_size, c); }

void append_title(std::u32string& out, char32_t c) {
  if (find_mapping(tables::to_title, tables::to_title_size, c) != nullptr)
    append_mapped(out, tables::to_title, tables::to_title_size, c);
  else
    append_upper(out, c);
}

bool is_case_ignorable(char32_t c) { return in_ranges(tables::case_ignorable, tables::case_ignorable_size, c); }

/// CPython's handle_capital_sigma: U+03A3 lowers to final sigma after a cased
/// letter when no cased letter follows (case-ignorable characters skipped).
char32_t lower_sigma(const std::u32string& s, std::size_t i) {
  std::size_t j = i;
  char32_t c = 0;
  bool found = false;
  while (j > 0) {
    c = s[--j];
    if (!is_case_ignorable(c)) {
      found = true;
      break;
    }
  }
  bool final_sigma = found && is_cased(c);
  if (final_sigma && i + 1 < s.size()) {
    std::size_t k = i + 1;
    while (k < s.size() && is_case_ignorable(s[k])) ++k;
    final_sigma = k == s.size() || !is_cased(s[k]);
  }
  return final_sigma ? U'\u03C2' : U'\u03C3';
}

/// Lower-cases s[i] into `out`, with the sigma context rule.
void append_lower_at(std::u32string& out, const std::u32string& s, std::size_t i) {
  if (s[i] == U'\u03A3')
    out.push_back(lower_sigma(s, i));
  else
    append_mapped(out, tables::to_lower, tables::to_lower_size, s[i]);
}

template <typename Pred>
bool all_of_nonempty(std::string_view text, Pred pred) {
  if (text.empty()) return false;
  std::u32string cps = to_code_points(text);
  return std::all_of(cps.begin(), cps.end(), pred);
}

}  // namespace

bool is_space(char32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
         c == 0x2028 || c == 0x2029;
}

bool is_printable(char32_t c) { return in_ranges(tables::printable, tables::printable_size, c); }
bool is_alpha(char32_t c) { return in_ranges(tables::alpha, tables::alpha_size, c); }
bool is_decimal(char32_t c) { return in_ranges(tables::decimal, tables::decimal_size, c); }
bool is_digit(char32_t c) { return in_ranges(tables::digit, tables::digit_size, c); }
bool is_numeric(char32_t c) { return in_ranges(tables::numeric, tables::numeric_size, c); }
bool is_lower(char32_t c) { return in_ranges(tables::lower, tables::lower_size, c); }
bool is_upper(char32_t c) { return in_ranges(tables::upper, tables::upper_size, c); }
bool is_titlecase(char32_t c) { return in_ranges(tables::title, tables::title_size, c); }
bool is_cased(char32_t c) { return in_ranges(tables::cased, tables::cased_size, c); }
bool is_identifier_start(char32_t c) { return in_ranges(tables::identifier_start, tables::identifier_start_size, c); }
bool is_identifier_continue(char32_t c) {
  return in_ranges(tables::identifier_continue, tables::identifier_continue_size, c);
}
bool is_word_char(char32_t c) { return c == '_' || is_alpha(c) || is_numeric(c) || is_decimal(c) || is_digit(c); }

std::string py_lower(std::string_view text) {
  std::u32string s = to_code_points(text);
  std::u32string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) append_lower_at(out, s, i);
  return to_utf8(out);
}

std::string py_upper(std::string_view text) {
  std::u32string out;
  for (char32_t c : to_code_points(text)) append_upper(out, c);
  return to_utf8(out);
}

std::string py_casefold(std::string_view text) {
  std::u32string out;
  for (char32_t c : to_code_points(text)) {
    if (find_mapping(tables::to_casefold, tables::to_casefold_size, c) != nullptr)
      append_mapped(out, tables::to_casefold, tables::to_casefold_size, c);
    else
      append_mapped(out, tables::to_lower, tables::to_lower_size, c);
  }
  return to_utf8(out);
}

std::string py_swapcase(std::string_view text) {
  std::u32string s = to_code_points(text);
  std::u32string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (is_upper(s[i]))
      append_lower_at(out, s, i);
    else if (is_lower(s[i]))
      append_upper(out, s[i]);
    else
      out.push_back(s[i]);
  }
  return to_utf8(out);
}

std::string py_title(std::string_view text) {
  std::u32string s = to_code_points(text);
  std::u32string out;
  bool previous_is_cased = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (previous_is_cased)
      append_lower_at(out, s, i);
    else
      append_title(out, s[i]);
    previous_is_cased = is_cased(s[i]);
  }
  return to_utf8(out);
}

std::string py_capitalize(std::string_view text) {
  std::u32string s = to_code_points(text);
  std::u32string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i == 0)
      append_title(out, s[i]);
    else
      append_lower_at(out, s, i);
  }
  return to_utf8(out);
}

bool py_isalpha(std::string_view t) { return all_of_nonempty(t, is_alpha); }
bool py_isdecimal(std::string_view t) { return all_of_nonempty(t, is_decimal); }
bool py_isdigit(std::string_view t) { return all_of_nonempty(t, is_digit); }
bool py_isnumeric(std::string_view t) { return all_of_nonempty(t, is_numeric); }
bool py_isspace(std::string_view t) { return all_of_nonempty(t, is_space); }
bool py_isalnum(std::string_view t) {
  return all_of_nonempty(t, [](char32_t c) { return is_alpha(c) || is_decimal(c) || is_digit(c) || is_numeric(c); });
}
bool py_isprintable(std::string_view t) {
  std::u32string s = to_code_points(t);
  return std::all_of(s.begin(), s.end(), is_printable);
}

bool py_islower(std::string_view text) {
  bool cased = false;
  for (char32_t c : to_code_points(text)) {
    if (is_upper(c) || is_titlecase(c)) return false;
    if (is_lower(c)) cased = true;
  }
  return cased;
}

bool py_isupper(std::string_view text) {
  bool cased = false;
  for (char32_t c : to_code_points(text)) {
    if (is_lower(c) || is_titlecase(c)) return false;
    if (is_upper(c)) cased = true;
  }
  return cased;
}

bool py_istitle(std::string_view text) {
  bool cased = false;
  bool previous_is_cased = false;
  for (char32_t c : to_code_points(text)) {
    if (is_upper(c) || is_titlecase(c)) {
      if (previous_is_cased) return false;
      previous_is_cased = cased = true;
    } else if (is_lower(c)) {
      if (!previous_is_cased) return false;
      previous_is_cased = cased = true;
    } else {
      previous_is_cased = false;
    }
  }
  return cased;
}

bool py_isidentifier(std::string_view text) {
  std::u32string s = to_code_points(text);
  if (s.empty() || !is_identifier_start(s[0])) return false;
  return std::all_of(s.begin() + 1, s.end(), is_identifier_continue);
}

}  // namespace troupe::jinja

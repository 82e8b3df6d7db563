#include "model/text/regex.hpp"

#include <pcre2.h>

#include <cstdio>
#include <stdexcept>

#include "base/utf8.hpp"
#include "model/text/unicode_additions.hpp"

namespace troupe::text {

namespace {

// Oniguruma's Unicode \s is exactly White_Space; PCRE2's \s and \p{Xsp} also
// take U+180E, so the set is spelled out.
constexpr std::string_view space_items =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}"
    "\\x{3000}";
constexpr std::string_view hex_items = "0-9a-fA-F";

/// "\x{A}-\x{B}..." for the code points PCRE2's tables lack in general
/// category `name` ("L", "Lo", "L&"...); empty for other property names.
std::string added_category_items(std::string_view name) {
  std::string items;
  if (name.empty() || name.size() > 2) return items;
  for (const category_range& range : unicode_additions()) {
    const std::string_view category(range.category, 2);
    const bool cased_letter = name == "L&" && category[0] == 'L' && category[1] != 'm' && category[1] != 'o';
    if (!(name.size() == 1 ? category[0] == name[0] : category == name) && !cased_letter) continue;
    char buffer[40];
    std::snprintf(buffer, sizeof buffer, "\\x{%X}-\\x{%X}", static_cast<unsigned>(range.first),
                  static_cast<unsigned>(range.last));
    items += buffer;
  }
  return items;
}

/// Class items for Oniguruma's \w: Letter, Mark, Number, Connector_Punctuation.
std::string word_items() {
  std::string items = "\\p{L}\\p{M}\\p{N}\\p{Pc}";
  for (const char* name : {"L", "M", "N", "Pc"}) items += added_category_items(name);
  return items;
}

/// Appends the PCRE2 form of escape `letter` (already past the backslash).
/// Returns false when the escape needs no rewriting.
bool translate_class_escape(char letter, bool in_class, std::string& out) {
  std::string items;
  bool negated = false;
  switch (letter) {
    case 's':
      items = space_items;
      break;
    case 'S':
      items = space_items, negated = true;
      break;
    case 'w':
      items = word_items();
      break;
    case 'W':
      items = word_items(), negated = true;
      break;
    case 'h':
      items = hex_items;
      break;
    case 'H':
      items = hex_items, negated = true;
      break;
    default:
      return false;
  }
  if (in_class && negated) {
    // A negated set cannot be spelled inside a class; PCRE2's own \S and \W
    // differ from Oniguruma's only on rare characters, \H not at all alike.
    if (letter == 'H') throw std::runtime_error("regex: \\H inside a character class is not supported");
    out.push_back('\\');
    out.push_back(letter);
  } else if (in_class) {
    out.append(items);
  } else {
    out.append(negated ? "[^" : "[").append(items).append("]");
  }
  return true;
}

/// Rewrites \p{X} / \P{X} / \pX starting at pattern[i] (a backslash) so that
/// general categories include the code points PCRE2 does not know yet.
/// Returns the number of pattern bytes consumed, or 0 to copy it unchanged.
std::size_t translate_property(std::string_view pattern, std::size_t i, bool in_class, std::string& out) {
  const bool upper = pattern[i + 1] == 'P';
  std::size_t end = i + 3;
  std::string_view name = pattern.substr(i + 2, 1);
  if (pattern.size() > i + 2 && pattern[i + 2] == '{') {
    const std::size_t close = pattern.find('}', i + 3);
    if (close == std::string_view::npos) return 0;
    name = pattern.substr(i + 3, close - i - 3);
    end = close + 1;
  }
  const bool caret = name.starts_with('^');
  if (caret) name.remove_prefix(1);
  const bool negated = upper != caret;
  const std::string extra = added_category_items(name);
  if (extra.empty() || (in_class && negated)) return 0;
  const std::string items = "\\p{" + std::string(name) + "}" + extra;
  if (in_class) {
    out.append(items);
  } else {
    out.append(negated ? "[^" : "[").append(items).append("]");
  }
  return end - i;
}

bool is_hex(char c) { return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f'); }

}  // namespace

std::string translate_oniguruma_pattern(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 16);
  int class_depth = 0;
  std::size_t i = 0;
  while (i < pattern.size()) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char letter = pattern[i + 1];
      const std::size_t property_length = (letter == 'p' || letter == 'P') && i + 2 < pattern.size()
                                              ? translate_property(pattern, i, class_depth > 0, out)
                                              : 0;
      if (property_length > 0) {
        i += property_length;
      } else if (translate_class_escape(letter, class_depth > 0, out)) {
        i += 2;
      } else if (letter == 'u' && i + 6 <= pattern.size() && is_hex(pattern[i + 2]) && is_hex(pattern[i + 3]) &&
                 is_hex(pattern[i + 4]) && is_hex(pattern[i + 5])) {
        out.append("\\x{").append(pattern.substr(i + 2, 4)).append("}");
        i += 6;
      } else {
        const std::size_t length = 1 + utf8_length(static_cast<unsigned char>(letter));
        out.append(pattern.substr(i, length));
        i += length;
      }
      continue;
    }
    if (c == '[') {
      if (class_depth > 0 && i + 1 < pattern.size() && pattern[i + 1] == ':') {
        const std::size_t close = pattern.find(":]", i + 2);
        const std::size_t stop = close == std::string_view::npos ? pattern.size() : close + 2;
        out.append(pattern.substr(i, stop - i));
        i = stop;
        continue;
      }
      ++class_depth;
      out.push_back(c);
      ++i;
      // A ']' right after '[' or '[^' is a literal.
      if (i < pattern.size() && pattern[i] == '^') out.push_back(pattern[i++]);
      if (i < pattern.size() && pattern[i] == ']') out.push_back(pattern[i++]);
      continue;
    }
    if (c == ']' && class_depth > 0) --class_depth;
    out.push_back(c);
    ++i;
  }
  return out;
}

struct regex::compiled {
  pcre2_code* code = nullptr;
  ~compiled() { pcre2_code_free(code); }
};

namespace {

/// Per-thread PCRE2 scratch: match data for one pair, and a JIT stack large
/// enough for long inputs.
struct thread_match_state {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(64 * 1024, 16 * 1024 * 1024, nullptr);

  thread_match_state() {
    if (stack != nullptr) pcre2_jit_stack_assign(context, nullptr, stack);
    pcre2_set_match_limit(context, 50'000'000);
  }
  ~thread_match_state() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
  thread_match_state(const thread_match_state&) = delete;
  thread_match_state& operator=(const thread_match_state&) = delete;
};

thread_match_state& match_state() {
  thread_local thread_match_state state;
  return state;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

regex_error::regex_error(std::string_view where, std::string detail)
    : std::runtime_error(std::string(where) + ": " + detail), detail_(std::move(detail)) {}

regex::regex(std::string_view pattern, std::string_view where)
    : pattern_(pattern), compiled_(std::make_unique<compiled>()) {
  std::string translated;
  try {
    translated = translate_oniguruma_pattern(pattern);
  } catch (const std::runtime_error& e) {
    throw regex_error(where, e.what());
  }
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                  PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &error_code, &error_offset, nullptr);
  if (compiled_->code == nullptr) {
    throw regex_error(where, "bad regex \"" + std::string(pattern) + "\": " + pcre2_message(error_code) +
                                 " at offset " + std::to_string(error_offset));
  }
  // Without JIT (unsupported CPU) pcre2_match falls back to the interpreter.
  pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE);
}

regex::~regex() = default;

void regex::find_all(std::string_view text, std::vector<match_range>& out) const {
  thread_match_state& state = match_state();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t position = 0;
  std::size_t previous_end = std::string_view::npos;
  while (position <= text.size()) {
    const int rc =
        pcre2_match(compiled_->code, subject, text.size(), position, PCRE2_NO_UTF_CHECK, state.data, state.context);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) throw std::runtime_error("regex \"" + pattern_ + "\": matching failed: " + pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
    const std::size_t begin = ovector[0];
    const std::size_t end = ovector[1];
    if (begin == end && end == previous_end) {
      // No empty match directly after the previous match: step one character.
      if (end >= text.size()) return;
      position = end + utf8_length(static_cast<unsigned char>(text[end]));
      continue;
    }
    out.push_back({begin, end});
    position = end;
    previous_end = end;
  }
}

}  // namespace troupe::text

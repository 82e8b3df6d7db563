#pragma once
// PCRE2 (JIT, UTF, Unicode properties) configured to behave like the
// Oniguruma regexes HF tokenizers compiles from tokenizer.json: \s and \w
// follow Oniguruma's Unicode definitions, \h is a hex digit, ^/$ are line
// anchors, and iteration skips an empty match right after the previous one.

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::text {

/// Byte range [begin, end) of one regex match inside the searched text.
struct match_range {
  std::size_t begin;
  std::size_t end;
};

/// A pattern that does not compile: what() is "<where>: <detail>", detail()
/// the reason alone (for callers that name the place in their own words).
class regex_error : public std::runtime_error {
 public:
  regex_error(std::string_view where, std::string detail);
  const std::string& detail() const { return detail_; }

 private:
  std::string detail_;
};

/// A compiled pattern; immutable and safe to use from many threads at once.
class regex {
 public:
  /// Compiles `pattern` (Oniguruma syntax as found in tokenizer.json). Throws
  /// regex_error naming `where` and the PCRE2 message on a bad pattern.
  regex(std::string_view pattern, std::string_view where);
  ~regex();
  regex(const regex&) = delete;
  regex& operator=(const regex&) = delete;

  /// Appends every match in `text` to `out`, left to right, as HF's
  /// find_iter yields them (empty matches included). `text` must be valid
  /// UTF-8. Throws std::runtime_error if PCRE2 reports a matching error.
  void find_all(std::string_view text, std::vector<match_range>& out) const;

  /// The pattern as given.
  const std::string& pattern() const { return pattern_; }

 private:
  struct compiled;
  std::string pattern_;
  std::unique_ptr<compiled> compiled_;
};

/// Rewrites Oniguruma-only escapes into PCRE2 equivalents (exposed for tests).
std::string translate_oniguruma_pattern(std::string_view pattern);

}  // namespace troupe::text

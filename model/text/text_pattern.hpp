#pragma once
// The {"String": ...} / {"Regex": ...} patterns of Split, Replace (normalizer
// and decoder). HF compiles a String pattern as an escaped regex; a non-empty
// literal is searched directly here, which finds the same matches faster.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_field.hpp"
#include "model/text/regex.hpp"

namespace troupe::text {

/// A literal or regex pattern with HF's find_matches semantics.
class text_pattern {
 public:
  /// A literal pattern (an empty literal behaves like the empty regex).
  static text_pattern literal(std::string text);
  /// A regex pattern in Oniguruma syntax; `where` names it in errors.
  static text_pattern regular(std::string_view pattern, std::string_view where);

  /// Appends every match in `text` (valid UTF-8), left to right. Empty text
  /// has no matches.
  void find_matches(std::string_view text, std::vector<match_range>& out) const;

  /// The literal searched for, or empty for a regex pattern.
  std::string_view literal_text() const { return regex_ ? std::string_view() : std::string_view(literal_); }

  /// `text` with every match replaced by `content`.
  std::string replace_all(std::string_view text, std::string_view content) const;

 private:
  std::string literal_;
  std::shared_ptr<const regex> regex_;  ///< set for regex and empty-literal patterns
};

/// Parses a pattern object {"String": s} or {"Regex": r}.
text_pattern make_text_pattern(const json_field& node);

}  // namespace troupe::text

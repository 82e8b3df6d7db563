#pragma once
// Code points that PCRE2's Unicode tables (14.0 in PCRE2 10.42) do not know
// but HF tokenizers' Oniguruma does: regex translation adds them to \p{..}.

#include <span>

namespace troupe::text {

/// A range of code points sharing one general category.
struct category_range {
  char32_t first;
  char32_t last;
  char category[3];  ///< two-letter general category, e.g. "Lo"
};

/// The ranges, sorted by code point (generated table).
std::span<const category_range> unicode_additions();

}  // namespace troupe::text

#pragma once
// Unicode property and case tables taken from the Python that renders the
// reference fixtures (generated into unicode_tables.cpp by
// tools/fixtures/make_chat_unicode_tables.py). Internal to model/chat.

#include <cstddef>

namespace troupe::jinja::tables {

/// An inclusive range of code points [first, last]; tables are sorted and disjoint.
struct cp_range {
  char32_t first;
  char32_t last;
};

/// One code point's full case mapping (1 to 3 code points, unused slots 0).
struct case_mapping {
  char32_t from;
  char32_t to[3];
};

// Python str predicates, one code point at a time.
extern const cp_range alpha[], decimal[], digit[], numeric[], printable[];
extern const std::size_t alpha_size, decimal_size, digit_size, numeric_size, printable_size;
extern const cp_range lower[], upper[], title[], cased[], case_ignorable[];
extern const std::size_t lower_size, upper_size, title_size, cased_size, case_ignorable_size;
extern const cp_range identifier_start[], identifier_continue[];
extern const std::size_t identifier_start_size, identifier_continue_size;

// Full case mappings, sorted by `from`. to_title lists only the code points whose
// title case differs from their upper case; to_casefold those differing from lower case.
extern const case_mapping to_lower[], to_upper[], to_title[], to_casefold[];
extern const std::size_t to_lower_size, to_upper_size, to_title_size, to_casefold_size;

}  // namespace troupe::jinja::tables

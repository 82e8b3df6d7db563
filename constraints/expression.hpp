#pragma once
// The grammar every constraint kind compiles to: rules whose bodies are
// regular expressions over bytes that may also call other rules (a
// recursive transition network). Regex and choice constraints are one rule
// without calls; JSON and GBNF grammars use calls for recursion.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::constraints {

/// An inclusive range of byte values.
struct byte_range {
  std::uint8_t lo = 0;  ///< first byte
  std::uint8_t hi = 0;  ///< last byte (inclusive)
};

/// An inclusive range of Unicode code points.
struct code_point_range {
  char32_t lo = 0;  ///< first code point
  char32_t hi = 0;  ///< last code point (inclusive)
};

struct expression;
/// Expressions are immutable and shared (a DAG).
using expression_ptr = std::shared_ptr<const expression>;

/// One node of a rule body.
struct expression {
  /// What the node matches.
  enum class kind {
    byte_set,  ///< one byte from `ranges`
    sequence,  ///< `items` one after the other
    choice,    ///< one of `items`
    repeat,    ///< items[0] between `min` and `max` times
    call,      ///< the rule `rule`
    members,   ///< JSON object members: items[0] is the separator, items[1..] members
  };
  kind type = kind::sequence;
  std::vector<byte_range> ranges;     ///< byte_set
  std::vector<expression_ptr> items;  ///< children
  std::size_t min = 0;                ///< repeat: fewest repetitions
  std::size_t max = 0;                ///< repeat: most repetitions (unbounded = npos)
  std::size_t rule = 0;               ///< call: the rule index
  std::vector<bool> required;         ///< members: whether items[i + 1] must appear
};

/// Marks an unbounded repeat.
inline constexpr std::size_t unbounded = std::numeric_limits<std::size_t>::max();

/// A set of rules; `root` is where a document starts.
struct rule_set {
  std::vector<expression_ptr> bodies;  ///< [rules] body of each rule (null until defined)
  std::vector<std::string> names;      ///< [rules] for error messages
  std::size_t root = 0;                ///< the start rule

  /// Adds an undefined rule named `name`; returns its index.
  std::size_t add_rule(std::string name);
};

/// Matches exactly the bytes of `text`.
expression_ptr literal(std::string_view text);
/// Matches one byte from `ranges`.
expression_ptr byte_set(std::vector<byte_range> ranges);
/// Matches the UTF-8 encoding of one code point from `ranges`.
expression_ptr code_point_set(const std::vector<code_point_range>& ranges);
/// Matches `items` in order (the empty string when there are none).
expression_ptr sequence(std::vector<expression_ptr> items);
/// Matches one of `items`.
expression_ptr choice(std::vector<expression_ptr> items);
/// Matches `item` between `min` and `max` times (`max` may be unbounded).
expression_ptr repeat(expression_ptr item, std::size_t min, std::size_t max);
/// Matches the rule with index `rule`.
expression_ptr call(std::size_t rule);
/// Matches JSON object members in the given order, separated by
/// `separator`; optional ones may be left out.
expression_ptr members(expression_ptr separator, std::vector<expression_ptr> items, std::vector<bool> required);

/// The code points not in `ranges` (surrogates excluded).
std::vector<code_point_range> complement(std::vector<code_point_range> ranges);

}  // namespace troupe::constraints

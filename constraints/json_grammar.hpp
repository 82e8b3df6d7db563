#pragma once
// Building blocks of JSON documents as expressions, under one whitespace
// policy: at most one space or newline after '{', '[', ':' and ',' and
// before '}' and ']', so a model cannot loop on whitespace.

#include <cstddef>

#include "constraints/expression.hpp"

namespace troupe::constraints {

/// Adds JSON pieces to a rule set; the recursive "any value" rules are
/// added once, on first use.
class json_builder {
 public:
  /// Adds rules to `rules` (kept by reference).
  explicit json_builder(rule_set& rules) : rules_(rules) {}

  /// Nothing, one space or one newline.
  static expression_ptr whitespace();
  /// One character of a JSON string body: unescaped or an escape sequence.
  static expression_ptr string_char();
  /// A JSON string whose body is `body` (quotes added).
  static expression_ptr quoted(expression_ptr body);
  /// Any JSON string.
  static expression_ptr any_string();
  /// An integer of at most 16 digits; non-negative only when `non_negative`.
  static expression_ptr integer(bool non_negative = false);
  /// A number: integer part, optional fraction and exponent (bounded digits).
  static expression_ptr number(bool non_negative = false);
  /// An object with any keys whose values match `value`.
  static expression_ptr object_of(const expression_ptr& value);
  /// An object with the given `members` ("key": value expressions).
  static expression_ptr object_with(std::vector<expression_ptr> members, std::vector<bool> required);
  /// `"key": value` for a literal key.
  static expression_ptr member(std::string_view key, expression_ptr value);
  /// An array of `item` with between `min` and `max` elements.
  static expression_ptr array_of(const expression_ptr& item, std::size_t min, std::size_t max);
  /// Any JSON value (a call of the recursive rule).
  expression_ptr any_value();
  /// Any JSON object.
  expression_ptr any_object();

 private:
  rule_set& rules_;
  std::size_t value_rule_ = unbounded;
  std::size_t object_rule_ = unbounded;
};

}  // namespace troupe::constraints

#pragma once
// Reading the character-level syntax regular expressions and GBNF share:
// UTF-8 code points, backslash escapes and bracket classes.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "constraints/budget.hpp"
#include "constraints/expression.hpp"

namespace troupe::constraints {

/// A cursor over pattern text; errors name the byte offset.
class pattern_scanner {
 public:
  /// Scans `text`; errors go through `budget`, prefixed with `what`.
  pattern_scanner(std::string_view text, compile_budget& budget, std::string what);

  /// True at the end of the text.
  bool done() const { return pos_ >= text_.size(); }
  /// The next byte (0 at the end).
  char peek(std::size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }
  /// Moves the cursor to byte `offset` (a value offset() returned).
  void seek(std::size_t offset) { pos_ = offset; }
  /// Skips `count` bytes.
  void skip(std::size_t count = 1) { pos_ += count; }
  /// Length of the text in bytes.
  std::size_t size() const { return text_.size(); }
  /// Byte offset of the cursor.
  std::size_t offset() const { return pos_; }
  /// Consumes `c` when it is next.
  bool take(char c);
  /// Consumes one UTF-8 code point (fails on ill-formed UTF-8).
  char32_t next_code_point();
  /// After a backslash: a class escape (\d \w \s and negations) fills
  /// `ranges` and returns true; otherwise sets `cp` and returns false.
  bool read_escape(char32_t& cp, std::vector<code_point_range>& ranges);
  /// After '[': reads the class up to its ']' (negation applied).
  std::vector<code_point_range> read_bracket();
  /// Reads a decimal number of at most `limit`.
  std::size_t read_number(std::size_t limit);
  /// Throws constraint_error naming `what` and the offset.
  [[noreturn]] void fail(const std::string& message) const;
  /// The budget (deadline checks).
  compile_budget& budget() { return budget_; }

 private:
  char32_t read_hex(std::size_t digits);

  std::string_view text_;
  std::size_t pos_ = 0;
  compile_budget& budget_;
  std::string what_;
};

/// Branches separated by '|' (each read by `read_branch`) as one
/// expression; fails when groups nest deeper than the depth limit.
template <class ReadBranch>
expression_ptr read_alternatives(pattern_scanner& in, std::size_t depth, ReadBranch read_branch) {
  if (depth > in.budget().limits().max_depth) in.fail("groups nested too deeply");
  std::vector<expression_ptr> alternatives{read_branch()};
  while (in.take('|')) alternatives.push_back(read_branch());
  return alternatives.size() == 1 ? alternatives[0] : choice(std::move(alternatives));
}

/// Code points that `.` matches: all but line feed and carriage return.
std::vector<code_point_range> any_but_newline();

}  // namespace troupe::constraints

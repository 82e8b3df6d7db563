#include "constraints/regex_parser.hpp"

#include "constraints/pattern_scanner.hpp"

namespace troupe::constraints {
namespace {

/// Largest {m,n} bound accepted before the automaton limit applies.
constexpr std::size_t max_repeat_count = 100000;

class regex_parser {
 public:
  regex_parser(std::string_view pattern, compile_budget& budget) : in_(pattern, budget, "regex") {}

  expression_ptr parse() {
    in_.take('^');
    auto result = alternation(0);
    if (!in_.done()) in_.fail(in_.peek() == ')' ? "unbalanced ')'" : "unexpected character");
    return result;
  }

 private:
  bool at_end_anchor() const { return in_.peek() == '$' && in_.offset() + 1 == in_.size(); }

  expression_ptr alternation(std::size_t depth) {
    return read_alternatives(in_, depth, [&] { return concatenation(depth); });
  }

  expression_ptr concatenation(std::size_t depth) {
    std::vector<expression_ptr> items;
    while (!in_.done() && in_.peek() != '|' && in_.peek() != ')') {
      in_.budget().check();
      if (in_.peek() == '$') {
        if (!at_end_anchor()) in_.fail("'$' is supported only at the end");
        in_.skip();
        continue;
      }
      items.push_back(quantified(atom(depth)));
    }
    return items.size() == 1 ? items[0] : sequence(std::move(items));
  }

  expression_ptr quantified(expression_ptr item) {
    for (;;) {
      std::size_t min = 0;
      std::size_t max = unbounded;
      if (in_.take('*')) {
      } else if (in_.take('+')) {
        min = 1;
      } else if (in_.take('?')) {
        max = 1;
      } else if (in_.peek() == '{' && in_.peek(1) >= '0' && in_.peek(1) <= '9') {
        in_.skip();
        min = in_.read_number(max_repeat_count);
        max = min;
        if (in_.take(',')) max = in_.peek() == '}' ? unbounded : in_.read_number(max_repeat_count);
        if (!in_.take('}')) in_.fail("expected '}' closing a repetition");
        if (max < min) in_.fail("repetition {m,n} with n < m");
      } else {
        return item;
      }
      in_.take('?');  // a lazy quantifier matches the same language
      if (in_.peek() == '*' || in_.peek() == '+' || in_.peek() == '?') in_.fail("nothing to repeat");
      item = repeat(std::move(item), min, max);
    }
  }

  expression_ptr atom(std::size_t depth) {
    const char c = in_.peek();
    if (c == '(') return group(depth);
    if (c == '*' || c == '+' || c == '?') in_.fail("nothing to repeat");
    if (c == '^') in_.fail("'^' is supported only at the start");
    if (in_.take('.')) return code_point_set(any_but_newline());
    if (in_.take('[')) return code_point_set(in_.read_bracket());
    char32_t cp = 0;
    if (in_.take('\\')) {
      std::vector<code_point_range> ranges;
      if (in_.read_escape(cp, ranges)) return code_point_set(ranges);
    } else {
      cp = in_.next_code_point();
    }
    return code_point_set({{cp, cp}});
  }

  expression_ptr group(std::size_t depth) {
    in_.skip();
    if (in_.take('?')) {
      if (in_.take(':')) {
      } else if (in_.peek() == '<' || (in_.peek() == 'P' && in_.peek(1) == '<')) {
        while (!in_.done() && in_.peek() != '>') in_.skip();
        if (!in_.take('>')) in_.fail("unterminated group name");
      } else {
        in_.fail("lookaround and inline flags are not supported");
      }
    }
    auto inner = alternation(depth + 1);
    if (!in_.take(')')) in_.fail("missing ')'");
    return inner;
  }

  pattern_scanner in_;
};

}  // namespace

expression_ptr parse_regex(std::string_view pattern, compile_budget& budget) {
  return regex_parser(pattern, budget).parse();
}

}  // namespace troupe::constraints

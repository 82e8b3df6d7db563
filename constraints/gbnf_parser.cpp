// GBNF (llama.cpp's grammar syntax): `name ::= body` rules, alternatives
// with '|', "literals", [classes], '.', groups, * + ? {m,n} and # comments.
// A rule ends where the next `name ::=` begins.

#include <map>

#include "base/utf8.hpp"
#include "constraints/constraint_rules.hpp"
#include "constraints/pattern_scanner.hpp"

namespace troupe::constraints {
namespace {

constexpr std::size_t max_repeat_count = 100000;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class gbnf_parser {
 public:
  gbnf_parser(std::string_view text, compile_budget& budget) : in_(text, budget, "grammar") {}

  rule_set parse() {
    skip_space();
    while (!in_.done()) {
      const std::string name = read_name();
      skip_space();
      if (!(in_.take(':') && in_.take(':') && in_.take('='))) in_.fail("expected '::=' after rule name '" + name + "'");
      const std::size_t rule = rule_index(name);
      if (rules_.bodies[rule]) in_.fail("rule '" + name + "' is defined twice");
      rules_.bodies[rule] = alternation(0);
      if (!in_.done() && !at_rule_start()) in_.fail("unexpected character");
    }
    const auto root = indices_.find("root");
    if (root == indices_.end() || !rules_.bodies[root->second]) in_.fail("the grammar has no rule 'root'");
    rules_.root = root->second;
    return std::move(rules_);
  }

 private:
  void skip_space() {
    for (;;) {
      const char c = in_.peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        in_.skip();
      } else if (c == '#') {
        while (!in_.done() && in_.peek() != '\n') in_.skip();
      } else {
        return;
      }
    }
  }

  std::string read_name() {
    std::string name;
    while (is_name_char(in_.peek())) name.push_back(in_.peek()), in_.skip();
    if (name.empty()) in_.fail("expected a rule name");
    return name;
  }

  /// True when a `name ::=` starts here (the current rule has ended).
  bool at_rule_start() {
    const std::size_t saved = in_.offset();
    bool found = false;
    if (is_name_char(in_.peek())) {
      read_name();
      skip_space();
      found = in_.take(':') && in_.take(':') && in_.take('=');
    }
    in_.seek(saved);
    return found;
  }

  std::size_t rule_index(const std::string& name) {
    auto [it, inserted] = indices_.try_emplace(name, 0);
    if (inserted) it->second = rules_.add_rule(name);
    return it->second;
  }

  expression_ptr alternation(std::size_t depth) {
    return read_alternatives(in_, depth, [&] { return concatenation(depth); });
  }

  expression_ptr concatenation(std::size_t depth) {
    std::vector<expression_ptr> items;
    for (skip_space(); !in_.done() && in_.peek() != '|' && in_.peek() != ')' && !at_rule_start(); skip_space()) {
      in_.budget().check();
      items.push_back(quantified(primary(depth)));
    }
    return items.size() == 1 ? items[0] : sequence(std::move(items));
  }

  expression_ptr quantified(expression_ptr item) {
    for (;;) {
      if (in_.take('*')) {
        item = repeat(std::move(item), 0, unbounded);
      } else if (in_.take('+')) {
        item = repeat(std::move(item), 1, unbounded);
      } else if (in_.take('?')) {
        item = repeat(std::move(item), 0, 1);
      } else if (in_.take('{')) {
        skip_space();
        const std::size_t min = in_.read_number(max_repeat_count);
        skip_space();
        std::size_t max = min;
        if (in_.take(',')) {
          skip_space();
          max = in_.peek() == '}' ? unbounded : in_.read_number(max_repeat_count);
          skip_space();
        }
        if (!in_.take('}')) in_.fail("expected '}' closing a repetition");
        if (max < min) in_.fail("repetition {m,n} with n < m");
        item = repeat(std::move(item), min, max);
      } else {
        return item;
      }
    }
  }

  expression_ptr primary(std::size_t depth) {
    if (in_.take('"')) return quoted('"');
    if (in_.take('\'')) return quoted('\'');
    if (in_.take('[')) return code_point_set(in_.read_bracket());
    if (in_.take('.')) return code_point_set(any_but_newline());
    if (in_.take('(')) {
      auto inner = alternation(depth + 1);
      skip_space();
      if (!in_.take(')')) in_.fail("missing ')'");
      return inner;
    }
    if (is_name_char(in_.peek())) return call(rule_index(read_name()));
    in_.fail("unexpected character");
  }

  expression_ptr quoted(char quote) {
    std::string bytes;
    while (!in_.take(quote)) {
      if (in_.done()) in_.fail("unterminated string literal");
      char32_t cp = 0;
      if (in_.take('\\')) {
        std::vector<code_point_range> ignored;
        if (in_.read_escape(cp, ignored)) in_.fail("class escapes are not allowed in a string literal");
      } else {
        cp = in_.next_code_point();
      }
      append_utf8(bytes, cp);
    }
    return literal(bytes);
  }

  pattern_scanner in_;
  rule_set rules_;
  std::map<std::string, std::size_t> indices_;
};

}  // namespace

rule_set gbnf_rules(std::string_view grammar, compile_budget& budget) { return gbnf_parser(grammar, budget).parse(); }

}  // namespace troupe::constraints

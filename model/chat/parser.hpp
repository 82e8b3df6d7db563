#pragma once
// jinja2's recursive-descent parser, ported to build our syntax tree, with
// its operator precedence, tuple rules and error messages. Internal to
// model/chat.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "model/chat/ast.hpp"
#include "model/chat/lexer.hpp"

namespace troupe::jinja {

/// Parses normalised template source. Throws syntax_error (or script_error
/// "TemplateAssertionError" for an unknown filter or test outside an if).
template_ast parse_template(std::string source);

/// Statement-level state shared by the expression and statement halves.
class parser {
 public:
  explicit parser(std::vector<token> tokens) : tokens_(std::move(tokens)) {}

  stmt_list subparse(const std::vector<std::string>& end_tokens);
  /// The whole template; fails on stray end tags.
  stmt_list parse_all();

  // Expressions (parser.cpp).
  expr_ptr parse_expression(bool with_condexpr = true);
  expr_ptr parse_tuple(bool simplified = false, bool with_condexpr = true,
                       const std::vector<std::string>& extra_end_rules = {}, bool explicit_parentheses = false,
                       bool with_namespace = false);
  expr_ptr parse_filter_chain(expr_ptr operand, bool start_inline);
  void parse_call_args(call_arguments& args);
  assign_target parse_assign_target(bool with_tuple, bool name_only,
                                    const std::vector<std::string>& extra_end_rules = {}, bool with_namespace = false);

  // Token stream.
  const token& current() const { return tokens_[pos_]; }
  const token& look() const { return tokens_[pos_ + 1 < tokens_.size() ? pos_ + 1 : pos_]; }
  const token& next();
  bool test(std::string_view rule) const;
  bool skip_if(std::string_view rule);
  const token& expect(std::string_view rule);
  [[noreturn]] void fail(const std::string& message, std::size_t offset) const;

 private:
  // Expression levels, lowest precedence first.
  expr_ptr parse_condexpr();
  expr_ptr parse_or();
  expr_ptr parse_and();
  expr_ptr parse_not();
  expr_ptr parse_compare();
  expr_ptr parse_math1();
  expr_ptr parse_concat();
  expr_ptr parse_math2();
  expr_ptr parse_pow();
  expr_ptr parse_unary(bool with_filter);
  expr_ptr parse_primary(bool with_namespace = false);
  expr_ptr parse_list();
  expr_ptr parse_dict();
  expr_ptr parse_postfix(expr_ptr node);
  expr_ptr parse_filter_expr(expr_ptr node);
  expr_ptr parse_subscript(expr_ptr node);
  expr_ptr parse_subscribed();
  expr_ptr parse_test(expr_ptr node);
  std::string parse_dotted_name();
  bool is_tuple_end(const std::vector<std::string>& extra_end_rules) const;
  void check_known(filter_expr& node, bool is_test) const;

  // Statements (parser_statements.cpp).
  stmt_ptr parse_statement();
  stmt_list parse_statements(const std::vector<std::string>& end_tokens, bool drop_needle);
  stmt_ptr parse_for();
  stmt_ptr parse_if();
  stmt_ptr parse_set();
  stmt_ptr parse_macro();
  stmt_ptr parse_call_block();
  stmt_ptr parse_filter_block();
  stmt_ptr parse_with();
  stmt_ptr parse_print();
  stmt_ptr parse_generation();
  void parse_signature(macro_def& def);
  [[noreturn]] void fail_unknown_tag(const std::string& name, std::size_t offset) const;
  [[noreturn]] void fail_eof(const std::vector<std::string>& end_tokens, std::size_t offset) const;
  [[noreturn]] void fail_ut_eof(const std::string* name, const std::vector<std::vector<std::string>>& stack,
                                std::size_t offset) const;

  /// Guards against stack exhaustion on hostile nesting.
  struct depth_guard {
    depth_guard(parser& p, std::size_t offset);
    ~depth_guard() { --p_.depth_; }
    parser& p_;
  };

  std::vector<token> tokens_;
  std::size_t pos_ = 0;
  std::size_t depth_ = 0;
  bool soft_frame_ = false;     ///< inside an if/conditional: unknown filters fail at run time
  std::size_t loop_depth_ = 0;  ///< enclosing for loops in this frame (break/continue allowed)
  std::vector<std::string> tag_stack_;
  std::vector<std::vector<std::string>> end_token_stack_;
};

/// Names the statements of `body` load (recursively), to tell whether a macro uses caller/varargs/kwargs.
void collect_loaded_names(const stmt_list& body, std::vector<std::string>& names);

}  // namespace troupe::jinja

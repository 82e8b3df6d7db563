// Expressions: jinja2's Parser.parse_expression and everything below it.

#include "model/chat/parser.hpp"

#include "model/chat/builtins.hpp"
#include "model/chat/errors.hpp"
#include "model/chat/py_format.hpp"

namespace troupe::jinja {

namespace {

constexpr std::size_t max_parse_depth = 200;

std::string describe_rule(std::string_view rule) {
  if (rule.rfind("name:", 0) == 0) return std::string(rule.substr(5));
  if (rule == "block_end") return "end of statement block";
  if (rule == "variable_end") return "end of print statement";
  if (rule == "eof") return "end of template";
  return std::string(rule);
}

std::optional<compare_kind> compare_of(const token& t) {
  if (t.type != token_type::op) return std::nullopt;
  if (t.text == "==") return compare_kind::eq;
  if (t.text == "!=") return compare_kind::ne;
  if (t.text == "<") return compare_kind::lt;
  if (t.text == "<=") return compare_kind::le;
  if (t.text == ">") return compare_kind::gt;
  if (t.text == ">=") return compare_kind::ge;
  return std::nullopt;
}

}  // namespace

parser::depth_guard::depth_guard(parser& p, std::size_t offset) : p_(p) {
  if (++p_.depth_ > max_parse_depth) {
    --p_.depth_;
    throw syntax_error("template nesting too deep (more than " + std::to_string(max_parse_depth) + " levels)", offset);
  }
}

const token& parser::next() {
  const token& t = tokens_[pos_];
  if (pos_ + 1 < tokens_.size()) ++pos_;
  return t;
}

bool parser::test(std::string_view rule) const {
  const token& t = current();
  if (rule.rfind("name:", 0) == 0) return t.type == token_type::name && t.text == rule.substr(5);
  if (rule == "name") return t.type == token_type::name;
  if (rule == "string") return t.type == token_type::string;
  if (rule == "integer") return t.type == token_type::integer;
  if (rule == "float") return t.type == token_type::floating;
  if (rule == "block_end") return t.type == token_type::block_end;
  if (rule == "variable_end") return t.type == token_type::variable_end;
  if (rule == "eof") return t.type == token_type::eof;
  return t.type == token_type::op && t.text == rule;
}

bool parser::skip_if(std::string_view rule) {
  if (!test(rule)) return false;
  next();
  return true;
}

const token& parser::expect(std::string_view rule) {
  if (!test(rule)) {
    std::string expected = py_string_repr(describe_rule(rule));
    if (current().type == token_type::eof)
      fail("unexpected end of template, expected " + expected + ".", current().offset);
    fail("expected token " + expected + ", got " + py_string_repr(describe_token(current())), current().offset);
  }
  return next();
}

void parser::fail(const std::string& message, std::size_t offset) const { throw syntax_error(message, offset); }

expr_ptr parser::parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

expr_ptr parser::parse_condexpr() {
  std::size_t offset = current().offset;
  expr_ptr expr1 = parse_or();
  while (skip_if("name:if")) {
    bool saved = soft_frame_;
    soft_frame_ = true;
    auto node = std::make_unique<condition_expr>(offset);
    node->then = std::move(expr1);
    node->test = parse_or();
    if (skip_if("name:else")) node->otherwise = parse_condexpr();
    soft_frame_ = saved;
    expr1 = std::move(node);
    offset = current().offset;
  }
  return expr1;
}

expr_ptr parser::parse_or() {
  expr_ptr left = parse_and();
  while (test("name:or")) {
    std::size_t offset = next().offset;
    left = std::make_unique<binary_expr>(expr_kind::logical_or, offset, std::move(left), parse_and());
  }
  return left;
}

expr_ptr parser::parse_and() {
  expr_ptr left = parse_not();
  while (test("name:and")) {
    std::size_t offset = next().offset;
    left = std::make_unique<binary_expr>(expr_kind::logical_and, offset, std::move(left), parse_not());
  }
  return left;
}

expr_ptr parser::parse_not() {
  if (test("name:not")) {
    depth_guard guard(*this, current().offset);
    auto node = std::make_unique<items_expr>(expr_kind::logical_not, next().offset);
    node->items.push_back(parse_not());
    return node;
  }
  return parse_compare();
}

expr_ptr parser::parse_compare() {
  std::size_t offset = current().offset;
  expr_ptr first = parse_math1();
  std::unique_ptr<compare_expr> node;
  while (true) {
    std::optional<compare_kind> kind = compare_of(current());
    if (kind) {
      next();
    } else if (skip_if("name:in")) {
      kind = compare_kind::in;
    } else if (test("name:not") && look().type == token_type::name && look().text == "in") {
      next();
      next();
      kind = compare_kind::not_in;
    } else {
      break;
    }
    if (!node) node = std::make_unique<compare_expr>(offset, std::move(first));
    node->rest.emplace_back(*kind, parse_math1());
  }
  if (!node) return first;
  return node;
}

expr_ptr parser::parse_math1() {
  expr_ptr left = parse_concat();
  while (test("+") || test("-")) {
    const token& t = next();
    auto node = std::make_unique<binary_expr>(expr_kind::binary, t.offset, std::move(left), nullptr);
    node->op = t.text == "+" ? binary_op::add : binary_op::sub;
    node->right = parse_concat();
    left = std::move(node);
  }
  return left;
}

expr_ptr parser::parse_concat() {
  std::size_t offset = current().offset;
  expr_ptr first = parse_math2();
  if (!test("~")) return first;
  auto node = std::make_unique<items_expr>(expr_kind::concat, offset);
  node->items.push_back(std::move(first));
  while (skip_if("~")) node->items.push_back(parse_math2());
  return node;
}

expr_ptr parser::parse_math2() {
  expr_ptr left = parse_pow();
  while (test("*") || test("/") || test("//") || test("%")) {
    const token& t = next();
    auto node = std::make_unique<binary_expr>(expr_kind::binary, t.offset, std::move(left), nullptr);
    node->op = t.text == "*"    ? binary_op::mul
               : t.text == "/"  ? binary_op::div
               : t.text == "//" ? binary_op::floordiv
                                : binary_op::mod;
    node->right = parse_pow();
    left = std::move(node);
  }
  return left;
}

expr_ptr parser::parse_pow() {
  expr_ptr left = parse_unary(true);
  while (test("**")) {
    std::size_t offset = next().offset;
    auto node = std::make_unique<binary_expr>(expr_kind::binary, offset, std::move(left), parse_unary(true));
    node->op = binary_op::pow;
    left = std::move(node);
  }
  return left;
}

expr_ptr parser::parse_unary(bool with_filter) {
  depth_guard guard(*this, current().offset);
  expr_ptr node;
  if (test("-") || test("+")) {
    const token& t = next();
    auto unary = std::make_unique<items_expr>(t.text == "-" ? expr_kind::negate : expr_kind::plus, t.offset);
    unary->items.push_back(parse_unary(false));
    node = std::move(unary);
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

expr_ptr parser::parse_primary(bool with_namespace) {
  const token& t = current();
  std::size_t offset = t.offset;
  if (t.type == token_type::name) {
    std::string name = next().text;
    if (name == "true" || name == "True" || name == "false" || name == "False")
      return std::make_unique<literal_expr>(offset, value::boolean(name == "true" || name == "True"));
    if (name == "none" || name == "None") return std::make_unique<literal_expr>(offset, value::none());
    if (with_namespace && test(".")) {
      next();
      auto target =
          std::make_unique<getattr_expr>(offset, std::make_unique<name_expr>(offset, name), expect("name").text);
      return target;
    }
    return std::make_unique<name_expr>(offset, std::move(name));
  }
  if (t.type == token_type::string) {
    std::string text;
    while (current().type == token_type::string) text += next().text;
    return std::make_unique<literal_expr>(offset, value::string(std::move(text)));
  }
  if (t.type == token_type::integer) return std::make_unique<literal_expr>(offset, value::integer(next().int_value));
  if (t.type == token_type::floating)
    return std::make_unique<literal_expr>(offset, value::floating(next().float_value));
  if (test("(")) {
    next();
    expr_ptr node = parse_tuple(false, true, {}, true);
    expect(")");
    return node;
  }
  if (test("[")) return parse_list();
  if (test("{")) return parse_dict();
  fail("unexpected " + py_string_repr(describe_token(t)), offset);
}

expr_ptr parser::parse_tuple(bool simplified, bool with_condexpr, const std::vector<std::string>& extra_end_rules,
                             bool explicit_parentheses, bool with_namespace) {
  std::size_t offset = current().offset;
  std::vector<expr_ptr> args;
  bool is_tuple = false;
  while (true) {
    if (!args.empty()) expect(",");
    if (is_tuple_end(extra_end_rules)) break;
    args.push_back(simplified ? parse_primary(with_namespace) : parse_expression(with_condexpr));
    if (test(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!args.empty()) return std::move(args.front());
    if (!explicit_parentheses)
      fail("Expected an expression, got " + py_string_repr(describe_token(current())), current().offset);
  }
  auto node = std::make_unique<items_expr>(expr_kind::tuple, offset);
  node->items = std::move(args);
  return node;
}

bool parser::is_tuple_end(const std::vector<std::string>& extra_end_rules) const {
  if (current().type == token_type::variable_end || current().type == token_type::block_end || test(")")) return true;
  for (const std::string& rule : extra_end_rules)
    if (test(rule)) return true;
  return false;
}

expr_ptr parser::parse_list() {
  auto node = std::make_unique<items_expr>(expr_kind::list, expect("[").offset);
  while (!test("]")) {
    if (!node->items.empty()) expect(",");
    if (test("]")) break;
    node->items.push_back(parse_expression());
  }
  expect("]");
  return node;
}

expr_ptr parser::parse_dict() {
  auto node = std::make_unique<dict_expr>(expect("{").offset);
  while (!test("}")) {
    if (!node->items.empty()) expect(",");
    if (test("}")) break;
    expr_ptr key = parse_expression();
    expect(":");
    node->items.emplace_back(std::move(key), parse_expression());
  }
  expect("}");
  return node;
}

}  // namespace troupe::jinja

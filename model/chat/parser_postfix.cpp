// Postfix expressions: subscripts, calls, filters and tests (jinja2's
// parse_postfix, parse_filter_expr and what they call).

#include "model/chat/builtins.hpp"
#include "model/chat/errors.hpp"
#include "model/chat/parser.hpp"
#include "model/chat/py_format.hpp"

namespace troupe::jinja {

expr_ptr parser::parse_postfix(expr_ptr node) {
  while (true) {
    if (test(".") || test("[")) {
      node = parse_subscript(std::move(node));
    } else if (test("(")) {
      auto call = std::make_unique<call_expr>(current().offset, std::move(node));
      parse_call_args(call->args);
      node = std::move(call);
    } else {
      return node;
    }
  }
}

expr_ptr parser::parse_filter_expr(expr_ptr node) {
  while (true) {
    if (test("|")) {
      node = parse_filter_chain(std::move(node), false);
    } else if (test("name:is")) {
      node = parse_test(std::move(node));
    } else if (test("(")) {
      auto call = std::make_unique<call_expr>(current().offset, std::move(node));
      parse_call_args(call->args);
      node = std::move(call);
    } else {
      return node;
    }
  }
}

expr_ptr parser::parse_subscript(expr_ptr node) {
  const token& t = next();
  std::size_t offset = t.offset;
  if (t.text == ".") {
    const token& attr = next();
    if (attr.type == token_type::name) return std::make_unique<getattr_expr>(offset, std::move(node), attr.text);
    if (attr.type != token_type::integer) fail("expected name or number", attr.offset);
    return std::make_unique<getitem_expr>(offset, std::move(node),
                                          std::make_unique<literal_expr>(attr.offset, value::integer(attr.int_value)));
  }
  std::vector<expr_ptr> args;
  while (!test("]")) {
    if (!args.empty()) expect(",");
    args.push_back(parse_subscribed());
  }
  expect("]");
  if (args.size() == 1) return std::make_unique<getitem_expr>(offset, std::move(node), std::move(args.front()));
  auto tuple = std::make_unique<items_expr>(expr_kind::tuple, offset);
  tuple->items = std::move(args);
  return std::make_unique<getitem_expr>(offset, std::move(node), std::move(tuple));
}

expr_ptr parser::parse_subscribed() {
  auto slice = std::make_unique<slice_expr>(current().offset);
  if (test(":")) {
    next();
  } else {
    expr_ptr node = parse_expression();
    if (!test(":")) return node;
    next();
    slice->start = std::move(node);
  }
  if (!test(":") && !test("]") && !test(",")) slice->stop = parse_expression();
  if (test(":")) {
    next();
    if (!test("]") && !test(",")) slice->step = parse_expression();
  }
  return slice;
}

void parser::parse_call_args(call_arguments& args) {
  std::size_t offset = expect("(").offset;
  auto ensure = [&](bool ok) {
    if (!ok) fail("invalid syntax for function call expression", offset);
  };
  bool require_comma = false;
  while (!test(")")) {
    if (require_comma) {
      expect(",");
      if (test(")")) break;
    }
    if (test("*")) {
      ensure(!args.star_args && !args.star_kwargs);
      next();
      args.star_args = parse_expression();
    } else if (test("**")) {
      ensure(!args.star_kwargs);
      next();
      args.star_kwargs = parse_expression();
    } else if (current().type == token_type::name && look().type == token_type::op && look().text == "=") {
      ensure(!args.star_kwargs);
      std::string key = next().text;
      next();
      args.keywords.push_back({std::move(key), parse_expression()});
    } else {
      ensure(!args.star_args && !args.star_kwargs && args.keywords.empty());
      args.positional.push_back(parse_expression());
    }
    require_comma = true;
  }
  expect(")");
}

std::string parser::parse_dotted_name() {
  std::string name = expect("name").text;
  while (test(".")) {
    next();
    name += "." + expect("name").text;
  }
  return name;
}

void parser::check_known(filter_expr& node, bool is_test) const {
  node.known = is_test ? find_test(node.name) != nullptr : find_filter(node.name) != nullptr;
  if (!node.known && !soft_frame_)
    throw syntax_error(std::string("No ") + (is_test ? "test" : "filter") + " named " + py_string_repr(node.name) + ".",
                       node.offset, "TemplateAssertionError");
}

expr_ptr parser::parse_filter_chain(expr_ptr operand, bool start_inline) {
  while (test("|") || start_inline) {
    if (!start_inline) next();
    std::size_t offset = current().offset;
    auto node = std::make_unique<filter_expr>(expr_kind::filter, offset);
    node->name = parse_dotted_name();
    if (test("(")) parse_call_args(node->args);
    node->operand = std::move(operand);
    check_known(*node, false);
    operand = std::move(node);
    start_inline = false;
  }
  return operand;
}

expr_ptr parser::parse_test(expr_ptr node) {
  std::size_t offset = next().offset;
  bool negated = skip_if("name:not");
  auto test_node = std::make_unique<filter_expr>(expr_kind::test, offset);
  test_node->name = parse_dotted_name();
  const token& t = current();
  bool starts_arg = t.type == token_type::name || t.type == token_type::string || t.type == token_type::integer ||
                    t.type == token_type::floating || test("[") || test("{");
  if (test("(")) {
    parse_call_args(test_node->args);
  } else if (starts_arg && !test("name:else") && !test("name:or") && !test("name:and")) {
    if (test("name:is")) fail("You cannot chain multiple tests with is", t.offset);
    test_node->args.positional.push_back(parse_postfix(parse_primary()));
  }
  test_node->operand = std::move(node);
  check_known(*test_node, true);
  if (!negated) return test_node;
  auto negation = std::make_unique<items_expr>(expr_kind::logical_not, offset);
  negation->items.push_back(std::move(test_node));
  return negation;
}

}  // namespace troupe::jinja

// Expression evaluation.

#include <algorithm>

#include "model/chat/builtins.hpp"
#include "model/chat/errors.hpp"
#include "model/chat/interpreter.hpp"
#include "model/chat/py_format.hpp"

namespace troupe::jinja {

namespace {

std::size_t line_of(const std::string& source, std::size_t offset) {
  return 1 + static_cast<std::size_t>(std::count(
                 source.begin(), source.begin() + static_cast<std::ptrdiff_t>(std::min(offset, source.size())), '\n'));
}

value build_dict(std::vector<std::pair<value, value>> pairs) {
  std::vector<std::pair<value, value>> entries;
  for (auto& [k, v] : pairs) {
    require_hashable(k);
    bool replaced = false;
    for (auto& existing : entries) {
      if (py_equal(existing.first, k)) {
        existing.second = std::move(v);
        replaced = true;
        break;
      }
    }
    if (!replaced) entries.emplace_back(std::move(k), std::move(v));
  }
  return value::dict(std::move(entries));
}

}  // namespace

value render_state::eval(const expr& e, const scope_ptr& frame) {
  step();
  switch (e.kind) {
    case expr_kind::literal:
      return static_cast<const literal_expr&>(e).constant;
    case expr_kind::name:
      return lookup(static_cast<const name_expr&>(e).name, frame.get());
    case expr_kind::list:
    case expr_kind::tuple:
    case expr_kind::dict:
      return eval_display(e, frame);
    case expr_kind::getattr: {
      const auto& g = static_cast<const getattr_expr&>(e);
      value obj = eval(*g.object, frame);
      offset = e.offset;
      return getattr(obj, g.name);
    }
    case expr_kind::getitem:
      return eval_subscript(static_cast<const getitem_expr&>(e), frame);
    case expr_kind::slice:
      throw script_error("TemplateSyntaxError", "slice outside of a subscript");
    case expr_kind::call:
      return eval_call(static_cast<const call_expr&>(e), frame);
    case expr_kind::filter:
    case expr_kind::test:
      return eval_filter(static_cast<const filter_expr&>(e), frame, nullptr);
    case expr_kind::negate:
    case expr_kind::plus:
    case expr_kind::logical_not: {
      value operand = eval(*static_cast<const items_expr&>(e).items.front(), frame);
      offset = e.offset;
      if (e.kind == expr_kind::logical_not) return value::boolean(!truthy(operand));
      return e.kind == expr_kind::negate ? negate(operand) : unary_plus(operand);
    }
    case expr_kind::binary: {
      const auto& b = static_cast<const binary_expr&>(e);
      value left = eval(*b.left, frame);
      value right = eval(*b.right, frame);
      offset = e.offset;
      value result = apply_binary(b.op, left, right, sizes());
      charge(result);
      return result;
    }
    case expr_kind::logical_and:
    case expr_kind::logical_or: {
      const auto& b = static_cast<const binary_expr&>(e);
      value left = eval(*b.left, frame);
      if (truthy(left) == (e.kind == expr_kind::logical_or)) return left;
      return eval(*b.right, frame);
    }
    case expr_kind::concat:
      return eval_concat(static_cast<const items_expr&>(e), frame);
    case expr_kind::compare:
      return eval_compare(static_cast<const compare_expr&>(e), frame);
    case expr_kind::condition: {
      const auto& c = static_cast<const condition_expr&>(e);
      if (truthy(eval(*c.test, frame))) return eval(*c.then, frame);
      if (c.otherwise != nullptr) return eval(*c.otherwise, frame);
      return value::undefined("the inline if-expression on line " + std::to_string(line_of(ast_.source, e.offset)) +
                              " evaluated to false and no else section was defined.");
    }
  }
  return value::none();
}

value render_state::eval_display(const expr& e, const scope_ptr& frame) {
  if (e.kind == expr_kind::dict) {
    std::vector<std::pair<value, value>> pairs;
    for (const auto& [k, v] : static_cast<const dict_expr&>(e).items) {
      value key = eval(*k, frame);
      pairs.emplace_back(std::move(key), eval(*v, frame));
    }
    offset = e.offset;
    return build_dict(std::move(pairs));
  }
  std::vector<value> items;
  for (const expr_ptr& item : static_cast<const items_expr&>(e).items) items.push_back(eval(*item, frame));
  check_items(items.size());
  offset = e.offset;
  return e.kind == expr_kind::list ? value::list(std::move(items)) : value::tuple(std::move(items));
}

value render_state::eval_concat(const items_expr& e, const scope_ptr& frame) {
  std::string out;
  for (const expr_ptr& item : e.items) {
    value v = eval(*item, frame);
    if (v.is_string())
      out += v.as_string();
    else
      out += py_str(v);
    check_string_size(out.size());
  }
  step(out.size() >> 4);
  return value::string(std::move(out));
}

value render_state::eval_compare(const compare_expr& e, const scope_ptr& frame) {
  value left = eval(*e.first, frame);
  for (const auto& [op, operand] : e.rest) {
    value right = eval(*operand, frame);
    offset = e.offset;
    bool ok = false;
    switch (op) {
      case compare_kind::eq:
        ok = py_compare(compare_op::eq, left, right);
        break;
      case compare_kind::ne:
        ok = py_compare(compare_op::ne, left, right);
        break;
      case compare_kind::lt:
        ok = py_compare(compare_op::lt, left, right);
        break;
      case compare_kind::le:
        ok = py_compare(compare_op::le, left, right);
        break;
      case compare_kind::gt:
        ok = py_compare(compare_op::gt, left, right);
        break;
      case compare_kind::ge:
        ok = py_compare(compare_op::ge, left, right);
        break;
      case compare_kind::in:
        ok = py_contains(right, left);
        break;
      case compare_kind::not_in:
        ok = !py_contains(right, left);
        break;
    }
    if (!ok) return value::boolean(false);
    left = std::move(right);
  }
  return value::boolean(true);
}

value render_state::eval_subscript(const getitem_expr& e, const scope_ptr& frame) {
  value obj = eval(*e.object, frame);
  if (e.key->kind != expr_kind::slice) {
    value key = eval(*e.key, frame);
    offset = e.offset;
    return getitem(obj, key);
  }
  const auto& s = static_cast<const slice_expr&>(*e.key);
  auto part = [&](const expr_ptr& p) { return p ? eval(*p, frame) : value::none(); };
  value start = part(s.start);
  value stop = part(s.stop);
  value step_value = part(s.step);
  offset = e.offset;
  auto slice = std::make_shared<sequence_data>();
  slice->flavor = sequence_flavor::iterator;
  slice->iterator_type = "slice";
  slice->items = {start, stop, step_value};
  return getitem(obj, value::sequence(std::move(slice)));
}

call_args render_state::eval_args(const call_arguments& args, const scope_ptr& frame) {
  call_args out;
  for (const expr_ptr& p : args.positional) out.positional.push_back(eval(*p, frame));
  for (const keyword_arg& k : args.keywords) out.keywords.emplace_back(k.name, eval(*k.value, frame));
  if (args.star_args) {
    value extra = eval(*args.star_args, frame);
    for (value& v : py_iterate(extra)) out.positional.push_back(std::move(v));
  }
  if (args.star_kwargs) {
    value extra = eval(*args.star_kwargs, frame);
    if (!extra.is_dict())
      throw script_error("TypeError", "argument after ** must be a mapping, not " + python_type_name(extra));
    for (const auto& [k, v] : extra.as_dict().entries) {
      if (!k.is_string()) throw script_error("TypeError", "keywords must be strings");
      out.keywords.emplace_back(k.as_string(), v);
    }
  }
  return out;
}

value render_state::eval_call(const call_expr& e, const scope_ptr& frame) {
  value callee = eval(*e.callee, frame);
  call_args args = eval_args(e.args, frame);
  offset = e.offset;
  return call(callee, std::move(args));
}

value render_state::eval_filter(const filter_expr& e, const scope_ptr& frame, const value* block_operand) {
  value operand;
  if (e.operand == nullptr) {
    operand = *block_operand;
  } else if (block_operand != nullptr && e.operand->kind == expr_kind::filter) {
    operand = eval_filter(static_cast<const filter_expr&>(*e.operand), frame, block_operand);
  } else {
    operand = eval(*e.operand, frame);
  }
  call_args args = eval_args(e.args, frame);
  offset = e.offset;
  bool is_test = e.kind == expr_kind::test;
  if (!e.known)
    throw script_error("TemplateRuntimeError", std::string("No ") + (is_test ? "test" : "filter") + " named " +
                                                   py_string_repr(e.name) + " found.");
  if (is_test) return value::boolean(call_test(e.name, operand, std::move(args)));
  return call_filter(e.name, operand, std::move(args));
}

value render_state::apply_filters(const expr& chain, value operand, const scope_ptr& frame) {
  return eval_filter(static_cast<const filter_expr&>(chain), frame, &operand);
}

value render_state::call(const value& callee, call_args args) {
  if (callee.is_undefined()) raise_undefined(callee);
  if (callee.is_object() && callee.as_object().is_callable()) {
    value result = callee.as_object().call(*this, std::move(args));
    charge(result);
    return result;
  }
  throw script_error("TypeError", "'" + python_type_name(callee) + "' object is not callable");
}

value render_state::call_filter(std::string_view name, const value& operand, call_args args) {
  filter_function f = find_filter(name);
  if (f == nullptr) throw script_error("TemplateRuntimeError", "No filter named " + py_string_repr(name) + " found.");
  value result = f(*this, operand, args);
  charge(result);
  return result;
}

bool render_state::call_test(std::string_view name, const value& operand, call_args args) {
  test_function t = find_test(name);
  if (t == nullptr) throw script_error("TemplateRuntimeError", "No test named " + py_string_repr(name) + " found.");
  return t(*this, operand, args);
}

}  // namespace troupe::jinja

// jinja2's tests (`x is defined`, `x is string`, ...).

#include <unordered_map>

#include "model/chat/builtins.hpp"
#include "model/chat/errors.hpp"
#include "model/chat/interpreter.hpp"
#include "model/chat/operators.hpp"
#include "model/chat/py_format.hpp"
#include "model/chat/unicode.hpp"

namespace troupe::jinja {

namespace {

const value& required(const bound_args& a, std::size_t index, std::string_view test, std::string_view param) {
  const value* v = a.get(index);
  if (v == nullptr)
    throw script_error("TypeError", "test_" + std::string(test) + "() missing 1 required positional argument: '" +
                                        std::string(param) + "'");
  return *v;
}

bool remainder_is(render_state& st, const value& v, const value& divisor, std::int64_t expected) {
  value r = apply_binary(binary_op::mod, v, divisor, st.sizes());
  return py_equal(r, value::integer(expected));
}

template <compare_op Op>
bool compare_test(render_state&, const value& v, call_args& args) {
  bound_args a(args, "compare", {"other"});
  return py_compare(Op, v, required(a, 0, "compare", "other"));
}

bool no_arg_test(call_args& args, std::string_view name) {
  bound_args a(args, name, {});
  return true;
}

bool is_sequence_like(const value& v) {
  if (v.is_string() || v.is_dict() || v.is_undefined()) return true;
  return v.is_sequence() && (v.is_list_or_tuple() || v.flavor() == sequence_flavor::range);
}

bool is_iterable(const value& v) { return v.is_string() || v.is_dict() || v.is_sequence() || v.is_undefined(); }

bool is_callable_value(const value& v) { return v.is_undefined() || (v.is_object() && v.as_object().is_callable()); }

using test_table = std::unordered_map<std::string_view, test_function>;

#define TROUPE_SIMPLE_TEST(n, expr)                                                                  \
  {                                                                                                  \
    n, [](render_state&, const value& v, call_args& args) { return no_arg_test(args, n) && (expr); } \
  }

const test_table& tests() {
  static const test_table table = {
      TROUPE_SIMPLE_TEST("defined", !v.is_undefined()),
      TROUPE_SIMPLE_TEST("undefined", v.is_undefined()),
      TROUPE_SIMPLE_TEST("none", v.is_none()),
      TROUPE_SIMPLE_TEST("boolean", v.is_bool()),
      TROUPE_SIMPLE_TEST("false", v.is_bool() && !v.as_bool()),
      TROUPE_SIMPLE_TEST("true", v.is_bool() && v.as_bool()),
      TROUPE_SIMPLE_TEST("integer", v.is_int()),
      TROUPE_SIMPLE_TEST("float", v.is_float()),
      TROUPE_SIMPLE_TEST("number", v.is_number()),
      TROUPE_SIMPLE_TEST("string", v.is_string()),
      TROUPE_SIMPLE_TEST("mapping", v.is_dict()),
      TROUPE_SIMPLE_TEST("sequence", is_sequence_like(v)),
      TROUPE_SIMPLE_TEST("iterable", is_iterable(v)),
      TROUPE_SIMPLE_TEST("callable", is_callable_value(v)),
      TROUPE_SIMPLE_TEST("escaped", v.is_markup()),
      TROUPE_SIMPLE_TEST("lower", py_islower(py_str(v))),
      TROUPE_SIMPLE_TEST("upper", py_isupper(py_str(v))),
      TROUPE_SIMPLE_TEST("filter", v.is_string() && find_filter(v.as_string()) != nullptr),
      TROUPE_SIMPLE_TEST("test", v.is_string() && find_test(v.as_string()) != nullptr),
      {"odd", [](render_state& st, const value& v,
                 call_args& args) { return no_arg_test(args, "odd") && remainder_is(st, v, value::integer(2), 1); }},
      {"even", [](render_state& st, const value& v,
                  call_args& args) { return no_arg_test(args, "even") && remainder_is(st, v, value::integer(2), 0); }},
      {"divisibleby",
       [](render_state& st, const value& v, call_args& args) {
         bound_args a(args, "divisibleby", {"num"});
         return remainder_is(st, v, required(a, 0, "divisibleby", "num"), 0);
       }},
      {"sameas",
       [](render_state&, const value& v, call_args& args) {
         bound_args a(args, "sameas", {"other"});
         return v.identical(required(a, 0, "sameas", "other"));
       }},
      {"in",
       [](render_state&, const value& v, call_args& args) {
         bound_args a(args, "in", {"seq"});
         return py_contains(required(a, 0, "in", "seq"), v);
       }},
      {"eq", compare_test<compare_op::eq>},
      {"equalto", compare_test<compare_op::eq>},
      {"==", compare_test<compare_op::eq>},
      {"ne", compare_test<compare_op::ne>},
      {"!=", compare_test<compare_op::ne>},
      {"lt", compare_test<compare_op::lt>},
      {"lessthan", compare_test<compare_op::lt>},
      {"<", compare_test<compare_op::lt>},
      {"le", compare_test<compare_op::le>},
      {"<=", compare_test<compare_op::le>},
      {"gt", compare_test<compare_op::gt>},
      {"greaterthan", compare_test<compare_op::gt>},
      {">", compare_test<compare_op::gt>},
      {"ge", compare_test<compare_op::ge>},
      {">=", compare_test<compare_op::ge>},
  };
  return table;
}

#undef TROUPE_SIMPLE_TEST

}  // namespace

test_function find_test(std::string_view name) {
  auto it = tests().find(name);
  return it == tests().end() ? nullptr : it->second;
}

}  // namespace troupe::jinja

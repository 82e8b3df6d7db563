// Equality, ordering, membership, len() and iteration with Python's rules.

#include <string>

#include "model/chat/errors.hpp"
#include "model/chat/operators.hpp"
#include "model/chat/unicode.hpp"

namespace troupe::jinja {

namespace {

thread_local std::size_t string_iteration_limit = static_cast<std::size_t>(-1);

const char* compare_symbol(compare_op op) {
  switch (op) {
    case compare_op::eq:
      return "==";
    case compare_op::ne:
      return "!=";
    case compare_op::lt:
      return "<";
    case compare_op::le:
      return "<=";
    case compare_op::gt:
      return ">";
    case compare_op::ge:
      return ">=";
  }
  return "?";
}

bool is_indexable_sequence(const value& v) {
  return v.is_sequence() && (v.flavor() == sequence_flavor::list || v.flavor() == sequence_flavor::tuple ||
                             v.flavor() == sequence_flavor::range);
}

bool dicts_equal(const dict_data& a, const dict_data& b) {
  if (a.entries.size() != b.entries.size()) return false;
  for (const auto& [k, v] : a.entries) {
    const value* other = b.find(k);
    if (other == nullptr || !py_equal(v, *other)) return false;
  }
  return true;
}

bool sequences_equal(const value& a, const value& b) {
  bool a_range = a.flavor() == sequence_flavor::range, b_range = b.flavor() == sequence_flavor::range;
  if (a.flavor() != b.flavor() && !(a_range && b_range)) return false;
  if (!is_indexable_sequence(a) && !a_range) {
    if (a.flavor() == sequence_flavor::generator || a.flavor() == sequence_flavor::iterator) return a.identical(b);
  }
  const auto& x = a.items();
  const auto& y = b.items();
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!py_equal(x[i], y[i])) return false;
  return true;
}

[[noreturn]] void not_orderable(compare_op op, const value& a, const value& b) {
  throw script_error("TypeError", std::string("'") + compare_symbol(op) + "' not supported between instances of '" +
                                      python_type_name(a) + "' and '" + python_type_name(b) + "'");
}

/// -1, 0 or 1 for orderable a and b; throws TypeError naming `op` otherwise.
int order(compare_op op, const value& a, const value& b) {
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  if (a.is_number() && b.is_number()) {
    if ((a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool()))
      return a.as_integral() < b.as_integral() ? -1 : (a.as_integral() > b.as_integral() ? 1 : 0);
    double x = a.as_double(), y = b.as_double();
    if (x < y) return -1;
    if (x > y) return 1;
    return x == y ? 0 : 2;  // NaN: every comparison false
  }
  if (a.is_string() && b.is_string()) {
    int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_sequence() && b.is_sequence() && a.flavor() == b.flavor() &&
      (a.flavor() == sequence_flavor::list || a.flavor() == sequence_flavor::tuple)) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!py_equal(x[i], y[i])) return order(op, x[i], y[i]);
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  not_orderable(op, a, b);
}

}  // namespace

bool py_equal(const value& a, const value& b) {
  if (a.is_undefined() || b.is_undefined()) return a.is_undefined() && b.is_undefined();
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_integral() == b.as_integral();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case value_kind::none:
      return true;
    case value_kind::string:
      return a.as_string() == b.as_string();
    case value_kind::sequence:
      return sequences_equal(a, b);
    case value_kind::dict:
      return dicts_equal(a.as_dict(), b.as_dict());
    default:
      return a.identical(b);
  }
}

bool py_compare(compare_op op, const value& a, const value& b) {
  switch (op) {
    case compare_op::eq:
      return py_equal(a, b);
    case compare_op::ne:
      return !py_equal(a, b);
    case compare_op::lt:
      return order(op, a, b) == -1;
    case compare_op::le: {
      int o = order(op, a, b);
      return o == -1 || o == 0;
    }
    case compare_op::gt:
      return order(op, a, b) == 1;
    case compare_op::ge: {
      int o = order(op, a, b);
      return o == 1 || o == 0;
    }
  }
  return false;
}

bool py_less(const value& a, const value& b) { return order(compare_op::lt, a, b) == -1; }

bool py_contains(const value& container, const value& item) {
  if (container.is_string()) {
    if (item.is_undefined()) raise_undefined(item);
    if (!item.is_string())
      throw script_error("TypeError", "'in <string>' requires string as left operand, not " + python_type_name(item));
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_dict()) {
    require_hashable(item);
    return container.as_dict().find(item) != nullptr;
  }
  if (container.is_sequence() || container.is_undefined()) {
    for (const value& v : py_iterate(container))
      if (py_equal(v, item)) return true;
    return false;
  }
  throw script_error("TypeError", "argument of type '" + python_type_name(container) + "' is not iterable");
}

std::int64_t py_len(const value& v) {
  switch (v.kind()) {
    case value_kind::undefined:
      return 0;
    case value_kind::string:
      return static_cast<std::int64_t>(code_point_count(v.as_string()));
    case value_kind::dict:
      return static_cast<std::int64_t>(v.as_dict().entries.size());
    case value_kind::sequence:
      if (v.flavor() != sequence_flavor::generator && v.flavor() != sequence_flavor::iterator)
        return static_cast<std::int64_t>(v.items().size());
      break;
    default:
      break;
  }
  throw script_error("TypeError", "object of type '" + python_type_name(v) + "' has no len()");
}

iteration_limit_scope::iteration_limit_scope(std::size_t max_items) : saved_(string_iteration_limit) {
  string_iteration_limit = max_items;
}

iteration_limit_scope::~iteration_limit_scope() { string_iteration_limit = saved_; }

std::vector<value> py_iterate(const value& v) {
  switch (v.kind()) {
    case value_kind::undefined:
      return {};
    case value_kind::string: {
      std::size_t count = code_point_count(v.as_string());
      if (count > string_iteration_limit)
        throw limit_error("iterating over a string of " + std::to_string(count) + " characters exceeds the limit of " +
                          std::to_string(string_iteration_limit) + " items");
      std::vector<value> out;
      out.reserve(count);
      std::string ch;
      for (char32_t c : to_code_points(v.as_string())) {
        ch.clear();
        append_utf8(ch, c);
        out.push_back(value::string(ch));
      }
      return out;
    }
    case value_kind::dict: {
      std::vector<value> keys;
      keys.reserve(v.as_dict().entries.size());
      for (const auto& entry : v.as_dict().entries) keys.push_back(entry.first);
      return keys;
    }
    case value_kind::sequence: {
      const sequence_data& s = v.as_sequence();
      if (s.flavor == sequence_flavor::generator || s.flavor == sequence_flavor::iterator) {
        if (s.consumed) return {};
        s.consumed = true;
      }
      return s.items;
    }
    default:
      break;
  }
  throw script_error("TypeError", "'" + python_type_name(v) + "' object is not iterable");
}

void require_hashable(const value& v) {
  bool hashable = true;
  if (v.is_dict()) {
    hashable = false;
  } else if (v.is_sequence()) {
    sequence_flavor f = v.flavor();
    if (f == sequence_flavor::list || f == sequence_flavor::dict_keys || f == sequence_flavor::dict_items ||
        f == sequence_flavor::dict_values)
      hashable = f == sequence_flavor::dict_values;
    if (f == sequence_flavor::tuple)
      for (const value& item : v.items()) require_hashable(item);
  } else if (v.is_undefined()) {
    hashable = true;
  }
  if (!hashable) throw script_error("TypeError", "unhashable type: '" + python_type_name(v) + "'");
}

}  // namespace troupe::jinja

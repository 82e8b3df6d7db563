// Attribute and item access with the sandbox's rules (jinja2's
// SandboxedEnvironment.getattr / getitem): a missing attribute or item is an
// Undefined naming what was missing, a forbidden one an Undefined that raises
// SecurityError when used.

#include <algorithm>

#include "model/chat/builtins.hpp"
#include "model/chat/errors.hpp"
#include "model/chat/interpreter.hpp"
#include "model/chat/py_format.hpp"
#include "model/chat/unicode.hpp"

namespace troupe::jinja {

namespace {

bool is_slice(const value& v) {
  return v.is_sequence() && v.flavor() == sequence_flavor::iterator && v.as_sequence().iterator_type == "slice";
}

value unsafe_undefined(const value& obj, std::string_view name) {
  return value::undefined("access to attribute " + py_string_repr(name) + " of " +
                              py_string_repr(python_type_name(obj)) + " object is unsafe.",
                          "SecurityError");
}

bool is_dunder(std::string_view name) {
  return name.size() > 4 && name.substr(0, 2) == "__" && name.substr(name.size() - 2) == "__";
}

/// Python getattr(obj, name) for attributes that exist; nullopt when there is none.
std::optional<value> python_attribute(const value& obj, std::string_view name) {
  if (is_dunder(name)) return unsafe_undefined(obj, name);
  if (obj.is_object()) {
    std::optional<value> attr = obj.as_object().attribute(name);
    if (attr && !name.empty() && name.front() == '_') return unsafe_undefined(obj, name);
    return attr;
  }
  value method;
  switch (find_method(obj, name, method)) {
    case method_lookup::found:
      return method;
    case method_lookup::unsafe:
      return unsafe_undefined(obj, name);
    case method_lookup::missing:
      break;
  }
  return std::nullopt;
}

struct slice_bounds {
  std::int64_t start, stop, step;
};

/// slice.indices(length); nullopt for non-integer bounds (a TypeError Python's getitem turns into Undefined).
std::optional<slice_bounds> resolve_slice(const value& slice, std::int64_t length) {
  const auto& parts = slice.items();
  for (const value& p : parts)
    if (!p.is_none() && !p.is_int() && !p.is_bool()) return std::nullopt;
  std::int64_t step = parts[2].is_none() ? 1 : parts[2].as_integral();
  if (step == 0) throw script_error("ValueError", "slice step cannot be zero");
  auto adjust = [&](const value& p, std::int64_t fallback) {
    if (p.is_none()) return fallback;
    std::int64_t i = p.as_integral();
    if (i < 0) {
      i += length;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= length) {
      i = step < 0 ? length - 1 : length;
    }
    return i;
  };
  return slice_bounds{adjust(parts[0], step > 0 ? 0 : length - 1), adjust(parts[1], step > 0 ? length : -1), step};
}

template <typename T>
T take_slice(const T& items, const slice_bounds& b) {
  T out;
  for (std::int64_t i = b.start; b.step > 0 ? i < b.stop : i > b.stop; i += b.step)
    out.push_back(items[static_cast<std::size_t>(i)]);
  return out;
}

bool indexable(const value& v) {
  return v.is_string() || (v.is_sequence() && (v.is_list_or_tuple() || v.flavor() == sequence_flavor::range));
}

/// obj[key] for a slice key; nullopt when Python would raise TypeError.
std::optional<value> slice_item(const value& obj, const value& key) {
  if (!indexable(obj)) return std::nullopt;
  if (obj.is_string()) {
    const std::string& text = obj.as_string();
    std::u32string cps = to_code_points(text);
    std::optional<slice_bounds> b = resolve_slice(key, static_cast<std::int64_t>(cps.size()));
    if (!b) return std::nullopt;
    return value::string(to_utf8(take_slice(cps, *b)), obj.is_markup());
  }
  std::optional<slice_bounds> b = resolve_slice(key, static_cast<std::int64_t>(obj.items().size()));
  if (!b) return std::nullopt;
  std::vector<value> items = take_slice(obj.items(), *b);
  return obj.flavor() == sequence_flavor::tuple ? value::tuple(std::move(items)) : value::list(std::move(items));
}

/// obj[key] for a non-slice key; nullopt when Python would raise TypeError or LookupError.
std::optional<value> plain_item(const value& obj, const value& key) {
  if (obj.is_dict()) {
    if (key.is_dict() || (key.is_sequence() && key.flavor() == sequence_flavor::list)) return std::nullopt;
    const value* found = obj.as_dict().find(key);
    return found ? std::optional<value>(*found) : std::nullopt;
  }
  if (!indexable(obj) || !(key.is_int() || key.is_bool())) return std::nullopt;
  std::int64_t i = key.as_integral();
  if (obj.is_string()) {
    std::u32string cps = to_code_points(obj.as_string());
    auto n = static_cast<std::int64_t>(cps.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return std::nullopt;
    return value::string(to_utf8(cps.substr(static_cast<std::size_t>(i), 1)), obj.is_markup());
  }
  auto n = static_cast<std::int64_t>(obj.items().size());
  if (i < 0) i += n;
  if (i < 0 || i >= n) return std::nullopt;
  return obj.items()[static_cast<std::size_t>(i)];
}

}  // namespace

value render_state::getattr(const value& obj, std::string_view name) {
  if (obj.is_undefined()) raise_undefined(obj);
  if (std::optional<value> attr = python_attribute(obj, name)) return *attr;
  if (obj.is_dict()) {
    if (const value* found = obj.as_dict().find(name)) return *found;
  }
  return value::undefined_member(obj, value::string(std::string(name)));
}

value render_state::getitem(const value& obj, const value& key) {
  if (obj.is_undefined()) raise_undefined(obj);
  std::optional<value> item = is_slice(key) ? slice_item(obj, key) : plain_item(obj, key);
  if (item) return *item;
  if (key.is_string()) {
    if (std::optional<value> attr = python_attribute(obj, key.as_string())) return *attr;
  }
  return value::undefined_member(obj, key);
}

}  // namespace troupe::jinja

#include "model/chat/value.hpp"

#include <algorithm>

#include "model/chat/errors.hpp"
#include "model/chat/operators.hpp"
#include "model/chat/py_format.hpp"

namespace troupe::jinja {

namespace {

std::size_t depth_of_items(const std::vector<value>& items) {
  std::size_t d = 0;
  for (const value& v : items) d = std::max(d, v.depth());
  return d + 1;
}

}  // namespace

std::string object::repr() const { return "<" + type_name() + " object>"; }

std::optional<value> object::attribute(std::string_view) const { return std::nullopt; }

value object::call(render_state&, call_args) const {
  throw script_error("TypeError", "'" + type_name() + "' object is not callable");
}

const value* dict_data::find(const value& key) const {
  for (const auto& [k, v] : entries)
    if (py_equal(k, key)) return &v;
  return nullptr;
}

const value* dict_data::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k.is_string() && k.as_string() == key) return &v;
  return nullptr;
}

value value::none() { return value(value_kind::none); }

value value::boolean(bool b) {
  value v(value_kind::boolean);
  v.bool_ = b;
  return v;
}

value value::integer(std::int64_t i) {
  value v(value_kind::integer);
  v.int_ = i;
  return v;
}

value value::floating(double f) {
  value v(value_kind::floating);
  v.float_ = f;
  return v;
}

value value::string(std::string text, bool markup) {
  value v(value_kind::string);
  v.ptr_ = std::make_shared<string_data>(string_data{std::move(text), markup});
  return v;
}

value value::list(std::vector<value> items) {
  auto data = std::make_shared<sequence_data>();
  data->depth = depth_of_items(items);
  data->items = std::move(items);
  return sequence(std::move(data));
}

value value::tuple(std::vector<value> items) {
  auto data = std::make_shared<sequence_data>();
  data->depth = depth_of_items(items);
  data->items = std::move(items);
  data->flavor = sequence_flavor::tuple;
  return sequence(std::move(data));
}

value value::sequence(std::shared_ptr<const sequence_data> data) {
  if (data->depth > max_value_depth) throw script_error("RecursionError", "maximum value nesting depth exceeded");
  value v(value_kind::sequence);
  v.ptr_ = std::const_pointer_cast<sequence_data>(std::move(data));
  return v;
}

value value::dict(std::vector<std::pair<value, value>> entries) {
  auto data = std::make_shared<dict_data>();
  std::size_t d = 0;
  for (const auto& [k, val] : entries) d = std::max({d, k.depth(), val.depth()});
  data->depth = d + 1;
  if (data->depth > max_value_depth) throw script_error("RecursionError", "maximum value nesting depth exceeded");
  data->entries = std::move(entries);
  value v(value_kind::dict);
  v.ptr_ = std::move(data);
  return v;
}

value value::from_object(std::shared_ptr<object> obj) {
  value v(value_kind::object);
  v.ptr_ = std::move(obj);
  return v;
}

value value::undefined(std::string message, std::string error_type) {
  value v(value_kind::undefined);
  v.ptr_ = std::make_shared<undefined_data>(undefined_data{std::move(message), std::move(error_type)});
  return v;
}

value value::undefined_name(std::string_view name) { return undefined(py_string_repr(name) + " is undefined"); }

value value::undefined_member(const value& container, const value& key) {
  if (key.is_string())
    return undefined(py_string_repr(object_type_repr(container)) + " has no attribute " + py_repr(key));
  return undefined(object_type_repr(container) + " has no element " + py_repr(key));
}

const undefined_data& value::as_undefined() const {
  static const undefined_data unnamed{"undefined value", "UndefinedError"};
  return ptr_ ? *static_cast<const undefined_data*>(ptr_.get()) : unnamed;
}

bool value::is_list_or_tuple() const {
  return is_sequence() && (flavor() == sequence_flavor::list || flavor() == sequence_flavor::tuple);
}

double value::as_double() const {
  if (is_float()) return float_;
  return static_cast<double>(as_integral());
}

std::size_t value::depth() const {
  if (is_sequence()) return as_sequence().depth;
  if (is_dict()) return as_dict().depth;
  return 1;
}

bool value::identical(const value& other) const {
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case value_kind::none:
      return true;
    case value_kind::boolean:
      return bool_ == other.bool_;
    case value_kind::integer:
      return int_ == other.int_;
    case value_kind::floating:
      return float_ == other.float_;
    default:
      return ptr_ == other.ptr_;
  }
}

bool truthy(const value& v) {
  switch (v.kind()) {
    case value_kind::undefined:
    case value_kind::none:
      return false;
    case value_kind::boolean:
      return v.as_bool();
    case value_kind::integer:
      return v.as_int() != 0;
    case value_kind::floating:
      return v.as_float() != 0.0;
    case value_kind::string:
      return !v.as_string().empty();
    case value_kind::sequence: {
      sequence_flavor f = v.flavor();
      if (f == sequence_flavor::generator || f == sequence_flavor::iterator) return true;
      return !v.items().empty();
    }
    case value_kind::dict:
      return !v.as_dict().entries.empty();
    case value_kind::object:
      return true;
  }
  return false;
}

std::string python_type_name(const value& v) {
  switch (v.kind()) {
    case value_kind::undefined:
      return "Undefined";
    case value_kind::none:
      return "NoneType";
    case value_kind::boolean:
      return "bool";
    case value_kind::integer:
      return "int";
    case value_kind::floating:
      return "float";
    case value_kind::string:
      return v.is_markup() ? "Markup" : "str";
    case value_kind::dict:
      return "dict";
    case value_kind::object:
      return v.as_object().type_name();
    case value_kind::sequence:
      break;
  }
  switch (v.flavor()) {
    case sequence_flavor::list:
      return "list";
    case sequence_flavor::tuple:
      return "tuple";
    case sequence_flavor::range:
      return "range";
    case sequence_flavor::dict_keys:
      return "dict_keys";
    case sequence_flavor::dict_values:
      return "dict_values";
    case sequence_flavor::dict_items:
      return "dict_items";
    case sequence_flavor::generator:
    case sequence_flavor::iterator:
      return v.as_sequence().iterator_type;
  }
  return "object";
}

std::string object_type_repr(const value& v) {
  if (v.is_none()) return "None";
  if (v.is_markup()) return "markupsafe.Markup object";
  if (v.is_undefined()) return "jinja2.runtime.Undefined object";
  if (v.is_object()) return v.as_object().qualified_type_name();
  return python_type_name(v) + " object";
}

}  // namespace troupe::jinja

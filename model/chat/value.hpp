#pragma once
// The values a chat template computes with, modelled on the Python objects
// jinja2 hands a template in transformers' sandbox: None, bool, int (64-bit
// here), float, str (UTF-8, optionally marked safe like markupsafe.Markup),
// list, tuple, dict (insertion-ordered), the read-only iterables filters
// return (generators, range, dict views), callables and other objects
// (macros, bound methods, namespace(), loop), and jinja2's Undefined.
//
// Strings, lists and dicts are immutable and shared; only namespace objects
// (and loop/cycler state) change, which is what the sandbox allows. Internal
// to model/chat.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe::jinja {

class value;
class render_state;

/// Arguments of one call: positional, then keyword in source order.
struct call_args {
  std::vector<value> positional;
  std::vector<std::pair<std::string, value>> keywords;
};

/// A value with behaviour: macros, builtins, bound methods, namespace, loop...
class object : public std::enable_shared_from_this<object> {
 public:
  virtual ~object() = default;
  /// Python's type(x).__name__, used in TypeError messages ("Macro", "LoopContext").
  virtual std::string type_name() const = 0;
  /// jinja2's object_type_repr for Undefined messages ("jinja2.runtime.Macro object").
  virtual std::string qualified_type_name() const = 0;
  /// Python repr()/str() of the object.
  virtual std::string repr() const;
  /// The attribute `name`, or nullopt when the object has none.
  virtual std::optional<value> attribute(std::string_view name) const;
  virtual bool is_callable() const { return false; }
  /// Calls the object; only called when is_callable().
  virtual value call(render_state& state, call_args args) const;
};

/// What kind of Python object a value is.
enum class value_kind : std::uint8_t { undefined, none, boolean, integer, floating, string, sequence, dict, object };

/// The Python type behind a `sequence` value: how it prints, indexes and iterates.
enum class sequence_flavor : std::uint8_t {
  list,
  tuple,
  range,      ///< range(start, stop, step): indexable, not JSON serialisable
  generator,  ///< what map/select/... return: single pass, no len(), no indexing
  iterator,   ///< reversed() and friends: like generator, other type name
  dict_keys,  ///< dict views: len() and iteration, no indexing
  dict_values,
  dict_items,
};

struct string_data {
  std::string text;     ///< UTF-8
  bool markup = false;  ///< a markupsafe.Markup (|safe, |escape)
};

struct sequence_data {
  std::vector<value> items;
  sequence_flavor flavor = sequence_flavor::list;
  std::int64_t range_start = 0, range_stop = 0, range_step = 1;  ///< flavor == range
  std::string iterator_type;                                     ///< flavor == generator/iterator: Python type name
  std::size_t depth = 1;          ///< nesting depth, bounded so teardown cannot overflow the stack
  mutable bool consumed = false;  ///< single-pass flavors: iterated once already
};

struct dict_data {
  std::vector<std::pair<value, value>> entries;  ///< insertion order
  std::size_t depth = 1;
  /// The value under `key` (Python equality), or nullptr.
  const value* find(const value& key) const;
  const value* find(std::string_view key) const;
};

/// jinja2's Undefined: falsy, renders as "", iterates as empty, and raises
/// `error_type` ("UndefinedError" or "SecurityError") with `message` when used.
struct undefined_data {
  std::string message;
  std::string error_type = "UndefinedError";
};

/// One template value (cheap to copy: scalars inline, the rest shared).
class value {
 public:
  /// An Undefined with a generic message; prefer the named factories.
  value() = default;

  static value none();
  static value boolean(bool b);
  static value integer(std::int64_t i);
  static value floating(double f);
  static value string(std::string text, bool markup = false);
  static value list(std::vector<value> items);
  static value tuple(std::vector<value> items);
  static value sequence(std::shared_ptr<const sequence_data> data);
  static value dict(std::vector<std::pair<value, value>> entries);
  static value from_object(std::shared_ptr<object> obj);
  /// Undefined whose use raises `error_type` with `message`.
  static value undefined(std::string message, std::string error_type = "UndefinedError");
  /// Undefined for a missing variable: "'name' is undefined".
  static value undefined_name(std::string_view name);
  /// Undefined for a missing attribute or item of `container` (jinja2 wording).
  static value undefined_member(const value& container, const value& key);

  value_kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == value_kind::undefined; }
  bool is_none() const { return kind_ == value_kind::none; }
  bool is_bool() const { return kind_ == value_kind::boolean; }
  bool is_int() const { return kind_ == value_kind::integer; }
  bool is_float() const { return kind_ == value_kind::floating; }
  /// int, float or bool (Python's numbers.Number).
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind_ == value_kind::string; }
  bool is_markup() const { return is_string() && as_string_data().markup; }
  bool is_sequence() const { return kind_ == value_kind::sequence; }
  bool is_list_or_tuple() const;
  bool is_dict() const { return kind_ == value_kind::dict; }
  bool is_object() const { return kind_ == value_kind::object; }

  bool as_bool() const { return bool_; }
  std::int64_t as_int() const { return int_; }
  double as_float() const { return float_; }
  /// int or bool as int64 (Python bool is an int).
  std::int64_t as_integral() const { return is_bool() ? (bool_ ? 1 : 0) : int_; }
  /// Any number as double.
  double as_double() const;
  const std::string& as_string() const { return as_string_data().text; }
  const string_data& as_string_data() const { return *static_cast<const string_data*>(ptr_.get()); }
  const sequence_data& as_sequence() const { return *static_cast<const sequence_data*>(ptr_.get()); }
  sequence_flavor flavor() const { return as_sequence().flavor; }
  const std::vector<value>& items() const { return as_sequence().items; }
  const dict_data& as_dict() const { return *static_cast<const dict_data*>(ptr_.get()); }
  object& as_object() const { return *static_cast<object*>(ptr_.get()); }
  std::shared_ptr<object> object_ptr() const { return std::static_pointer_cast<object>(ptr_); }
  const undefined_data& as_undefined() const;
  /// Nesting depth of containers (1 for scalars).
  std::size_t depth() const;

  /// Same object (Python `is`), for the `sameas` test.
  bool identical(const value& other) const;

 private:
  explicit value(value_kind kind) : kind_(kind) {}

  value_kind kind_ = value_kind::undefined;
  union {
    bool bool_;
    std::int64_t int_ = 0;
    double float_;
  };
  std::shared_ptr<void> ptr_;
};

/// Python truthiness (Undefined is falsy, objects and generators truthy).
bool truthy(const value& v);
/// type(v).__name__ as Python spells it in TypeError messages ("NoneType", "str", "Markup").
std::string python_type_name(const value& v);
/// jinja2.utils.object_type_repr, used by Undefined messages ("dict object", "None").
std::string object_type_repr(const value& v);

}  // namespace troupe::jinja

#pragma once
// The object values a template meets: macros, loop, namespace(), cycler,
// joiner, builtin functions and bound methods. Internal to model/chat.

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/chat/ast.hpp"
#include "model/chat/interpreter.hpp"
#include "model/chat/value.hpp"

namespace troupe::jinja {

/// A function implemented in C++: a global (range, namespace...), a bound
/// method of a value ('a'.upper), or a method of an object (loop.cycle).
class native_function : public object {
 public:
  using body = std::function<value(render_state&, call_args&)>;
  native_function(std::string name, std::string type, body fn)
      : name_(std::move(name)), type_(std::move(type)), fn_(std::move(fn)) {}
  std::string type_name() const override { return type_; }
  std::string qualified_type_name() const override { return type_ + " object"; }
  std::string repr() const override { return "<built-in function " + name_ + ">"; }
  bool is_callable() const override { return true; }
  value call(render_state& state, call_args args) const override { return fn_(state, args); }

 private:
  std::string name_;
  std::string type_;
  body fn_;
};

/// A {% macro %} or a call block's `caller`, closed over the scope it was defined in.
class macro_object : public object {
 public:
  macro_object(const macro_def* def, scope_ptr closure) : def_(def), closure_(std::move(closure)) {}
  std::string type_name() const override { return "Macro"; }
  std::string qualified_type_name() const override { return "jinja2.runtime.Macro object"; }
  std::string repr() const override;
  std::optional<value> attribute(std::string_view name) const override;
  bool is_callable() const override { return true; }
  value call(render_state& state, call_args args) const override { return state.call_macro(*this, std::move(args)); }
  const macro_def& def() const { return *def_; }
  const scope_ptr& closure() const { return closure_; }

 private:
  const macro_def* def_;
  scope_ptr closure_;
};

/// transformers' TemplateNamespace: the one mutable object a template can
/// build ({% set ns.x = ... %}); attribute names may not start with "_".
class namespace_object : public object {
 public:
  std::string type_name() const override { return "TemplateNamespace"; }
  std::string qualified_type_name() const override {
    return "transformers.utils.chat_template_utils.TemplateNamespace object";
  }
  std::string repr() const override;
  std::optional<value> attribute(std::string_view name) const override;
  /// Sets an attribute; SecurityError for a name starting with "_".
  void set(std::string_view name, value v);
  void clear() { attrs_.clear(); }

 private:
  std::vector<std::pair<std::string, value>> attrs_;
};

/// jinja2's LoopContext for one for-loop (updated in place as it advances).
class loop_object : public object {
 public:
  loop_object(std::vector<value> items, std::size_t depth0, const for_stmt* recursive_node, scope_ptr frame)
      : items_(std::move(items)), depth0_(depth0), node_(recursive_node), frame_(std::move(frame)) {}
  std::string type_name() const override { return "LoopContext"; }
  std::string qualified_type_name() const override { return "jinja2.runtime.LoopContext object"; }
  std::string repr() const override;
  std::optional<value> attribute(std::string_view name) const override;
  bool is_callable() const override { return true; }
  value call(render_state& state, call_args args) const override;
  void advance(std::size_t index0) { index0_ = index0; }
  const std::vector<value>& items() const { return items_; }

 private:
  value changed(call_args& args) const;

  std::vector<value> items_;
  std::size_t index0_ = 0;
  std::size_t depth0_;
  const for_stmt* node_;  ///< set for `recursive` loops
  scope_ptr frame_;
  mutable std::optional<value> last_changed_;
};

/// jinja2.utils.Cycler (cycler(...)): next(), reset(), current.
class cycler_object : public object {
 public:
  explicit cycler_object(std::vector<value> items) : items_(std::move(items)) {}
  std::string type_name() const override { return "Cycler"; }
  std::string qualified_type_name() const override { return "jinja2.utils.Cycler object"; }
  std::optional<value> attribute(std::string_view name) const override;

 private:
  std::vector<value> items_;
  mutable std::size_t pos_ = 0;
};

/// jinja2.utils.Joiner (joiner(sep)): "" on the first call, then sep.
class joiner_object : public object {
 public:
  explicit joiner_object(std::string sep) : sep_(std::move(sep)) {}
  std::string type_name() const override { return "Joiner"; }
  std::string qualified_type_name() const override { return "jinja2.utils.Joiner object"; }
  bool is_callable() const override { return true; }
  value call(render_state&, call_args) const override;

 private:
  std::string sep_;
  mutable bool used_ = false;
};

/// Wraps a C++ callable as a template value.
value make_function(std::string name, std::string type, native_function::body fn);

}  // namespace troupe::jinja

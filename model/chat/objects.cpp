#include "model/chat/objects.hpp"

#include "model/chat/errors.hpp"
#include "model/chat/operators.hpp"
#include "model/chat/py_format.hpp"

namespace troupe::jinja {

value make_function(std::string name, std::string type, native_function::body fn) {
  return value::from_object(std::make_shared<native_function>(std::move(name), std::move(type), std::move(fn)));
}

std::string macro_object::repr() const { return "<Macro " + py_string_repr(def_->name) + ">"; }

std::optional<value> macro_object::attribute(std::string_view name) const {
  if (name == "name") return value::string(def_->name);
  if (name == "arguments") {
    std::vector<value> params;
    for (const std::string& p : def_->params) params.push_back(value::string(p));
    return value::tuple(std::move(params));
  }
  if (name == "catch_kwargs") return value::boolean(def_->uses_kwargs);
  if (name == "catch_varargs") return value::boolean(def_->uses_varargs);
  if (name == "caller") return value::boolean(def_->uses_caller);
  return std::nullopt;
}

std::string namespace_object::repr() const {
  std::vector<std::pair<value, value>> entries;
  for (const auto& [k, v] : attrs_) entries.emplace_back(value::string(k), v);
  return "<Namespace " + py_repr(value::dict(std::move(entries))) + ">";
}

std::optional<value> namespace_object::attribute(std::string_view name) const {
  for (const auto& [k, v] : attrs_)
    if (k == name) return v;
  return std::nullopt;
}

void namespace_object::set(std::string_view name, value v) {
  if (!name.empty() && name.front() == '_')
    throw script_error("SecurityError",
                       "Chat templates cannot store underscore-prefixed attributes on a namespace, but got " +
                           py_string_repr(name) + ". Please rename the attribute.");
  for (auto& [k, existing] : attrs_) {
    if (k == name) {
      existing = std::move(v);
      return;
    }
  }
  attrs_.emplace_back(std::string(name), std::move(v));
}

std::string loop_object::repr() const {
  return "<LoopContext " + std::to_string(index0_ + 1) + "/" + std::to_string(items_.size()) + ">";
}

std::optional<value> loop_object::attribute(std::string_view name) const {
  auto length = static_cast<std::int64_t>(items_.size());
  auto index0 = static_cast<std::int64_t>(index0_);
  if (name == "index0") return value::integer(index0);
  if (name == "index") return value::integer(index0 + 1);
  if (name == "revindex") return value::integer(length - index0);
  if (name == "revindex0") return value::integer(length - index0 - 1);
  if (name == "first") return value::boolean(index0 == 0);
  if (name == "last") return value::boolean(index0 + 1 == length);
  if (name == "length") return value::integer(length);
  if (name == "depth") return value::integer(static_cast<std::int64_t>(depth0_) + 1);
  if (name == "depth0") return value::integer(static_cast<std::int64_t>(depth0_));
  if (name == "previtem") return index0 > 0 ? items_[index0_ - 1] : value::undefined("there is no previous item");
  if (name == "nextitem") return index0 + 1 < length ? items_[index0_ + 1] : value::undefined("there is no next item");
  if (name == "cycle") {
    std::size_t index = index0_;
    return make_function("cycle", "method", [index](render_state&, call_args& args) {
      if (args.positional.empty()) throw script_error("TypeError", "no items for cycling given");
      return args.positional[index % args.positional.size()];
    });
  }
  if (name == "changed") {
    auto self = std::static_pointer_cast<const loop_object>(shared_from_this());
    return make_function("changed", "method", [self](render_state&, call_args& args) { return self->changed(args); });
  }
  return std::nullopt;
}

value loop_object::changed(call_args& args) const {
  value current = value::tuple(std::move(args.positional));
  if (last_changed_ && py_equal(*last_changed_, current)) return value::boolean(false);
  last_changed_ = std::move(current);
  return value::boolean(true);
}

value loop_object::call(render_state& state, call_args args) const {
  if (node_ == nullptr)
    throw script_error("TypeError", "The loop must have the 'recursive' marker to be called recursively.");
  if (args.positional.size() != 1 || !args.keywords.empty())
    throw script_error("TypeError", "loop() takes exactly one argument, the items to recurse into");
  return value::string(state.run_recursive_loop(*node_, frame_, args.positional.front(), depth0_ + 1));
}

std::optional<value> cycler_object::attribute(std::string_view name) const {
  if (name == "items") return value::tuple(items_);
  if (name == "pos") return value::integer(static_cast<std::int64_t>(pos_));
  if (name == "current") return items_[pos_];
  if (name == "next") {
    auto self = std::static_pointer_cast<const cycler_object>(shared_from_this());
    return make_function("next", "method", [self](render_state&, call_args&) {
      value current = self->items_[self->pos_];
      self->pos_ = (self->pos_ + 1) % self->items_.size();
      return current;
    });
  }
  if (name == "reset") {
    auto self = std::static_pointer_cast<const cycler_object>(shared_from_this());
    return make_function("reset", "method", [self](render_state&, call_args&) {
      self->pos_ = 0;
      return value::none();
    });
  }
  return std::nullopt;
}

value joiner_object::call(render_state&, call_args) const {
  if (!used_) {
    used_ = true;
    return value::string("");
  }
  return value::string(sep_);
}

}  // namespace troupe::jinja

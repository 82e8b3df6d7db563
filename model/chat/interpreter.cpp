// Statements: output, for, if, set, macro, call, filter/with blocks.

#include "model/chat/interpreter.hpp"

#include <algorithm>

#include "model/chat/builtins.hpp"
#include "model/chat/errors.hpp"
#include "model/chat/json_bridge.hpp"
#include "model/chat/objects.hpp"
#include "model/chat/py_format.hpp"

namespace troupe::jinja {

const value* scope::find(std::string_view name) const {
  for (const scope* s = this; s != nullptr; s = s->parent_.get())
    for (const auto& [k, v] : s->vars_)
      if (k == name) return &v;
  return nullptr;
}

void scope::set(std::string_view name, value v) {
  for (auto& [k, existing] : vars_) {
    if (k == name) {
      existing = std::move(v);
      return;
    }
  }
  vars_.emplace_back(std::string(name), std::move(v));
}

render_state::render_state(const template_ast& ast, const chat_render_options& options,
                           const boost::json::object& context)
    : ast_(ast), options_(options) {
  for (const auto& [key, json] : context) context_.insert_or_assign(std::string(key), from_json(json));
}

render_state::~render_state() {
  // Namespaces can hold themselves (directly or through lists); clear the
  // ones still alive so the cycles are freed.
  for (const auto& weak : mutable_objects_)
    if (auto obj = weak.lock())
      if (auto* ns = dynamic_cast<namespace_object*>(obj.get())) ns->clear();
}

void render_state::track_mutable(const std::shared_ptr<object>& obj) {
  if (mutable_objects_.size() >= 64 && mutable_objects_.size() == mutable_objects_.capacity()) {
    std::erase_if(mutable_objects_, [](const std::weak_ptr<object>& w) { return w.expired(); });
  }
  mutable_objects_.push_back(obj);
}

std::string render_state::run() {
  std::string out;
  out_ = &out;
  iteration_limit_scope string_limit(options_.limits.max_collection_items);
  repr_limit_scope repr_limit(options_.limits.max_output_bytes);
  scope_lease root(std::make_shared<scope>(nullptr));
  exec(ast_.body, root.get());
  return out;
}

render_state::depth_guard::depth_guard(render_state& st) : st_(st) {
  if (++st_.call_depth_ > st_.options_.limits.max_call_depth) {
    --st_.call_depth_;
    throw limit_error("maximum recursion depth exceeded (more than " +
                      std::to_string(st_.options_.limits.max_call_depth) + " nested macro calls)");
  }
}

void render_state::step(std::uint64_t n) {
  steps_ += n;
  if (steps_ > options_.limits.max_steps)
    throw limit_error("template exceeded " + std::to_string(options_.limits.max_steps) + " evaluation steps");
}

void render_state::charge(const value& v) {
  // Building a big value takes time in proportion to its size: one step per
  // 16 bytes of string or 16 items, so loops copying huge values stop early.
  if (v.is_string())
    step(v.as_string().size() >> 4);
  else if (v.is_sequence())
    step(v.items().size() >> 4);
  else if (v.is_dict())
    step(v.as_dict().entries.size() >> 4);
}

void render_state::check_string_size(std::size_t bytes) const {
  if (bytes > options_.limits.max_output_bytes)
    throw limit_error("string of " + std::to_string(bytes) + " bytes exceeds the limit of " +
                      std::to_string(options_.limits.max_output_bytes) + " bytes");
}

void render_state::check_items(std::size_t items) const {
  if (items > options_.limits.max_collection_items)
    throw limit_error("collection of " + std::to_string(items) + " items exceeds the limit of " +
                      std::to_string(options_.limits.max_collection_items));
}

std::tm render_state::now() const {
  if (options_.now) return *options_.now;
  std::time_t t = std::time(nullptr);
  std::tm local{};
  localtime_r(&t, &local);
  return local;
}

void render_state::write(std::string_view text) {
  if (out_->size() + text.size() > options_.limits.max_output_bytes)
    throw limit_error("rendered output exceeds " + std::to_string(options_.limits.max_output_bytes) + " bytes");
  out_->append(text);
}

std::string render_state::capture(const stmt_list& body, const scope_ptr& frame) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  try {
    exec(body, frame);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buffer;
}

value render_state::lookup(std::string_view name, const scope* frame) const {
  if (const value* v = frame->find(name)) return *v;
  if (auto it = context_.find(name); it != context_.end()) return it->second;
  if (std::optional<value> g = find_global(name)) return *g;
  return value::undefined_name(name);
}

flow render_state::exec(const stmt_list& body, const scope_ptr& frame) {
  for (const stmt_ptr& s : body) {
    flow f = exec_one(*s, frame);
    if (f != flow::normal) return f;
  }
  return flow::normal;
}

flow render_state::exec_one(const stmt& s, const scope_ptr& frame) {
  step();
  offset = s.offset;
  switch (s.kind) {
    case stmt_kind::output:
      exec_output(static_cast<const output_stmt&>(s), frame);
      break;
    case stmt_kind::for_loop:
      return exec_for(static_cast<const for_stmt&>(s), frame);
    case stmt_kind::if_chain: {
      flow result = flow::normal;
      exec_if(static_cast<const if_stmt&>(s), frame, result);
      return result;
    }
    case stmt_kind::set: {
      const auto& node = static_cast<const set_stmt&>(s);
      value v = eval(*node.value_expr, frame);
      assign(node.target, v, frame);
      break;
    }
    case stmt_kind::set_block:
    case stmt_kind::filter_block:
      exec_block(static_cast<const block_stmt&>(s), frame);
      break;
    case stmt_kind::macro: {
      const auto& node = static_cast<const macro_stmt&>(s);
      frame->set(node.def->name, value::from_object(std::make_shared<macro_object>(node.def.get(), frame)));
      frame->mark_captured();
      break;
    }
    case stmt_kind::call_block:
      exec_call_block(static_cast<const call_block_stmt&>(s), frame);
      break;
    case stmt_kind::with: {
      const auto& node = static_cast<const with_stmt&>(s);
      scope_lease inner(std::make_shared<scope>(frame));
      for (const auto& [target, value_expr] : node.assignments) assign(target, eval(*value_expr, frame), inner.get());
      return exec(node.body, inner.get());
    }
    case stmt_kind::loop_break:
      return flow::loop_break;
    case stmt_kind::loop_continue:
      return flow::loop_continue;
  }
  return flow::normal;
}

void render_state::exec_output(const output_stmt& node, const scope_ptr& frame) {
  for (const output_part& part : node.parts) {
    if (part.expression == nullptr) {
      write(part.text);
    } else {
      value v = eval(*part.expression, frame);
      if (v.is_string())
        write(v.as_string());
      else
        write(py_str(v));
    }
  }
}

void render_state::exec_if(const if_stmt& node, const scope_ptr& frame, flow& result) {
  for (const auto& [test, body] : node.branches) {
    if (truthy(eval(*test, frame))) {
      result = exec(body, frame);
      return;
    }
  }
  result = exec(node.else_body, frame);
}

flow render_state::exec_for(const for_stmt& node, const scope_ptr& frame) {
  value iterable = eval(*node.iterable, frame);
  offset = node.offset;
  run_loop(node, frame, py_iterate(iterable), 0);
  return flow::normal;
}

flow render_state::run_loop(const for_stmt& node, const scope_ptr& frame, std::vector<value> items,
                            std::size_t depth0) {
  if (node.filter != nullptr) {
    std::vector<value> kept;
    for (value& item : items) {
      auto probe = std::make_shared<scope>(frame);
      assign(node.target, item, probe);
      if (truthy(eval(*node.filter, probe))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    scope_lease otherwise(std::make_shared<scope>(frame));
    return exec(node.else_body, otherwise.get());
  }
  auto loop = std::make_shared<loop_object>(std::move(items), depth0, node.recursive ? &node : nullptr, frame);
  value loop_value = value::from_object(loop);
  for (std::size_t i = 0; i < loop->items().size(); ++i) {
    if (++iterations_ > options_.limits.max_loop_iterations)
      throw limit_error("template exceeded " + std::to_string(options_.limits.max_loop_iterations) +
                        " loop iterations");
    loop->advance(i);
    scope_lease iteration(std::make_shared<scope>(frame));
    iteration.get()->set("loop", loop_value);
    assign(node.target, loop->items()[i], iteration.get());
    if (exec(node.body, iteration.get()) == flow::loop_break) break;
  }
  return flow::normal;
}

std::string render_state::run_recursive_loop(const for_stmt& node, const scope_ptr& frame, const value& items,
                                             std::size_t depth0) {
  depth_guard guard(*this);
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  try {
    run_loop(node, frame, py_iterate(items), depth0);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buffer;
}

void render_state::exec_block(const block_stmt& node, const scope_ptr& frame) {
  scope_lease inner(std::make_shared<scope>(frame));
  std::string text = capture(node.body, inner.get());
  value result = value::string(std::move(text));
  if (node.filter != nullptr) result = apply_filters(*node.filter, result, frame);
  if (node.kind == stmt_kind::set_block) {
    assign(node.target, result, frame);
  } else {
    write(py_str(result));
  }
}

void render_state::exec_call_block(const call_block_stmt& node, const scope_ptr& frame) {
  const auto& call_node = static_cast<const call_expr&>(*node.call);
  value callee = eval(*call_node.callee, frame);
  call_args args = eval_args(call_node.args, frame);
  args.keywords.emplace_back("caller", value::from_object(std::make_shared<macro_object>(node.caller.get(), frame)));
  offset = node.offset;
  value result = call(callee, std::move(args));
  write(py_str(result));
}

void render_state::assign(const assign_target& target, const value& v, const scope_ptr& frame) {
  switch (target.type) {
    case assign_target::kind::name:
      frame->set(target.name, v);
      return;
    case assign_target::kind::namespace_attr: {
      value ns = lookup(target.name, frame.get());
      auto* obj = ns.is_object() ? dynamic_cast<namespace_object*>(&ns.as_object()) : nullptr;
      offset = target.offset;
      if (obj == nullptr) throw script_error("TemplateRuntimeError", "cannot assign attribute on non-namespace object");
      obj->set(target.attr, v);
      return;
    }
    case assign_target::kind::tuple: {
      offset = target.offset;
      if (!v.is_string() && !v.is_sequence() && !v.is_dict() && !v.is_undefined())
        throw script_error("TypeError", "cannot unpack non-iterable " + python_type_name(v) + " object");
      std::vector<value> items = py_iterate(v);
      std::size_t expected = target.items.size();
      if (items.size() > expected)
        throw script_error("ValueError", "too many values to unpack (expected " + std::to_string(expected) + ")");
      if (items.size() < expected)
        throw script_error("ValueError", "not enough values to unpack (expected " + std::to_string(expected) +
                                             ", got " + std::to_string(items.size()) + ")");
      for (std::size_t i = 0; i < expected; ++i) assign(target.items[i], items[i], frame);
      return;
    }
  }
}

value render_state::call_macro(const macro_object& macro, call_args args) {
  depth_guard guard(*this);
  const macro_def& def = macro.def();
  scope_lease lease(std::make_shared<scope>(macro.closure()));
  const scope_ptr& frame = lease.get();
  std::size_t count = def.params.size();
  std::vector<std::optional<value>> bound(count);
  for (std::size_t i = 0; i < count && i < args.positional.size(); ++i) bound[i] = args.positional[i];
  std::vector<std::pair<value, value>> extra_kwargs;
  std::optional<value> caller;
  std::vector<std::string> unknown;
  for (auto& [name, v] : args.keywords) {
    auto it = std::find(def.params.begin(), def.params.end(), name);
    auto index = static_cast<std::size_t>(it - def.params.begin());
    if (it != def.params.end() && index >= args.positional.size()) {
      bound[index] = std::move(v);
    } else if (name == "caller" && def.uses_caller && !caller) {
      caller = std::move(v);
    } else if (def.uses_kwargs) {
      extra_kwargs.emplace_back(value::string(name), std::move(v));
    } else {
      unknown.push_back(name);
    }
  }
  if (!unknown.empty()) {
    if (std::find(unknown.begin(), unknown.end(), "caller") != unknown.end())
      throw script_error("TypeError", "macro " + py_string_repr(def.name) +
                                          " was invoked with two values for the special caller argument. This is "
                                          "most likely a bug.");
    throw script_error("TypeError", "macro " + py_string_repr(def.name) + " takes no keyword argument " +
                                        py_string_repr(unknown.front()));
  }
  if (args.positional.size() > count && !def.uses_varargs)
    throw script_error("TypeError", "macro " + py_string_repr(def.name) + " takes not more than " +
                                        std::to_string(count) + " argument(s)");
  std::size_t first_default = count - def.defaults.size();
  for (std::size_t i = 0; i < count; ++i) {
    if (!bound[i]) {
      bound[i] = i >= first_default
                     ? eval(*def.defaults[i - first_default], frame)
                     : value::undefined("parameter " + py_string_repr(def.params[i]) + " was not provided");
    }
    frame->set(def.params[i], *bound[i]);
  }
  if (def.uses_caller) frame->set("caller", caller ? *caller : value::undefined("No caller defined"));
  if (def.uses_kwargs) frame->set("kwargs", value::dict(std::move(extra_kwargs)));
  if (def.uses_varargs) {
    std::vector<value> rest;
    for (std::size_t i = count; i < args.positional.size(); ++i) rest.push_back(args.positional[i]);
    frame->set("varargs", value::tuple(std::move(rest)));
  }
  return value::string(capture(def.body, frame));
}

}  // namespace troupe::jinja

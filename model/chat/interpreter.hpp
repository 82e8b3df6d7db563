#pragma once
// Renders a parsed template: one render_state per render holds the variable
// scopes, the output buffer, the limit counters and the objects that must be
// released when the render ends. Scoping follows jinja2: `if` shares its
// scope, each for-loop iteration, macro call, {% with %} and block body gets
// a fresh one whose parent is where it was written.
// Internal to model/chat.

#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/chat/ast.hpp"
#include "model/chat/chat_template.hpp"
#include "model/chat/operators.hpp"
#include "model/chat/value.hpp"

namespace troupe::jinja {

/// Variables assigned in one frame; lookups walk to the parent.
class scope {
 public:
  explicit scope(std::shared_ptr<scope> parent) : parent_(std::move(parent)) {}
  /// The variable in this scope or an ancestor, or nullptr.
  const value* find(std::string_view name) const;
  /// Assigns in this scope.
  void set(std::string_view name, value v);
  /// Records that a macro defined here closes over this scope (a reference cycle).
  void mark_captured() { captured_ = true; }
  /// Drops the variables of a captured scope, breaking the cycle, once its frame is done.
  void release() {
    if (captured_) vars_.clear();
  }

 private:
  std::shared_ptr<scope> parent_;
  std::vector<std::pair<std::string, value>> vars_;
  bool captured_ = false;
};
using scope_ptr = std::shared_ptr<scope>;

/// Releases a frame's scope when the frame ends, also on errors.
class scope_lease {
 public:
  explicit scope_lease(scope_ptr s) : scope_(std::move(s)) {}
  ~scope_lease() { scope_->release(); }
  scope_lease(const scope_lease&) = delete;
  scope_lease& operator=(const scope_lease&) = delete;
  const scope_ptr& get() const { return scope_; }

 private:
  scope_ptr scope_;
};

/// How a statement list ended.
enum class flow { normal, loop_break, loop_continue };

class macro_object;
class loop_object;

/// Hash for looking std::string keys up by string_view without a copy.
struct string_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class render_state {
 public:
  render_state(const template_ast& ast, const chat_render_options& options, const boost::json::object& context);
  ~render_state();
  render_state(const render_state&) = delete;
  render_state& operator=(const render_state&) = delete;

  /// Renders the whole template.
  std::string run();

  // Statements and expressions.
  flow exec(const stmt_list& body, const scope_ptr& frame);
  value eval(const expr& e, const scope_ptr& frame);
  /// Renders `body` in `frame` into a string (macro bodies, block set, filter blocks).
  std::string capture(const stmt_list& body, const scope_ptr& frame);

  // Python-level operations with the sandbox's rules.
  value getattr(const value& obj, std::string_view name);
  value getitem(const value& obj, const value& key);
  value call(const value& callee, call_args args);
  value call_filter(std::string_view name, const value& operand, call_args args);
  bool call_test(std::string_view name, const value& operand, call_args args);
  value lookup(std::string_view name, const scope* frame) const;
  /// Renders one more body of a recursive loop (loop(items)).
  std::string run_recursive_loop(const for_stmt& node, const scope_ptr& frame, const value& items, std::size_t depth0);
  /// Invokes a macro (or caller) with bound arguments.
  value call_macro(const macro_object& macro, call_args args);

  // Limits.
  void step(std::uint64_t n = 1);
  /// Counts the work of building `v` (proportional to its size) against max_steps.
  void charge(const value& v);
  void check_string_size(std::size_t bytes) const;
  void check_items(std::size_t items) const;
  size_limits sizes() const { return {options_.limits.max_output_bytes, options_.limits.max_collection_items}; }
  const chat_render_options& options() const { return options_; }
  std::tm now() const;

  /// Registers a namespace (or other object that may hold itself) so that the
  /// render's end can break the cycles it took part in.
  void track_mutable(const std::shared_ptr<object>& obj);

  /// Byte offset of the node being evaluated, for error positions.
  std::size_t offset = 0;

 private:
  flow exec_one(const stmt& s, const scope_ptr& frame);
  flow exec_for(const for_stmt& node, const scope_ptr& frame);
  flow run_loop(const for_stmt& node, const scope_ptr& frame, std::vector<value> items, std::size_t depth0);
  void exec_if(const if_stmt& node, const scope_ptr& frame, flow& result);
  void exec_output(const output_stmt& node, const scope_ptr& frame);
  void exec_call_block(const call_block_stmt& node, const scope_ptr& frame);
  void exec_block(const block_stmt& node, const scope_ptr& frame);
  void assign(const assign_target& target, const value& v, const scope_ptr& frame);
  void write(std::string_view text);
  value apply_filters(const expr& chain, value operand, const scope_ptr& frame);

  // Expressions (evaluate.cpp).
  value eval_call(const call_expr& e, const scope_ptr& frame);
  call_args eval_args(const call_arguments& args, const scope_ptr& frame);
  value eval_filter(const filter_expr& e, const scope_ptr& frame, const value* block_operand);
  value eval_compare(const compare_expr& e, const scope_ptr& frame);
  value eval_subscript(const getitem_expr& e, const scope_ptr& frame);
  value eval_concat(const items_expr& e, const scope_ptr& frame);
  value eval_display(const expr& e, const scope_ptr& frame);  ///< list, tuple or dict literal

  struct depth_guard {
    depth_guard(render_state& st);
    ~depth_guard() { --st_.call_depth_; }
    render_state& st_;
  };

  const template_ast& ast_;
  const chat_render_options& options_;
  std::unordered_map<std::string, value, string_hash, std::equal_to<>> context_;
  std::string* out_ = nullptr;
  std::uint64_t steps_ = 0;
  std::uint64_t iterations_ = 0;
  std::uint32_t call_depth_ = 0;
  std::vector<std::weak_ptr<object>> mutable_objects_;
};

}  // namespace troupe::jinja

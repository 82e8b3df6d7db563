#pragma once
// The syntax tree of a parsed template. Built once by the parser and then
// only read (by any number of concurrent renders). Every node records the
// byte offset of the token it came from, for error positions.
// Internal to model/chat.

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/chat/operators.hpp"
#include "model/chat/value.hpp"

namespace troupe::jinja {

struct expr;
struct stmt;
using expr_ptr = std::unique_ptr<expr>;
using stmt_ptr = std::unique_ptr<stmt>;
using stmt_list = std::vector<stmt_ptr>;

enum class expr_kind {
  literal,
  name,
  list,
  tuple,
  dict,
  getattr,
  getitem,
  slice,
  call,
  filter,
  test,
  negate,
  plus,
  logical_not,
  binary,
  logical_and,
  logical_or,
  concat,
  compare,
  condition,
};

struct expr {
  expr(expr_kind k, std::size_t off) : kind(k), offset(off) {}
  virtual ~expr() = default;
  expr_kind kind;
  std::size_t offset;
};

struct keyword_arg {
  std::string name;
  expr_ptr value;
};

/// f(a, b, k=v, *args, **kwargs)
struct call_arguments {
  std::vector<expr_ptr> positional;
  std::vector<keyword_arg> keywords;
  expr_ptr star_args;
  expr_ptr star_kwargs;
};

struct literal_expr : expr {
  literal_expr(std::size_t off, value v) : expr(expr_kind::literal, off), constant(std::move(v)) {}
  value constant;
};

struct name_expr : expr {
  name_expr(std::size_t off, std::string n) : expr(expr_kind::name, off), name(std::move(n)) {}
  std::string name;
};

/// List or tuple display, or one operand (negate, plus, not): items[0].
struct items_expr : expr {
  items_expr(expr_kind k, std::size_t off) : expr(k, off) {}
  std::vector<expr_ptr> items;
};

struct dict_expr : expr {
  explicit dict_expr(std::size_t off) : expr(expr_kind::dict, off) {}
  std::vector<std::pair<expr_ptr, expr_ptr>> items;
};

struct getattr_expr : expr {
  getattr_expr(std::size_t off, expr_ptr obj, std::string n)
      : expr(expr_kind::getattr, off), object(std::move(obj)), name(std::move(n)) {}
  expr_ptr object;
  std::string name;
};

/// obj[key]; key may be a slice_expr.
struct getitem_expr : expr {
  getitem_expr(std::size_t off, expr_ptr obj, expr_ptr k)
      : expr(expr_kind::getitem, off), object(std::move(obj)), key(std::move(k)) {}
  expr_ptr object;
  expr_ptr key;
};

struct slice_expr : expr {
  explicit slice_expr(std::size_t off) : expr(expr_kind::slice, off) {}
  expr_ptr start, stop, step;  ///< each may be null
};

struct call_expr : expr {
  call_expr(std::size_t off, expr_ptr c) : expr(expr_kind::call, off), callee(std::move(c)) {}
  expr_ptr callee;
  call_arguments args;
};

/// operand|name(args) or operand is name(args). `operand` is null inside
/// {% filter %} and {% set x | f %}, where the block's text is the operand.
/// `known` is false for a name nobody registered (a runtime error, see parser).
struct filter_expr : expr {
  filter_expr(expr_kind k, std::size_t off) : expr(k, off) {}
  expr_ptr operand;
  std::string name;
  call_arguments args;
  bool known = true;
};

struct binary_expr : expr {
  binary_expr(expr_kind k, std::size_t off, expr_ptr l, expr_ptr r)
      : expr(k, off), left(std::move(l)), right(std::move(r)) {}
  binary_op op = binary_op::add;  ///< expr_kind::binary only
  expr_ptr left, right;
};

enum class compare_kind { eq, ne, lt, le, gt, ge, in, not_in };

struct compare_expr : expr {
  compare_expr(std::size_t off, expr_ptr f) : expr(expr_kind::compare, off), first(std::move(f)) {}
  expr_ptr first;
  std::vector<std::pair<compare_kind, expr_ptr>> rest;
};

/// `then if test else otherwise`; otherwise may be null (yields Undefined).
struct condition_expr : expr {
  explicit condition_expr(std::size_t off) : expr(expr_kind::condition, off) {}
  expr_ptr test, then, otherwise;
};

/// A name, a tuple of targets, or a namespace attribute (ns.attr).
struct assign_target {
  enum class kind { name, tuple, namespace_attr } type = kind::name;
  std::string name;
  std::string attr;
  std::vector<assign_target> items;
  std::size_t offset = 0;
};

enum class stmt_kind {
  output,
  for_loop,
  if_chain,
  set,
  set_block,
  macro,
  call_block,
  filter_block,
  with,
  loop_break,
  loop_continue,
};

struct stmt {
  stmt(stmt_kind k, std::size_t off) : kind(k), offset(off) {}
  virtual ~stmt() = default;
  stmt_kind kind;
  std::size_t offset;
};

/// Template text (expression == null) or {{ expression }}.
struct output_part {
  std::string text;
  expr_ptr expression;
};

struct output_stmt : stmt {
  explicit output_stmt(std::size_t off) : stmt(stmt_kind::output, off) {}
  std::vector<output_part> parts;
};

struct for_stmt : stmt {
  explicit for_stmt(std::size_t off) : stmt(stmt_kind::for_loop, off) {}
  assign_target target;
  expr_ptr iterable;
  expr_ptr filter;  ///< `for x in y if cond`, may be null
  bool recursive = false;
  stmt_list body, else_body;
};

struct if_stmt : stmt {
  explicit if_stmt(std::size_t off) : stmt(stmt_kind::if_chain, off) {}
  std::vector<std::pair<expr_ptr, stmt_list>> branches;  ///< if, then each elif
  stmt_list else_body;
};

struct set_stmt : stmt {
  explicit set_stmt(std::size_t off) : stmt(stmt_kind::set, off) {}
  assign_target target;
  expr_ptr value_expr;
};

/// {% set x | filters %}...{% endset %}, {% filter f %}...{% endfilter %}
/// and {% generation %}...{% endgeneration %} (no target, no filter).
struct block_stmt : stmt {
  block_stmt(stmt_kind k, std::size_t off) : stmt(k, off) {}
  assign_target target;  ///< set_block only
  expr_ptr filter;       ///< chain of filter_expr with a null innermost operand; may be null
  stmt_list body;
};

/// A macro (or a call block's caller) definition.
struct macro_def {
  std::string name;
  std::vector<std::string> params;
  std::vector<expr_ptr> defaults;  ///< for the last defaults.size() params
  stmt_list body;
  bool uses_caller = false, uses_varargs = false, uses_kwargs = false;
};

struct macro_stmt : stmt {
  explicit macro_stmt(std::size_t off) : stmt(stmt_kind::macro, off) {}
  std::shared_ptr<const macro_def> def;
};

struct call_block_stmt : stmt {
  explicit call_block_stmt(std::size_t off) : stmt(stmt_kind::call_block, off) {}
  std::shared_ptr<const macro_def> caller;
  expr_ptr call;  ///< a call_expr
};

struct with_stmt : stmt {
  explicit with_stmt(std::size_t off) : stmt(stmt_kind::with, off) {}
  std::vector<std::pair<assign_target, expr_ptr>> assignments;
  stmt_list body;
};

/// A parsed template: the statement list plus the source it came from.
struct template_ast {
  std::string source;  ///< newline-normalised
  stmt_list body;
};

}  // namespace troupe::jinja

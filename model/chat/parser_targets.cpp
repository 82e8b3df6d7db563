// Assignment targets and the name scan that tells what a macro body reads.

#include "model/chat/errors.hpp"
#include "model/chat/parser.hpp"
#include "model/chat/py_format.hpp"

namespace troupe::jinja {

namespace {

assign_target to_target(parser& p, const expr& e) {
  assign_target target;
  target.offset = e.offset;
  switch (e.kind) {
    case expr_kind::name:
      target.name = static_cast<const name_expr&>(e).name;
      return target;
    case expr_kind::getattr: {
      const auto& g = static_cast<const getattr_expr&>(e);
      if (g.object->kind == expr_kind::name) {
        target.type = assign_target::kind::namespace_attr;
        target.name = static_cast<const name_expr&>(*g.object).name;
        target.attr = g.name;
        return target;
      }
      break;
    }
    case expr_kind::tuple:
      target.type = assign_target::kind::tuple;
      for (const expr_ptr& item : static_cast<const items_expr&>(e).items) target.items.push_back(to_target(p, *item));
      return target;
    default:
      break;
  }
  const char* what = e.kind == expr_kind::literal ? "const" : e.kind == expr_kind::list ? "list" : "expression";
  p.fail(std::string("can't assign to ") + py_string_repr(what), e.offset);
}

void scan_args(const call_arguments& args, std::vector<std::string>& names);

void scan_expr(const expr* e, std::vector<std::string>& names) {
  if (e == nullptr) return;
  switch (e->kind) {
    case expr_kind::name:
      names.push_back(static_cast<const name_expr*>(e)->name);
      return;
    case expr_kind::literal:
      return;
    case expr_kind::dict:
      for (const auto& [k, v] : static_cast<const dict_expr*>(e)->items) {
        scan_expr(k.get(), names);
        scan_expr(v.get(), names);
      }
      return;
    case expr_kind::getattr:
      scan_expr(static_cast<const getattr_expr*>(e)->object.get(), names);
      return;
    case expr_kind::getitem:
      scan_expr(static_cast<const getitem_expr*>(e)->object.get(), names);
      scan_expr(static_cast<const getitem_expr*>(e)->key.get(), names);
      return;
    case expr_kind::slice: {
      const auto* s = static_cast<const slice_expr*>(e);
      for (const expr* part : {s->start.get(), s->stop.get(), s->step.get()}) scan_expr(part, names);
      return;
    }
    case expr_kind::call: {
      const auto* c = static_cast<const call_expr*>(e);
      scan_expr(c->callee.get(), names);
      scan_args(c->args, names);
      return;
    }
    case expr_kind::filter:
    case expr_kind::test: {
      const auto* f = static_cast<const filter_expr*>(e);
      scan_expr(f->operand.get(), names);
      scan_args(f->args, names);
      return;
    }
    case expr_kind::compare: {
      const auto* c = static_cast<const compare_expr*>(e);
      scan_expr(c->first.get(), names);
      for (const auto& [op, operand] : c->rest) scan_expr(operand.get(), names);
      return;
    }
    case expr_kind::condition: {
      const auto* c = static_cast<const condition_expr*>(e);
      for (const expr* part : {c->test.get(), c->then.get(), c->otherwise.get()}) scan_expr(part, names);
      return;
    }
    case expr_kind::binary:
    case expr_kind::logical_and:
    case expr_kind::logical_or: {
      const auto* b = static_cast<const binary_expr*>(e);
      scan_expr(b->left.get(), names);
      scan_expr(b->right.get(), names);
      return;
    }
    default:
      for (const expr_ptr& item : static_cast<const items_expr*>(e)->items) scan_expr(item.get(), names);
  }
}

void scan_args(const call_arguments& args, std::vector<std::string>& names) {
  for (const expr_ptr& a : args.positional) scan_expr(a.get(), names);
  for (const keyword_arg& k : args.keywords) scan_expr(k.value.get(), names);
  scan_expr(args.star_args.get(), names);
  scan_expr(args.star_kwargs.get(), names);
}

void scan_macro(const macro_def& def, std::vector<std::string>& names) {
  for (const expr_ptr& d : def.defaults) scan_expr(d.get(), names);
  collect_loaded_names(def.body, names);
}

void scan_stmt(const stmt& s, std::vector<std::string>& names) {
  switch (s.kind) {
    case stmt_kind::output:
      for (const output_part& part : static_cast<const output_stmt&>(s).parts) scan_expr(part.expression.get(), names);
      return;
    case stmt_kind::for_loop: {
      const auto& f = static_cast<const for_stmt&>(s);
      scan_expr(f.iterable.get(), names);
      scan_expr(f.filter.get(), names);
      collect_loaded_names(f.body, names);
      collect_loaded_names(f.else_body, names);
      return;
    }
    case stmt_kind::if_chain: {
      const auto& i = static_cast<const if_stmt&>(s);
      for (const auto& [test, body] : i.branches) {
        scan_expr(test.get(), names);
        collect_loaded_names(body, names);
      }
      collect_loaded_names(i.else_body, names);
      return;
    }
    case stmt_kind::set:
      scan_expr(static_cast<const set_stmt&>(s).value_expr.get(), names);
      return;
    case stmt_kind::set_block:
    case stmt_kind::filter_block: {
      const auto& b = static_cast<const block_stmt&>(s);
      scan_expr(b.filter.get(), names);
      collect_loaded_names(b.body, names);
      return;
    }
    case stmt_kind::macro:
      scan_macro(*static_cast<const macro_stmt&>(s).def, names);
      return;
    case stmt_kind::call_block: {
      const auto& c = static_cast<const call_block_stmt&>(s);
      scan_expr(c.call.get(), names);
      scan_macro(*c.caller, names);
      return;
    }
    case stmt_kind::with: {
      const auto& w = static_cast<const with_stmt&>(s);
      for (const auto& [target, value_expr] : w.assignments) scan_expr(value_expr.get(), names);
      collect_loaded_names(w.body, names);
      return;
    }
    default:
      return;
  }
}

}  // namespace

assign_target parser::parse_assign_target(bool with_tuple, bool name_only,
                                          const std::vector<std::string>& extra_end_rules, bool with_namespace) {
  if (name_only) {
    const token& t = expect("name");
    assign_target target;
    target.name = t.text;
    target.offset = t.offset;
    return target;
  }
  expr_ptr e =
      with_tuple ? parse_tuple(true, true, extra_end_rules, false, with_namespace) : parse_primary(with_namespace);
  return to_target(*this, *e);
}

void collect_loaded_names(const stmt_list& body, std::vector<std::string>& names) {
  for (const stmt_ptr& s : body) scan_stmt(*s, names);
}

}  // namespace troupe::jinja

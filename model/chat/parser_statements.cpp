// Statements: jinja2's Parser.subparse, parse_statement and the tag parsers
// (plus the loopcontrols extension and transformers' {% generation %}).

#include <algorithm>

#include "model/chat/errors.hpp"
#include "model/chat/parser.hpp"
#include "model/chat/py_format.hpp"

namespace troupe::jinja {

namespace {

const std::vector<std::string> unsupported_tags = {"block", "extends", "include", "import", "from", "autoescape"};

std::string join_rules(const std::vector<std::string>& rules) {
  std::string out;
  for (std::size_t i = 0; i < rules.size(); ++i) {
    if (i > 0) out += " or ";
    out += py_string_repr(rules[i].rfind("name:", 0) == 0 ? rules[i].substr(5) : rules[i]);
  }
  return out;
}

void add_text(output_stmt*& buffer, stmt_list& body, std::size_t offset, std::string text) {
  if (buffer == nullptr) {
    auto out = std::make_unique<output_stmt>(offset);
    buffer = out.get();
    body.push_back(std::move(out));
  }
  buffer->parts.push_back({std::move(text), nullptr});
}

}  // namespace

template_ast parse_template(std::string source) {
  std::vector<token> tokens = tokenize(source);
  parser p(std::move(tokens));
  template_ast ast;
  ast.body = p.parse_all();
  ast.source = std::move(source);
  return ast;
}

stmt_list parser::parse_all() { return subparse({}); }

stmt_list parser::subparse(const std::vector<std::string>& end_tokens) {
  stmt_list body;
  output_stmt* buffer = nullptr;
  if (!end_tokens.empty()) end_token_stack_.push_back(end_tokens);
  while (current().type != token_type::eof) {
    const token& t = current();
    if (t.type == token_type::data) {
      add_text(buffer, body, t.offset, t.text);
      next();
    } else if (t.type == token_type::variable_begin) {
      std::size_t offset = next().offset;
      add_text(buffer, body, offset, "");
      buffer->parts.back().expression = parse_tuple();
      expect("variable_end");
    } else if (t.type == token_type::block_begin) {
      buffer = nullptr;
      next();
      bool at_end = std::any_of(end_tokens.begin(), end_tokens.end(), [&](const std::string& r) { return test(r); });
      if (at_end) {
        end_token_stack_.pop_back();
        return body;
      }
      body.push_back(parse_statement());
      expect("block_end");
    } else {
      fail("internal parsing error", t.offset);
    }
  }
  if (!end_tokens.empty()) end_token_stack_.pop_back();
  return body;
}

stmt_list parser::parse_statements(const std::vector<std::string>& end_tokens, bool drop_needle) {
  skip_if(":");
  expect("block_end");
  stmt_list result = subparse(end_tokens);
  if (current().type == token_type::eof) fail_eof(end_tokens, current().offset);
  if (drop_needle) next();
  return result;
}

stmt_ptr parser::parse_statement() {
  const token& t = current();
  if (t.type != token_type::name) fail("tag name expected", t.offset);
  depth_guard guard(*this, t.offset);
  std::string name = t.text;
  std::size_t offset = t.offset;
  tag_stack_.push_back(name);
  stmt_ptr result;
  if (name == "for")
    result = parse_for();
  else if (name == "if")
    result = parse_if();
  else if (name == "set")
    result = parse_set();
  else if (name == "macro")
    result = parse_macro();
  else if (name == "call")
    result = parse_call_block();
  else if (name == "filter")
    result = parse_filter_block();
  else if (name == "with")
    result = parse_with();
  else if (name == "print")
    result = parse_print();
  else if (name == "generation")
    result = parse_generation();
  else if (name == "break" || name == "continue") {
    if (loop_depth_ == 0) fail("'" + name + "' outside loop", offset);
    next();
    result = std::make_unique<stmt>(name == "break" ? stmt_kind::loop_break : stmt_kind::loop_continue, offset);
  } else if (std::find(unsupported_tags.begin(), unsupported_tags.end(), name) != unsupported_tags.end()) {
    fail("the '" + name + "' tag is not supported in chat templates (no template loading or inheritance)", offset);
  } else {
    tag_stack_.pop_back();
    fail_unknown_tag(name, offset);
  }
  tag_stack_.pop_back();
  return result;
}

stmt_ptr parser::parse_for() {
  auto node = std::make_unique<for_stmt>(expect("name:for").offset);
  node->target = parse_assign_target(true, false, {"name:in"});
  if (node->target.type == assign_target::kind::name && node->target.name == "loop")
    fail("Can't assign to special loop variable in for-loop target", node->target.offset);
  expect("name:in");
  node->iterable = parse_tuple(false, false, {"name:recursive"});
  bool saved_soft = soft_frame_;
  soft_frame_ = false;
  if (skip_if("name:if")) node->filter = parse_expression();
  node->recursive = skip_if("name:recursive");
  ++loop_depth_;
  node->body = parse_statements({"name:endfor", "name:else"}, false);
  --loop_depth_;
  if (next().text != "endfor") node->else_body = parse_statements({"name:endfor"}, true);
  soft_frame_ = saved_soft;
  return node;
}

stmt_ptr parser::parse_if() {
  auto node = std::make_unique<if_stmt>(expect("name:if").offset);
  bool saved_soft = soft_frame_;
  soft_frame_ = true;
  while (true) {
    expr_ptr condition = parse_tuple(false, false);
    stmt_list body = parse_statements({"name:elif", "name:else", "name:endif"}, false);
    node->branches.emplace_back(std::move(condition), std::move(body));
    const token& t = next();
    if (t.text == "elif") continue;
    if (t.text == "else") node->else_body = parse_statements({"name:endif"}, true);
    break;
  }
  soft_frame_ = saved_soft;
  return node;
}

stmt_ptr parser::parse_set() {
  std::size_t offset = next().offset;
  assign_target target = parse_assign_target(true, false, {}, true);
  if (skip_if("=")) {
    auto node = std::make_unique<set_stmt>(offset);
    node->target = std::move(target);
    node->value_expr = parse_tuple();
    return node;
  }
  auto node = std::make_unique<block_stmt>(stmt_kind::set_block, offset);
  node->target = std::move(target);
  if (test("|")) node->filter = parse_filter_chain(nullptr, false);
  bool saved_soft = soft_frame_;
  soft_frame_ = false;
  node->body = parse_statements({"name:endset"}, true);
  soft_frame_ = saved_soft;
  return node;
}

void parser::parse_signature(macro_def& def) {
  expect("(");
  while (!test(")")) {
    if (!def.params.empty()) expect(",");
    std::string name = expect("name").text;
    if (skip_if("=")) {
      def.defaults.push_back(parse_expression());
    } else if (!def.defaults.empty()) {
      fail("non-default argument follows default argument", current().offset);
    }
    def.params.push_back(std::move(name));
  }
  expect(")");
}

/// Parses a macro or caller body (its own frame: no loop, not soft) and
/// records which of caller/varargs/kwargs it reads.
static void finish_macro_body(macro_def& def) {
  std::vector<std::string> names;
  collect_loaded_names(def.body, names);
  auto uses = [&](const char* n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  def.uses_caller = uses("caller");
  def.uses_varargs = uses("varargs");
  def.uses_kwargs = uses("kwargs");
}

stmt_ptr parser::parse_macro() {
  auto node = std::make_unique<macro_stmt>(next().offset);
  auto def = std::make_shared<macro_def>();
  def->name = expect("name").text;
  parse_signature(*def);
  bool saved_soft = soft_frame_;
  std::size_t saved_loops = loop_depth_;
  soft_frame_ = false;
  loop_depth_ = 0;
  def->body = parse_statements({"name:endmacro"}, true);
  soft_frame_ = saved_soft;
  loop_depth_ = saved_loops;
  finish_macro_body(*def);
  node->def = std::move(def);
  return node;
}

stmt_ptr parser::parse_call_block() {
  auto node = std::make_unique<call_block_stmt>(next().offset);
  auto def = std::make_shared<macro_def>();
  def->name = "caller";
  if (test("(")) parse_signature(*def);
  node->call = parse_expression();
  if (node->call->kind != expr_kind::call) fail("expected call", node->offset);
  bool saved_soft = soft_frame_;
  std::size_t saved_loops = loop_depth_;
  soft_frame_ = false;
  loop_depth_ = 0;
  def->body = parse_statements({"name:endcall"}, true);
  soft_frame_ = saved_soft;
  loop_depth_ = saved_loops;
  finish_macro_body(*def);
  node->caller = std::move(def);
  return node;
}

stmt_ptr parser::parse_filter_block() {
  auto node = std::make_unique<block_stmt>(stmt_kind::filter_block, next().offset);
  node->filter = parse_filter_chain(nullptr, true);
  bool saved_soft = soft_frame_;
  soft_frame_ = false;
  node->body = parse_statements({"name:endfilter"}, true);
  soft_frame_ = saved_soft;
  return node;
}

stmt_ptr parser::parse_generation() {
  auto node = std::make_unique<block_stmt>(stmt_kind::filter_block, next().offset);
  bool saved_soft = soft_frame_;
  soft_frame_ = false;
  node->body = parse_statements({"name:endgeneration"}, true);
  soft_frame_ = saved_soft;
  return node;
}

stmt_ptr parser::parse_with() {
  auto node = std::make_unique<with_stmt>(next().offset);
  while (current().type != token_type::block_end) {
    if (!node->assignments.empty()) expect(",");
    assign_target target = parse_assign_target(true, false);
    expect("=");
    node->assignments.emplace_back(std::move(target), parse_expression());
  }
  bool saved_soft = soft_frame_;
  soft_frame_ = false;
  node->body = parse_statements({"name:endwith"}, true);
  soft_frame_ = saved_soft;
  return node;
}

stmt_ptr parser::parse_print() {
  auto node = std::make_unique<output_stmt>(next().offset);
  while (current().type != token_type::block_end) {
    if (!node->parts.empty()) expect(",");
    node->parts.push_back({"", parse_expression()});
  }
  return node;
}

void parser::fail_unknown_tag(const std::string& name, std::size_t offset) const {
  fail_ut_eof(&name, end_token_stack_, offset);
}

void parser::fail_eof(const std::vector<std::string>& end_tokens, std::size_t offset) const {
  std::vector<std::vector<std::string>> stack = end_token_stack_;
  stack.push_back(end_tokens);
  fail_ut_eof(nullptr, stack, offset);
}

void parser::fail_ut_eof(const std::string* name, const std::vector<std::vector<std::string>>& stack,
                         std::size_t offset) const {
  std::string message =
      name == nullptr ? "Unexpected end of template." : "Encountered unknown tag " + py_string_repr(*name) + ".";
  if (!stack.empty()) {
    std::string looking = join_rules(stack.back());
    bool expected = false;
    for (const auto& rules : stack)
      for (const std::string& r : rules)
        if (name != nullptr && r == "name:" + *name) expected = true;
    if (expected)
      message += " You probably made a nesting mistake. Jinja is expecting this tag, but currently looking for " +
                 looking + ".";
    else
      message += " Jinja was looking for the following tags: " + looking + ".";
  }
  if (!tag_stack_.empty())
    message += " The innermost block that needs to be closed is " + py_string_repr(tag_stack_.back()) + ".";
  fail(message, offset);
}

}  // namespace troupe::jinja

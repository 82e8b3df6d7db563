#include "model/chat/chat_template.hpp"

#include "model/chat/ast.hpp"
#include "model/chat/errors.hpp"
#include "model/chat/interpreter.hpp"
#include "model/chat/lexer.hpp"
#include "model/chat/parser.hpp"
#include "model/chat/unicode.hpp"

namespace troupe {

namespace {

std::string describe_position(std::size_t line, std::size_t column) {
  if (line == 0) return "chat template error: ";
  return "chat template error at line " + std::to_string(line) + ", column " + std::to_string(column) + ": ";
}

/// 1-based line and code-point column of byte `offset` in `source`.
std::pair<std::size_t, std::size_t> position_of(const std::string& source, std::size_t offset) {
  offset = std::min(offset, source.size());
  std::size_t line = 1, line_start = 0;
  for (std::size_t i = 0; i < offset; ++i) {
    if (source[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return {line, code_point_count(std::string_view(source).substr(line_start, offset - line_start)) + 1};
}

chat_template_error error_at(chat_template_error_kind kind, const jinja::script_error& e, const std::string& source,
                             std::size_t offset) {
  auto [line, column] = position_of(source, offset);
  return chat_template_error(kind, e.python_type(), e.what(), line, column);
}

}  // namespace

chat_template_error::chat_template_error(chat_template_error_kind kind, std::string python_type,
                                         const std::string& message, std::size_t line, std::size_t column)
    : std::runtime_error(describe_position(line, column) + message),
      kind_(kind),
      python_type_(std::move(python_type)),
      message_(message),
      line_(line),
      column_(column) {}

chat_template chat_template::compile(std::string source) {
  if (const std::optional<std::size_t> bad = find_invalid_utf8(source)) {
    auto [line, column] = position_of(source, *bad);
    throw chat_template_error(chat_template_error_kind::syntax, "UnicodeDecodeError",
                              "template is not valid UTF-8 (byte " + std::to_string(*bad) + ")", line, column);
  }
  std::string normalized = jinja::normalize_template_source(source);
  try {
    auto ast = std::make_shared<jinja::template_ast>(jinja::parse_template(normalized));
    return chat_template(std::move(ast));
  } catch (const jinja::syntax_error& e) {
    throw error_at(chat_template_error_kind::syntax, e, normalized, e.offset());
  } catch (const jinja::script_error& e) {
    throw chat_template_error(chat_template_error_kind::syntax, e.python_type(), e.what(), 0, 0);
  }
}

std::string chat_template::render(const boost::json::object& context, const chat_render_options& options) const {
  std::unique_ptr<jinja::render_state> state;
  try {
    state = std::make_unique<jinja::render_state>(*ast_, options, context);
  } catch (const jinja::script_error& e) {
    throw chat_template_error(chat_template_error_kind::input, e.python_type(), e.what(), 0, 0);
  }
  try {
    return state->run();
  } catch (const jinja::limit_error& e) {
    throw error_at(chat_template_error_kind::limit, e, ast_->source, state->offset);
  } catch (const jinja::script_error& e) {
    throw error_at(chat_template_error_kind::render, e, ast_->source, state->offset);
  }
}

const std::string& chat_template::source() const { return ast_->source; }

}  // namespace troupe

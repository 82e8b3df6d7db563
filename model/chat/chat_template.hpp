#pragma once
// Chat templates: a sandboxed Jinja2 interpreter that renders a model's
// chat template byte-for-byte like Hugging Face transformers does
// (jinja2's ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks
// and loop controls, transformers' tojson / raise_exception /
// strftime_now), plus the helpers that find a model's template and build the
// variables transformers passes to it.
//
// Templates are untrusted input: a render does no I/O, and its steps, loop
// iterations, macro recursion and output size are bounded (chat_render_limits).
// A compiled template is immutable and may be rendered from many threads at once.

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

namespace troupe {

namespace jinja {
struct template_ast;
}

/// Bounds on one render. Exceeding one fails the render quickly with a
/// chat_template_error of kind `limit`; the defaults leave real templates
/// (tens of thousands of steps for long conversations) far below them.
struct chat_render_limits {
  /// Evaluation steps: one per expression and statement, plus one per 16
  /// bytes (or items) of each string or list built, so copying huge values costs.
  std::uint64_t max_steps = 20'000'000;
  std::uint64_t max_loop_iterations = 1'000'000;  ///< iterations summed over every for loop
  std::uint32_t max_call_depth = 100;             ///< nested macro calls and recursive loop levels
  std::size_t max_output_bytes = 32u << 20;       ///< the rendered text, and any single string built
  std::size_t max_collection_items = 1u << 20;    ///< items in any list a template builds
};

/// How to render.
struct chat_render_options {
  chat_render_limits limits;
  /// The clock behind strftime_now(); the local time at render when unset.
  std::optional<std::tm> now;
};

/// What went wrong in a template.
enum class chat_template_error_kind {
  syntax,  ///< the template does not parse (or names an unknown filter/test)
  render,  ///< an exception during rendering, including raise_exception()
  limit,   ///< a chat_render_limits bound was exceeded
  input,   ///< the variables or files given to the template were unusable
};

/// A template failure. what() reads
/// "chat template error at line 3, column 15: unexpected 'endfor'";
/// message() is the text the Python reference would carry (for
/// raise_exception('msg'), exactly "msg").
class chat_template_error : public std::runtime_error {
 public:
  chat_template_error(chat_template_error_kind kind, std::string python_type, const std::string& message,
                      std::size_t line, std::size_t column);
  chat_template_error_kind kind() const { return kind_; }
  /// The exception class Python raises for the same failure ("TypeError", "TemplateError", ...).
  const std::string& python_type() const { return python_type_; }
  const std::string& message() const { return message_; }
  /// 1-based template line and column (in code points); 0 when not tied to a position.
  std::size_t line() const { return line_; }
  std::size_t column() const { return column_; }

 private:
  chat_template_error_kind kind_;
  std::string python_type_;
  std::string message_;
  std::size_t line_;
  std::size_t column_;
};

/// A parsed chat template. Cheap to copy; immutable; thread-safe to render.
class chat_template {
 public:
  /// Parses `source` (UTF-8). Throws chat_template_error of kind syntax.
  static chat_template compile(std::string source);

  /// Renders with `context` as the template's variables (JSON values become
  /// Python-like values: objects are dicts in key order, numbers with a
  /// fraction or exponent are floats). Throws chat_template_error.
  std::string render(const boost::json::object& context, const chat_render_options& options = {}) const;

  /// The template text as compiled (newlines normalised, one trailing newline dropped).
  const std::string& source() const;

 private:
  explicit chat_template(std::shared_ptr<const jinja::template_ast> ast) : ast_(std::move(ast)) {}
  std::shared_ptr<const jinja::template_ast> ast_;
};

/// The inputs of transformers' apply_chat_template.
struct chat_template_inputs {
  boost::json::array messages;                  ///< [{"role": ..., "content": ...}, ...]
  std::optional<boost::json::array> tools;      ///< JSON schemas; absent renders as None
  std::optional<boost::json::array> documents;  ///< RAG documents; absent renders as None
  bool add_generation_prompt = false;
  /// bos_token, eos_token, ... (strings); see chat_template_source::special_tokens.
  boost::json::object special_tokens;
  /// Further variables (enable_thinking, date_string...); they override special tokens.
  boost::json::object extra;
};

/// The variables transformers passes to a template: messages with null-valued
/// keys dropped and reasoning fields aliased as transformers does, tools,
/// documents, add_generation_prompt, the special tokens and the extra
/// variables. Throws chat_template_error of kind input for a message that is
/// not an object, or an empty conversation.
boost::json::object make_chat_context(const chat_template_inputs& inputs);

/// A model directory's chat templates and special tokens.
struct chat_template_source {
  /// Template name -> source; a single template is named "default".
  std::map<std::string, std::string> templates;
  /// bos_token, eos_token, unk_token, sep_token, pad_token, cls_token,
  /// mask_token as strings, for those tokenizer_config.json sets.
  boost::json::object special_tokens;
  /// The template transformers picks: "tool_use" when tools are given and it
  /// exists, else "default". Throws chat_template_error of kind input when none fits.
  const std::string& select(bool with_tools) const;
};

/// Reads `model_dir`'s chat template(s) as transformers 5 does:
/// chat_template.jinja (and additional_chat_templates/*.jinja) take
/// precedence over the "chat_template" field of tokenizer_config.json, which
/// may be a string or a list of {"name", "template"}. Throws
/// chat_template_error of kind input naming the file and field on bad input.
chat_template_source load_chat_template(const std::filesystem::path& model_dir);

}  // namespace troupe

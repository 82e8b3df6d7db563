#pragma once
// Tool calls in model output: each model family writes its calls in its own
// text format (the one its chat template teaches); a tool_call_parser turns
// that text, fed in arbitrary pieces, into plain content and complete calls.
// Pure: no I/O.

#include <boost/json/object.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

/// A text format for tool calls, named as vLLM's --tool-call-parser names it.
enum class tool_call_family : std::uint8_t {
  none,         ///< no parsing: calls stay in the content
  llama3_json,  ///< Llama 3.1-3.3: `{"name": …, "parameters": {…}}`, optionally after <|python_tag|>, `;`-separated
  hermes,       ///< Hermes 2/3, Qwen 2.5/3: `<tool_call>{"name": …, "arguments": {…}}</tool_call>` per call
  mistral,      ///< Mistral: `[TOOL_CALLS][{"name": …, "arguments": {…}}, …]` (the array alone at the start)
  deepseek_v3,  ///< DeepSeek V3/R1: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>name …`
};

/// "none", "llama3_json", "hermes", "mistral", "deepseek_v3".
std::string_view tool_call_family_name(tool_call_family family);

/// The family named `name` (the names above), or nullopt.
std::optional<tool_call_family> parse_tool_call_family(std::string_view name);

/// The family whose call markers a chat template's source text writes or
/// teaches (none when it shows no known format).
tool_call_family detect_tool_call_family(std::string_view template_text);

/// The family for a `--tool-call-parser` value: "auto" detects it from
/// `template_text`, any other value is a family name. Nullopt for an
/// unknown name.
std::optional<tool_call_family> resolve_tool_call_family(std::string_view knob, std::string_view template_text);

/// True when the family's templates render `arguments` through `tojson`
/// (they expect an object, not OpenAI's JSON string).
bool tool_call_arguments_as_object(tool_call_family family);

/// Rewrites an assistant message's `tool_calls[i].function.arguments` to the
/// form the family's template renders correctly: the object a JSON string
/// holds, or (DeepSeek, which concatenates text) the JSON text of an object.
/// Leaves arguments that are neither (or invalid JSON) untouched.
void adapt_tool_call_arguments(boost::json::object& message, tool_call_family family);

/// One piece of parsed output, in output order.
struct tool_call_event {
  int index = -1;         ///< the call's index in the choice (0, 1, …); -1: plain content
  std::string text;       ///< content (index < 0)
  std::string name;       ///< the function's name (index >= 0)
  std::string arguments;  ///< the call's arguments as JSON object text, as json.dumps writes it
};

/// Streaming parser for one choice. Text is held back only while it may be
/// the start of a call marker (or, for Llama, while the output may still be a
/// call); a call is reported once its text is complete and valid, so a
/// malformed call comes out as plain content and nothing is ever retracted.
/// Feeding the same text in any split gives the same events (content may be
/// split differently).
class tool_call_parser {
 public:
  explicit tool_call_parser(tool_call_family family);

  /// Adds generated text; returns what became final.
  std::vector<tool_call_event> feed(std::string_view text);
  /// The output ended: returns everything still held back.
  std::vector<tool_call_event> finish();
  /// Calls reported so far.
  int call_count() const { return calls_; }

 private:
  enum class state : std::uint8_t { start, content, region, between };
  void run(bool at_end, std::vector<tool_call_event>& out);
  bool step_start(bool at_end, std::vector<tool_call_event>& out);
  bool step_content(bool at_end, std::vector<tool_call_event>& out);
  bool step_region(bool at_end, std::vector<tool_call_event>& out);
  bool step_between(bool at_end, std::vector<tool_call_event>& out);

  tool_call_family family_;
  std::string buffer_;   ///< text not yet reported
  std::string leading_;  ///< whitespace (and separator) before the region being read: content unless it holds calls
  state state_;
  int calls_ = 0;
};

/// A complete output split into content and calls.
struct parsed_tool_calls {
  std::string content;
  std::vector<tool_call_event> calls;  ///< index >= 0, in order
};

/// Parses a complete output (the same as feeding it whole, then finish()).
parsed_tool_calls parse_tool_calls(tool_call_family family, std::string_view text);

}  // namespace troupe

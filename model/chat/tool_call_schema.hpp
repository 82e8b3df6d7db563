#pragma once
// The seam between tool calling and the constraint engine: what text a
// request with tool_choice "required" or a named function must produce, as
// literal markers around JSON documents with a schema (vLLM's and
// xgrammar's "structural tag"). The engine compiles it into a token mask;
// the family's tool_call_parser then reads the output as usual.

#include <boost/json/array.hpp>
#include <string>
#include <vector>

#include "model/chat/tool_calls.hpp"

namespace troupe {

/// What a request's tool_choice asks for.
struct tool_choice {
  enum class mode : std::uint8_t { automatic, none, required, named };
  mode kind = mode::automatic;
  std::string function;  ///< the function's name (named)
};

/// One way to write a call: `begin`, a JSON document matching `schema`, `end`.
struct tool_call_structure {
  std::string begin;
  boost::json::object schema;
  std::string end;
};

/// The output a forced tool choice allows: one of `structures`, then (when
/// `repeatable`) more of them, each after `separator`; nothing before the
/// first call.
struct forced_tool_calls {
  std::vector<tool_call_structure> structures;  ///< alternatives (one per callable function, or one for all)
  bool repeatable = false;
  std::string separator;
};

/// The forced output for `choice` (required or named) over `tools` (OpenAI
/// tool objects, already validated) in `family`'s format. `parallel`: more
/// than one call may be made. Empty structures for auto/none, family none,
/// or a name that no tool has. Control-token markers (Mistral's
/// [TOOL_CALLS]) are left out: a mask never allows special tokens, and the
/// parser reads the bare JSON at the start of the output.
forced_tool_calls forced_tool_call_format(const boost::json::array& tools, const tool_choice& choice,
                                          tool_call_family family, bool parallel);

/// `forced` as vLLM's structural tag response format:
/// `{"type":"structural_tag","structures":[{"begin","schema","end"}],"triggers":[…]}`.
std::string structural_tag_json(const forced_tool_calls& forced);

}  // namespace troupe

#pragma once
// Per-family tool-call text formats for tool_call_parser (internal to
// model/chat): where a call region starts, what may stand between calls,
// and how one region's text becomes calls.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "model/chat/tool_calls.hpp"

namespace troupe::tool_call_detail {

/// A call as the model wrote it, arguments re-serialized as json.dumps does.
struct parsed_call {
  std::string name;
  std::string arguments;
};

/// What scanning a region found.
enum class scan_status : std::uint8_t {
  incomplete,  ///< the region may still become calls: wait for more text
  calls,       ///< `calls` were read from the first `consumed` bytes
  malformed,   ///< the first `consumed` bytes are plain content
};

struct scan_result {
  scan_status status = scan_status::incomplete;
  std::vector<parsed_call> calls;
  std::size_t consumed = 0;
};

/// One family's format.
struct call_format {
  std::vector<std::string_view> markers;        ///< a call region starts with one of these, anywhere
  std::vector<std::string_view> start_markers;  ///< … or with one of these at the start or after a call
  std::vector<std::string_view> closers;        ///< dropped where they follow calls (an outer end tag)
  char separator = 0;                           ///< may stand between calls (0: none)
  /// Reads the region at the start of `region` (which starts with a marker);
  /// `at_end`: no more text will come.
  scan_result (*scan)(std::string_view region, bool at_end) = nullptr;
};

/// The family's format; null for tool_call_family::none.
const call_format* format_of(tool_call_family family);

/// Index one past the JSON object or array starting at `text[start]`
/// (brackets matched outside strings), or npos while it is unclosed.
std::size_t json_container_end(std::string_view text, std::size_t start);

}  // namespace troupe::tool_call_detail

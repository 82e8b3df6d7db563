#pragma once
// JSON parsing whose floating-point numbers are correctly rounded, as
// Python's json.loads makes them. Boost.JSON 1.81's own parser rounds about
// one in eight 17-digit numbers to a neighbouring double, which then prints
// differently through tojson; chat inputs (messages, tools, tool arguments)
// should be parsed with this to render byte-identically to transformers.

#include <boost/json/value.hpp>
#include <boost/system/error_code.hpp>
#include <cstddef>
#include <string_view>

namespace troupe {

/// Parses `text` like boost::json::parse (UTF-8 validated, nesting up to
/// `max_depth` levels), re-reading every non-integer number with
/// std::from_chars. On failure returns null and sets `ec`.
boost::json::value parse_json_exact(std::string_view text, boost::system::error_code& ec, std::size_t max_depth = 512);

}  // namespace troupe

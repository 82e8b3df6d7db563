#pragma once
// Python str algorithms on UTF-8 text, indexed by code point like Python:
// strip, split, replace, find, count, justify, splitlines, expandtabs.
// Internal to model/chat.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::jinja {

/// str.strip/lstrip/rstrip; `chars` nullopt strips whitespace.
std::string py_strip(std::string_view text, const std::optional<std::string>& chars, bool left, bool right);
/// str.split (from the left) or str.rsplit; `sep` nullopt splits on whitespace runs.
std::vector<std::string> py_split(std::string_view text, const std::optional<std::string>& sep, std::int64_t maxsplit,
                                  bool from_right);
/// str.splitlines.
std::vector<std::string> py_splitlines(std::string_view text, bool keepends);
/// str.replace; count < 0 replaces all. Throws limit_error past `max_bytes`.
std::string py_replace(std::string_view text, std::string_view old_text, std::string_view new_text, std::int64_t count,
                       std::size_t max_bytes);
/// str.find / rfind over text[start:end] (slice semantics); -1 when absent.
std::int64_t py_find(std::string_view text, std::string_view sub, std::optional<std::int64_t> start,
                     std::optional<std::int64_t> end, bool from_right);
/// str.count over text[start:end].
std::int64_t py_count(std::string_view text, std::string_view sub, std::optional<std::int64_t> start,
                      std::optional<std::int64_t> end);
/// text[start:end] by code points, with slice clamping.
std::string py_substring(std::string_view text, std::optional<std::int64_t> start, std::optional<std::int64_t> end);
/// str.center / ljust / rjust with one fill code point ('^', '<', '>'); widths
/// count code points. Throws limit_error, before building it, for a result
/// longer than `max_bytes`.
std::string py_justify(std::string_view text, std::int64_t width, char32_t fill, char how, std::size_t max_bytes);
/// str.zfill; limit_error for a result longer than `max_bytes`.
std::string py_zfill(std::string_view text, std::int64_t width, std::size_t max_bytes);
/// str.expandtabs; limit_error, before building it, for a result longer than
/// `max_bytes`; OverflowError for a tabsize outside C int, as CPython.
std::string py_expandtabs(std::string_view text, std::int64_t tabsize, std::size_t max_bytes);

}  // namespace troupe::jinja

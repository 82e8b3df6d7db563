#pragma once
// Python's operators on template values, with CPython's results and error
// messages: arithmetic (ints are 64-bit and overflow is an error instead of
// a big int), comparisons, `in`, len(), iteration and hashing. Undefined
// operands raise the Undefined's own error, as jinja2's Undefined does.
// Internal to model/chat.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "model/chat/value.hpp"

namespace troupe::jinja {

enum class binary_op { add, sub, mul, div, floordiv, mod, pow };
enum class compare_op { eq, ne, lt, le, gt, ge };

/// Raises the error an Undefined carries (UndefinedError or SecurityError).
[[noreturn]] void raise_undefined(const value& undefined);

/// Largest string (bytes) and list (items) an operation may build.
struct size_limits {
  std::size_t string_bytes;
  std::size_t items;
};

/// `a op b`. Results beyond `limits` raise a limit error before they are built.
value apply_binary(binary_op op, const value& a, const value& b, const size_limits& limits);
/// Unary minus and plus.
value negate(const value& v);
value unary_plus(const value& v);

/// Python ==.
bool py_equal(const value& a, const value& b);
/// `a op b` for ordering and equality; TypeError for unorderable types.
bool py_compare(compare_op op, const value& a, const value& b);
/// Python's a < b (the ordering sorted(), min() and max() use).
bool py_less(const value& a, const value& b);
/// `item in container`.
bool py_contains(const value& container, const value& item);
/// len(v); TypeError for values without a length.
std::int64_t py_len(const value& v);
/// iter(v) materialised: characters of a string, keys of a dict, nothing for
/// Undefined; generators are single-pass. TypeError when not iterable.
std::vector<value> py_iterate(const value& v);
/// While alive, py_iterate refuses (limit error) to split a string into more
/// than `max_items` characters: the render's collection limit, applied before
/// the per-character values are built. One per render, on the render's thread.
class iteration_limit_scope {
 public:
  explicit iteration_limit_scope(std::size_t max_items);
  ~iteration_limit_scope();
  iteration_limit_scope(const iteration_limit_scope&) = delete;
  iteration_limit_scope& operator=(const iteration_limit_scope&) = delete;

 private:
  std::size_t saved_;
};

/// Raises TypeError "unhashable type: 'list'" unless `v` can be a dict key or set member.
void require_hashable(const value& v);
/// Python's sentinel-free integer conversion used by indexes: int or bool, else TypeError naming `what`.
std::int64_t require_index(const value& v, std::string_view what);

}  // namespace troupe::jinja

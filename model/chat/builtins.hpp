#pragma once
// The names a template can use without defining them: jinja2's filters and
// tests, the globals of transformers' environment, and the methods of
// Python's str, list and dict that the sandbox allows. Internal to model/chat.

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/chat/value.hpp"

namespace troupe::jinja {

class render_state;

using filter_function = value (*)(render_state& state, const value& operand, call_args& args);
using test_function = bool (*)(render_state& state, const value& operand, call_args& args);

/// A filter by name (jinja2's builtins with transformers' tojson), or nullptr.
filter_function find_filter(std::string_view name);
/// A test by name (jinja2's builtins), or nullptr.
test_function find_test(std::string_view name);
/// range, dict, namespace, cycler, joiner, lipsum, raise_exception, strftime_now.
std::optional<value> find_global(std::string_view name);

/// What getattr finds on a builtin value (str, list, dict, int, float).
enum class method_lookup { missing, found, unsafe };
/// A bound method of `receiver` called `name`; `unsafe` for methods the
/// ImmutableSandboxedEnvironment forbids (list.append, dict.update, dunders).
method_lookup find_method(const value& receiver, std::string_view name, value& method);

/// Binds call arguments to a Python-style parameter list (positional or by
/// name), raising TypeError like Python for extra or unknown arguments.
class bound_args {
 public:
  bound_args(call_args& args, std::string_view function, std::initializer_list<std::string_view> names);
  /// The argument for parameter `index`, or nullptr when not passed.
  const value* get(std::size_t index) const;
  /// The argument for parameter `index`, or `fallback`.
  value get_or(std::size_t index, value fallback) const;
  bool has(std::size_t index) const { return get(index) != nullptr; }

 private:
  std::vector<std::optional<value>> values_;
};

/// Python truthiness of an optional boolean-ish argument.
bool flag(const bound_args& args, std::size_t index, bool fallback);

}  // namespace troupe::jinja

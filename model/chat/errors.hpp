#pragma once
// Exceptions inside the template engine. A Python-level failure carries the
// exception type Python would raise ("TypeError", "UndefinedError",
// "TemplateSyntaxError") and its message; the interpreter adds the template
// position and turns it into troupe::chat_template_error at the API.
// Internal to model/chat.

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace troupe::jinja {

/// Deepest nesting of lists/dicts a render may build (teardown and repr recurse).
inline constexpr std::size_t max_value_depth = 512;

/// An exception as the Python reference would raise it.
class script_error : public std::runtime_error {
 public:
  script_error(std::string python_type, const std::string& message)
      : std::runtime_error(message), python_type_(std::move(python_type)) {}
  /// Python exception class name, e.g. "TypeError".
  const std::string& python_type() const { return python_type_; }

 private:
  std::string python_type_;
};

/// A render limit (steps, loop iterations, recursion, output size) was exceeded.
class limit_error : public script_error {
 public:
  explicit limit_error(const std::string& message) : script_error("LimitExceeded", message) {}
};

/// Whether a string of `fixed_bytes` plus `count` repetitions of `unit_bytes`
/// (padding, indentation, repeated text) fits in `max_bytes`; computed without
/// overflow, so callers check before they allocate.
constexpr bool fits_in(std::size_t fixed_bytes, std::uint64_t count, std::size_t unit_bytes, std::size_t max_bytes) {
  return fixed_bytes <= max_bytes && (unit_bytes == 0 || count <= (max_bytes - fixed_bytes) / unit_bytes);
}

/// The limit error for a string that would not fit: "<what> exceeds the string
/// limit of N bytes", `what` naming the request ("width 99").
[[noreturn]] inline void raise_string_limit(const std::string& what, std::size_t max_bytes) {
  throw limit_error(what + " exceeds the string limit of " + std::to_string(max_bytes) + " bytes");
}

/// A compile-time error at a byte offset of the (newline-normalised) source:
/// TemplateSyntaxError, or TemplateAssertionError for an unknown filter or test.
class syntax_error : public script_error {
 public:
  syntax_error(const std::string& message, std::size_t offset, std::string python_type = "TemplateSyntaxError")
      : script_error(std::move(python_type), message), offset_(offset) {}
  std::size_t offset() const { return offset_; }

 private:
  std::size_t offset_;
};

}  // namespace troupe::jinja

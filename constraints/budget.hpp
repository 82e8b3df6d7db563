#pragma once
// The time and size budget of one compilation: loops call check() so a
// hostile constraint fails with a constraint_error instead of stalling.

#include <chrono>
#include <cstddef>
#include <string>

#include "constraints/constraint.hpp"

namespace troupe::constraints {

/// Wall-clock deadline and limits for one compile; not thread-safe.
class compile_budget {
 public:
  /// Starts the clock; `field` names the request field in errors.
  compile_budget(const compile_limits& limits, std::string field);

  /// Throws constraint_error once the deadline has passed (checks the clock
  /// every few hundred calls).
  void check();
  /// True once the deadline has passed (for optional work that stops
  /// instead of failing the compile).
  bool expired() const { return std::chrono::steady_clock::now() > deadline_; }
  /// Throws constraint_error when `states` exceeds the state limit; `what`
  /// names the structure ("regex", "schema", ...).
  void check_states(std::size_t states, const char* what) const;
  /// Throws constraint_error with `message` for this field.
  [[noreturn]] void fail(const std::string& message) const;

  /// The limits compiled under.
  const compile_limits& limits() const noexcept { return limits_; }
  /// The request field errors name.
  const std::string& field() const noexcept { return field_; }

 private:
  compile_limits limits_;
  std::string field_;
  std::chrono::steady_clock::time_point deadline_;
  std::size_t calls_ = 0;
};

}  // namespace troupe::constraints

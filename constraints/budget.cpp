#include "constraints/budget.hpp"

namespace troupe::constraints {

compile_budget::compile_budget(const compile_limits& limits, std::string field)
    : limits_(limits),
      field_(std::move(field)),
      deadline_(std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                       std::chrono::duration<double>(limits.max_seconds))) {}

void compile_budget::check() {
  if (++calls_ % 256 != 0) return;
  if (std::chrono::steady_clock::now() > deadline_) {
    fail("the constraint took longer than " + std::to_string(limits_.max_seconds) + " s to compile; simplify it");
  }
}

void compile_budget::check_states(std::size_t states, const char* what) const {
  if (states > limits_.max_states) {
    fail(std::string("the ") + what + " needs more than " + std::to_string(limits_.max_states) +
         " automaton states; simplify it");
  }
}

void compile_budget::fail(const std::string& message) const { throw constraint_error(field_, message); }

}  // namespace troupe::constraints

#pragma once
// A rule set compiled to one deterministic automaton per rule over bytes and
// rule calls (a recursive transition network): the pushdown runtime keeps a
// stack of (rule state) frames.

#include <cstdint>
#include <vector>

#include "constraints/budget.hpp"
#include "constraints/expression.hpp"

namespace troupe::constraints {

/// Deterministic rule automata; immutable after compile_automaton.
struct automaton {
  /// Bytes lo..hi lead to `target`.
  struct transition {
    std::uint8_t lo = 0;      ///< first byte
    std::uint8_t hi = 0;      ///< last byte (inclusive)
    std::int32_t target = 0;  ///< next state in the same rule
  };
  /// Calling `rule` here resumes at `target` once the rule is matched.
  struct call_edge {
    std::int32_t rule = 0;    ///< the rule called
    std::int32_t target = 0;  ///< return state in the caller
  };

  std::vector<std::int32_t> rule_of;            ///< [states] owning rule
  std::vector<std::uint8_t> accepting;          ///< [states] 1 where the rule may end
  std::vector<std::uint32_t> transition_begin;  ///< [states + 1] into `transitions`
  std::vector<transition> transitions;          ///< byte edges, sorted by lo per state
  std::vector<std::uint32_t> call_begin;        ///< [states + 1] into `calls`
  std::vector<call_edge> calls;                 ///< call edges
  std::vector<std::int32_t> rule_start;         ///< [rules] start state of each rule
  std::int32_t start_rule = 0;                  ///< never called: its frame is the stack bottom
  std::vector<std::int32_t> dense_next;         ///< [states * 256] next(), when small enough to tabulate

  /// State after `byte` from `state`, or -1 when the byte is not allowed.
  std::int32_t next(std::int32_t state, std::uint8_t byte) const {
    if (!dense_next.empty()) return dense_next[static_cast<std::size_t>(state) * 256 + byte];
    for (auto i = transition_begin[state]; i < transition_begin[state + 1]; ++i) {
      const auto& t = transitions[i];
      if (byte < t.lo) return -1;
      if (byte <= t.hi) return t.target;
    }
    return -1;
  }
  /// True when some byte leads out of `state`.
  bool has_bytes(std::int32_t state) const { return transition_begin[state] != transition_begin[state + 1]; }
  /// True when `state` calls some rule.
  bool has_calls(std::int32_t state) const { return call_begin[state] != call_begin[state + 1]; }
  /// Number of states.
  std::size_t size() const { return rule_of.size(); }
};

/// Determinizes every rule of `rules`. Throws constraint_error (through
/// `budget`) for undefined rules or when states or time run out.
automaton compile_automaton(const rule_set& rules, compile_budget& budget);

}  // namespace troupe::constraints

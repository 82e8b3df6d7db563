#pragma once
// States that no token can tell apart: two states whose behaviour agrees on
// every byte string up to the longest token's length (same bytes readable,
// same rule ends and calls on the way) have the same token table, so tables
// are keyed by a representative state. A string of `minLength` 4,000 is a
// chain of thousands of states but only as many distinct tables as there
// are positions within one token of its end.

#include <cstdint>
#include <vector>

#include "constraints/automaton.hpp"
#include "constraints/budget.hpp"

namespace troupe::constraints {

/// For every state the smallest state equivalent to it over byte strings of
/// up to `rounds` bytes (Moore's partition refinement, stopped after
/// `rounds` rounds or when stable). Call targets must match exactly, since
/// a callee may return without reading a byte. Stops early (returning each
/// state as its own representative) once `budget` has expired.
std::vector<std::int32_t> bounded_equivalent_states(const automaton& machine, std::size_t rounds,
                                                    const compile_budget& budget);

}  // namespace troupe::constraints

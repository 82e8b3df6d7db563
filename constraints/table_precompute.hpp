#pragma once
// Compile-time token tables: the stack tops a document can reach, found by
// reading the automaton from the start, so that matching a document finds
// its tables built instead of building them on the engine's thread.

#include <cstdint>
#include <vector>

#include "constraints/automaton.hpp"
#include "constraints/budget.hpp"

namespace troupe::constraints {

/// One token table to build: a stack top's key frames (top first, the top
/// state already its class representative) and the depth left below them.
struct table_request {
  std::vector<std::int32_t> frames;  ///< key frames, top first
  std::size_t depth_left = 0;        ///< frames allowed from the bottom of `frames` up
};

/// Frames deeper than the key explored for stack tops: recursion repeats its
/// keys after a few levels, so deeper stacks add none for JSON-like grammars.
inline constexpr std::size_t precompute_stack_frames = 8;

/// Stacks explored per table key wanted and per automaton state:
/// exploration stops there, since deep recursion multiplies stacks long
/// after it stops finding new keys.
inline constexpr std::size_t stacks_per_key = 32;
inline constexpr std::size_t stacks_per_state = 4;  ///< see stacks_per_key

/// The distinct table keys of every stack top reachable from the start by
/// bytes, in breadth-first order (so the positions a document meets first
/// come first), stacks of at most `precompute_stack_frames` frames; at most
/// `max_requests`, fewer when `budget` expires or after exploring
/// `stacks_per_key * max_requests + stacks_per_state * states` stacks.
std::vector<table_request> reachable_table_keys(const automaton& machine, std::size_t max_depth,
                                                const std::vector<std::int32_t>& representative,
                                                std::size_t max_requests, const compile_budget& budget);

}  // namespace troupe::constraints

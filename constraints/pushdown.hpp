#pragma once
// Stacks of rule frames over an automaton: the pushdown recogniser shared
// by the matchers and the token-table precomputation. A stack is its top
// state plus an interned parent node, so pushes allocate and bytes do not.

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "constraints/automaton.hpp"

namespace troupe::constraints {

/// One stack: the top frame's state and the interned frames below it.
struct stack_top {
  std::int32_t state = 0;    ///< automaton state of the top frame
  std::int32_t parent = -1;  ///< node below in the pool; -1 for none
  friend bool operator==(const stack_top&, const stack_top&) = default;
  friend bool operator<(const stack_top& a, const stack_top& b) {
    return a.state != b.state ? a.state < b.state : a.parent < b.parent;
  }
};

/// The live stacks after some bytes (sorted, unique).
using configuration = std::vector<stack_top>;

/// Most stacks a configuration keeps (ambiguous grammars).
inline constexpr std::size_t max_stacks = 1024;

/// Interned frames below the top: (state, parent) pairs with their depth.
class frame_pool {
 public:
  /// A frame node.
  struct node {
    std::int32_t state = 0;    ///< the frame's (return) state
    std::int32_t parent = -1;  ///< node below, or -1
    std::uint32_t depth = 1;   ///< frames from here to the bottom
  };
  /// The id of the node (state, parent), added when new.
  std::int32_t intern(std::int32_t state, std::int32_t parent);
  /// The node with id `id`.
  const node& at(std::int32_t id) const { return nodes_[id]; }
  /// Frames in a stack whose top sits on `parent`.
  std::uint32_t depth_of(std::int32_t parent) const { return parent < 0 ? 1 : nodes_[parent].depth + 1; }

 private:
  std::vector<node> nodes_;
  std::unordered_map<std::uint64_t, std::int32_t> index_;
};

/// The top `count` frames of the stack `top` (top first; fewer when the
/// stack is shallower): the key of its token table.
std::vector<std::int32_t> top_frames(const frame_pool& pool, const stack_top& top, std::size_t count);

/// What a configuration can do next.
struct closed_configuration {
  configuration live;     ///< stacks whose top frame can read a byte
  bool complete = false;  ///< the bottom rule can end here (document complete)
  bool context = false;   ///< some path returned below a partial stack (tables only)
};

/// Pushdown steps over one automaton with one frame pool.
class pushdown {
 public:
  /// Uses `machine` (kept by reference) and caps stacks at `max_depth` frames.
  pushdown(const automaton& machine, std::size_t max_depth) : machine_(machine), max_depth_(max_depth) {}

  /// Follows calls and returns from every stack of `stacks`.
  void close(const configuration& stacks, closed_configuration& out);
  /// The stacks after reading `byte` from the closed stacks `live`.
  void step(const configuration& live, std::uint8_t byte, configuration& out) const;
  /// True when `bytes` can be read from `stacks`; `after` gets the result.
  bool advance(const configuration& stacks, std::string_view bytes, configuration& after);
  /// The frame pool (for building stacks from frames).
  frame_pool& pool() { return pool_; }
  /// The frame pool, read-only.
  const frame_pool& pool() const { return pool_; }
  /// The automaton.
  const automaton& machine() const { return machine_; }
  /// Most frames any closure has reached so far.
  std::size_t deepest() const { return deepest_; }
  /// True when some closure wanted to call beyond the depth cap.
  bool depth_capped() const { return depth_capped_; }

 private:
  const automaton& machine_;
  std::size_t max_depth_;
  std::size_t deepest_ = 0;
  bool depth_capped_ = false;
  frame_pool pool_;
  std::vector<stack_top> work_;
  closed_configuration scratch_;
};

}  // namespace troupe::constraints

#include "constraints/table_precompute.hpp"

#include <algorithm>
#include <set>
#include <unordered_set>

#include "constraints/compiled_grammar.hpp"
#include "constraints/pushdown.hpp"

namespace troupe::constraints {
namespace {

std::uint64_t stack_key(const stack_top& top) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(top.state)) << 32) |
         static_cast<std::uint32_t>(top.parent);
}

}  // namespace

std::vector<table_request> reachable_table_keys(const automaton& machine, std::size_t max_depth,
                                                const std::vector<std::int32_t>& representative,
                                                std::size_t max_requests, const compile_budget& budget) {
  pushdown runner(machine, max_depth);
  std::vector<stack_top> queue{{machine.rule_start[machine.start_rule], -1}};
  std::unordered_set<std::uint64_t> seen{stack_key(queue[0])};
  std::set<std::vector<std::int32_t>> keys;
  std::vector<table_request> requests;
  closed_configuration closed;
  const std::size_t max_stacks_explored = stacks_per_key * max_requests + stacks_per_state * machine.size();
  for (std::size_t next = 0; next < std::min(queue.size(), max_stacks_explored) && requests.size() < max_requests;
       ++next) {
    if (next % 64 == 63 && budget.expired()) break;
    const stack_top top = queue[next];
    auto frames = top_frames(runner.pool(), top, table_key_frames);
    frames[0] = representative[static_cast<std::size_t>(frames[0])];
    const std::size_t below = runner.pool().depth_of(top.parent) - frames.size();
    if (keys.insert(frames).second) requests.push_back({frames, max_depth - std::min(below, max_depth)});
    runner.close({top}, closed);
    for (const auto& live : closed.live) {
      if (runner.pool().depth_of(live.parent) > precompute_stack_frames) continue;
      for (auto i = machine.transition_begin[live.state]; i < machine.transition_begin[live.state + 1]; ++i) {
        const stack_top stepped{machine.transitions[i].target, live.parent};
        if (seen.insert(stack_key(stepped)).second) queue.push_back(stepped);
      }
    }
  }
  return requests;
}

}  // namespace troupe::constraints

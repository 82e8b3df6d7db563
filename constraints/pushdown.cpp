#include "constraints/pushdown.hpp"

#include <algorithm>

namespace troupe::constraints {

std::int32_t frame_pool::intern(std::int32_t state, std::int32_t parent) {
  const std::uint64_t key =
      (static_cast<std::uint64_t>(static_cast<std::uint32_t>(state)) << 32) | static_cast<std::uint32_t>(parent);
  auto [it, inserted] = index_.try_emplace(key, static_cast<std::int32_t>(nodes_.size()));
  if (inserted) nodes_.push_back({state, parent, depth_of(parent)});
  return it->second;
}

std::vector<std::int32_t> top_frames(const frame_pool& pool, const stack_top& top, std::size_t count) {
  std::vector<std::int32_t> frames{top.state};
  for (auto p = top.parent; p >= 0 && frames.size() < count; p = pool.at(p).parent) frames.push_back(pool.at(p).state);
  return frames;
}

void pushdown::close(const configuration& stacks, closed_configuration& out) {
  out.live.clear();
  out.complete = false;
  out.context = false;
  // The common case: one stack whose top only reads bytes.
  if (stacks.size() == 1 && !machine_.has_calls(stacks[0].state) && !machine_.accepting[stacks[0].state]) {
    out.live = stacks;
    return;
  }
  work_.assign(stacks.begin(), stacks.end());
  std::vector<stack_top> seen;
  while (!work_.empty()) {
    const stack_top top = work_.back();
    work_.pop_back();
    if (std::find(seen.begin(), seen.end(), top) != seen.end()) continue;
    seen.push_back(top);
    if (machine_.has_bytes(top.state)) out.live.push_back(top);
    const std::uint32_t depth = pool_.depth_of(top.parent);
    for (auto i = machine_.call_begin[top.state]; i < machine_.call_begin[top.state + 1]; ++i) {
      if (depth >= max_depth_) {
        depth_capped_ = true;
        break;
      }
      deepest_ = std::max<std::size_t>(deepest_, depth + 1);
      const auto& edge = machine_.calls[i];
      work_.push_back({machine_.rule_start[edge.rule], pool_.intern(edge.target, top.parent)});
    }
    if (!machine_.accepting[top.state]) continue;
    if (top.parent >= 0) {
      const auto& below = pool_.at(top.parent);
      work_.push_back({below.state, below.parent});
    } else if (machine_.rule_of[top.state] == machine_.start_rule) {
      out.complete = true;
    } else {
      out.context = true;
    }
  }
  std::sort(out.live.begin(), out.live.end());
}

void pushdown::step(const configuration& live, std::uint8_t byte, configuration& out) const {
  out.clear();
  for (const auto& top : live) {
    const std::int32_t next = machine_.next(top.state, byte);
    if (next >= 0) out.push_back({next, top.parent});
  }
  if (out.size() > 1) {
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    // A wildly ambiguous grammar keeps a bounded subset of its parses: every
    // kept stack is still a real parse, so masks stay sound.
    if (out.size() > max_stacks) out.resize(max_stacks);
  }
}

bool pushdown::advance(const configuration& stacks, std::string_view bytes, configuration& after) {
  after = stacks;
  configuration next;
  for (unsigned char byte : bytes) {
    close(after, scratch_);
    step(scratch_.live, byte, next);
    if (next.empty()) return false;
    after.swap(next);
  }
  return true;
}

}  // namespace troupe::constraints

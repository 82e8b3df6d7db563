#include "model/text/stop_string_matcher.hpp"

#include <algorithm>
#include <deque>
#include <stdexcept>
#include <utility>

namespace troupe::text {

stop_string_matcher::stop_string_matcher(std::vector<std::string> stop_strings)
    : stop_strings_(std::move(stop_strings)) {
  for (std::size_t i = 0; i < stop_strings_.size(); ++i) {
    if (stop_strings_[i].empty()) throw std::invalid_argument("stop string " + std::to_string(i) + " is empty");
  }
  build();
}

std::int32_t stop_string_matcher::child(std::int32_t node, unsigned char byte) const {
  const auto& edges = states_[node].edges;
  const auto found = std::lower_bound(edges.begin(), edges.end(), std::make_pair(byte, std::int32_t{-1}));
  return found != edges.end() && found->first == byte ? found->second : -1;
}

std::int32_t stop_string_matcher::step(std::int32_t node, unsigned char byte) const {
  while (node != 0 && child(node, byte) < 0) node = states_[node].fail;
  const std::int32_t next = child(node, byte);
  return next < 0 ? 0 : next;
}

void stop_string_matcher::build() {
  states_.assign(1, state{});
  for (std::size_t i = 0; i < stop_strings_.size(); ++i) {
    std::int32_t node = 0;
    for (const char c : stop_strings_[i]) {
      const auto byte = static_cast<unsigned char>(c);
      std::int32_t next = child(node, byte);
      if (next < 0) {
        next = static_cast<std::int32_t>(states_.size());
        auto& edges = states_[node].edges;
        edges.insert(std::lower_bound(edges.begin(), edges.end(), std::make_pair(byte, std::int32_t{-1})),
                     {byte, next});
        const std::int32_t depth = states_[node].depth + 1;
        states_.push_back(state{});
        states_.back().depth = depth;
      }
      node = next;
    }
    if (states_[node].output < 0) states_[node].output = static_cast<std::int32_t>(i);
  }
  // Breadth-first: suffix links, and the longest stop string ending at each state.
  std::deque<std::int32_t> queue;
  for (const auto& [byte, next] : states_[0].edges) queue.push_back(next);
  while (!queue.empty()) {
    const std::int32_t node = queue.front();
    queue.pop_front();
    for (const auto& [byte, next] : states_[node].edges) {
      std::int32_t fallback = states_[node].fail;
      while (fallback != 0 && child(fallback, byte) < 0) fallback = states_[fallback].fail;
      const std::int32_t target = child(fallback, byte);
      states_[next].fail = target >= 0 && target != next ? target : 0;
      if (states_[next].output < 0) states_[next].output = states_[states_[next].fail].output;
      queue.push_back(next);
    }
  }
}

stop_scan stop_string_matcher::push(std::string_view delta) {
  stop_scan scan;
  if (stopped_) return scan;
  std::string buffer = std::move(held_);
  const std::size_t processed = buffer.size();
  buffer.append(delta);
  for (std::size_t i = processed; i < buffer.size(); ++i) {
    current_ = step(current_, static_cast<unsigned char>(buffer[i]));
    const std::int32_t output = states_[current_].output;
    if (output < 0) continue;
    const std::size_t start = i + 1 - stop_strings_[output].size();
    scan.text = buffer.substr(0, start);
    scan.match = stop_match{static_cast<std::size_t>(output), released_ + start};
    released_ += start;
    held_.clear();
    stopped_ = true;
    return scan;
  }
  const std::size_t keep = static_cast<std::size_t>(states_[current_].depth);
  scan.text = buffer.substr(0, buffer.size() - keep);
  held_ = buffer.substr(buffer.size() - keep);
  released_ += scan.text.size();
  return scan;
}

std::string stop_string_matcher::flush() {
  if (stopped_) return {};
  released_ += held_.size();
  current_ = 0;
  return std::exchange(held_, {});
}

}  // namespace troupe::text

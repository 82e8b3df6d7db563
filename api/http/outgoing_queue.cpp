#include "api/http/outgoing_queue.hpp"

#include <limits>

namespace troupe::api {

namespace {
// Rough JSON cost of one token's logprob entry and of each alternative.
constexpr std::size_t bytes_per_logprob = 64;
constexpr std::size_t bytes_per_frame = 160;
}  // namespace

void pending_delta::merge(const delta_event& delta) {
  text += delta.text;
  token_ids.insert(token_ids.end(), delta.token_ids.begin(), delta.token_ids.end());
  logprobs.insert(logprobs.end(), delta.logprobs.begin(), delta.logprobs.end());
}

std::size_t pending_delta::estimated_bytes() const {
  std::size_t bytes = bytes_per_frame + text.size();
  for (const token_logprobs& token : logprobs) {
    bytes += bytes_per_logprob + 2 * token.text.size();
    for (const auto& alternative : token.top) bytes += bytes_per_logprob + 2 * alternative.first.size();
  }
  return bytes;
}

outgoing_queue::outgoing_queue(std::size_t limit_bytes) : limit_bytes_(limit_bytes) {}

void outgoing_queue::close_open_deltas(std::uint64_t stream, int choice) {
  if (choice >= 0) {
    open_deltas_.erase({stream, choice});
    return;
  }
  const auto first = open_deltas_.lower_bound({stream, std::numeric_limits<int>::min()});
  const auto last = open_deltas_.upper_bound({stream, std::numeric_limits<int>::max()});
  open_deltas_.erase(first, last);
}

void outgoing_queue::push_frame(std::uint64_t stream, int choice, std::string bytes) {
  close_open_deltas(stream, choice);
  item entry;
  entry.stream = stream;
  entry.accounted_bytes = bytes.size();
  entry.bytes = std::move(bytes);
  queued_bytes_ += entry.accounted_bytes;
  items_.push_back(std::move(entry));
}

void outgoing_queue::push_delta(std::uint64_t stream, const std::shared_ptr<delta_renderer>& renderer,
                                const delta_event& delta) {
  const auto open = open_deltas_.find({stream, delta.choice});
  if (open != open_deltas_.end()) {
    item& waiting = *open->second;
    waiting.delta.merge(delta);
    queued_bytes_ -= waiting.accounted_bytes;
    waiting.accounted_bytes = waiting.delta.estimated_bytes();
    queued_bytes_ += waiting.accounted_bytes;
    return;
  }
  item entry;
  entry.stream = stream;
  entry.renderer = renderer;
  entry.delta.choice = delta.choice;
  entry.delta.merge(delta);
  entry.accounted_bytes = entry.delta.estimated_bytes();
  queued_bytes_ += entry.accounted_bytes;
  items_.push_back(std::move(entry));
  open_deltas_[{stream, delta.choice}] = std::prev(items_.end());
}

std::optional<std::string> outgoing_queue::pop() {
  if (items_.empty()) return std::nullopt;
  item front = std::move(items_.front());
  if (front.renderer) {
    const auto open = open_deltas_.find({front.stream, front.delta.choice});
    if (open != open_deltas_.end() && open->second == items_.begin()) open_deltas_.erase(open);
  }
  items_.pop_front();
  queued_bytes_ -= front.accounted_bytes;
  if (front.renderer) return front.renderer->render_delta(front.delta);
  return std::move(front.bytes);
}

void outgoing_queue::drop_stream(std::uint64_t stream) {
  close_open_deltas(stream, -1);
  for (auto it = items_.begin(); it != items_.end();) {
    if (it->stream == stream) {
      queued_bytes_ -= it->accounted_bytes;
      it = items_.erase(it);
    } else {
      ++it;
    }
  }
}

void outgoing_queue::replace_frame(std::uint64_t stream, std::string bytes) {
  drop_stream(stream);
  push_frame(stream, -1, std::move(bytes));
}

}  // namespace troupe::api

#pragma once
// The bounded outgoing queue of one connection (an SSE response or a
// WebSocket). Frames leave in order; while a delta waits unsent, later
// deltas of the same (stream, choice) merge into it, so a slow reader gets
// fewer, larger frames instead of an ever longer queue. Past `limit_bytes`
// the owner must shed load (see over_limit). Confined to one strand.

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "troupe/request.hpp"

namespace troupe::api {

/// A delta waiting in the queue: everything one choice produced since the
/// last frame of it that was written.
struct pending_delta {
  int choice = 0;
  std::string text;
  std::vector<std::int32_t> token_ids;
  std::vector<token_logprobs> logprobs;

  /// Appends a later delta of the same choice.
  void merge(const delta_event& delta);
  /// Bytes this delta is expected to take once rendered (an estimate).
  std::size_t estimated_bytes() const;
};

/// Renders a merged delta into framed bytes when it is about to be written,
/// so per-choice state (text offsets) advances in write order.
class delta_renderer {
 public:
  virtual ~delta_renderer() = default;
  virtual std::string render_delta(const pending_delta& delta) = 0;
};

/// See the file comment. `stream` keys tell apart the requests sharing it.
class outgoing_queue {
 public:
  /// `limit_bytes`: queued bytes (estimated) beyond which over_limit() holds.
  explicit outgoing_queue(std::size_t limit_bytes);

  /// Appends ready bytes. Closes the stream's waiting delta of `choice` (of
  /// every choice when `choice` < 0) to merging, which keeps frames in order.
  void push_frame(std::uint64_t stream, int choice, std::string bytes);
  /// Appends `delta`, or merges it into the stream's waiting delta of that choice.
  void push_delta(std::uint64_t stream, const std::shared_ptr<delta_renderer>& renderer, const delta_event& delta);
  /// Removes and renders the front frame; nullopt when empty.
  std::optional<std::string> pop();
  /// Removes everything queued for `stream` (cancelled or failed).
  void drop_stream(std::uint64_t stream);
  /// Queues `bytes` as the only frame waiting for `stream`, dropping an
  /// unsent earlier one: for frames where only the newest matters (a pong
  /// answers the latest ping), so they never pile up.
  void replace_frame(std::uint64_t stream, std::string bytes);

  bool empty() const { return items_.empty(); }
  std::size_t size() const { return items_.size(); }
  std::size_t queued_bytes() const { return queued_bytes_; }
  std::size_t limit_bytes() const { return limit_bytes_; }
  bool over_limit() const { return queued_bytes_ > limit_bytes_; }

 private:
  struct item {
    std::uint64_t stream = 0;
    std::string bytes;                         ///< ready frame, when renderer is null
    std::shared_ptr<delta_renderer> renderer;  ///< set for a waiting delta
    pending_delta delta;
    std::size_t accounted_bytes = 0;
  };
  using item_list = std::list<item>;

  void close_open_deltas(std::uint64_t stream, int choice);

  item_list items_;
  std::map<std::pair<std::uint64_t, int>, item_list::iterator> open_deltas_;
  std::size_t queued_bytes_ = 0;
  std::size_t limit_bytes_;
};

}  // namespace troupe::api

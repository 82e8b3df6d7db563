// The per-connection outgoing queue: order, merging of waiting deltas, the
// byte bound and dropping one stream.

#include <gtest/gtest.h>

#include "api/http/outgoing_queue.hpp"

namespace troupe::api {
namespace {

/// Renders "<choice>:<text>:<tokens>" so merges are visible.
class plain_renderer final : public delta_renderer {
 public:
  std::string render_delta(const pending_delta& delta) override {
    return std::to_string(delta.choice) + ":" + delta.text + ":" + std::to_string(delta.token_ids.size());
  }
};

delta_event delta(int choice, std::string text) { return {"r", choice, std::move(text), {1}, {}}; }

std::vector<std::string> drain(outgoing_queue& queue) {
  std::vector<std::string> out;
  while (auto frame = queue.pop()) out.push_back(*frame);
  return out;
}

TEST(OutgoingQueue, WaitingDeltasOfAChoiceMergeInOrder) {
  outgoing_queue queue(1 << 20);
  auto renderer = std::make_shared<plain_renderer>();
  queue.push_frame(1, -1, "head");
  queue.push_delta(1, renderer, delta(0, "a"));
  queue.push_delta(1, renderer, delta(1, "x"));
  queue.push_delta(1, renderer, delta(0, "b"));
  queue.push_delta(1, renderer, delta(0, "c"));
  EXPECT_EQ(queue.size(), 3u);
  EXPECT_EQ(drain(queue), (std::vector<std::string>{"head", "0:abc:3", "1:x:1"}));
  EXPECT_EQ(queue.queued_bytes(), 0u);
}

TEST(OutgoingQueue, AFrameClosesMergingSoOrderIsKept) {
  outgoing_queue queue(1 << 20);
  auto renderer = std::make_shared<plain_renderer>();
  queue.push_delta(1, renderer, delta(0, "a"));
  queue.push_frame(1, 0, "finish0");
  queue.push_delta(1, renderer, delta(0, "b"));  // cannot join "a": it would jump the frame
  queue.push_delta(2, renderer, delta(0, "other"));
  queue.push_delta(1, renderer, delta(0, "c"));
  EXPECT_EQ(drain(queue), (std::vector<std::string>{"0:a:1", "finish0", "0:bc:2", "0:other:1"}));
}

TEST(OutgoingQueue, APoppedDeltaNoLongerMerges) {
  outgoing_queue queue(1 << 20);
  auto renderer = std::make_shared<plain_renderer>();
  queue.push_delta(1, renderer, delta(0, "a"));
  EXPECT_EQ(queue.pop(), std::optional<std::string>("0:a:1"));
  queue.push_delta(1, renderer, delta(0, "b"));
  EXPECT_EQ(drain(queue), (std::vector<std::string>{"0:b:1"}));
}

TEST(OutgoingQueue, OverLimitWhenTheReaderFallsBehindAndDropStreamRecovers) {
  outgoing_queue queue(10'000);
  auto renderer = std::make_shared<plain_renderer>();
  queue.push_frame(0, -1, "keep");
  for (int i = 0; i < 100 && !queue.over_limit(); ++i) queue.push_delta(7, renderer, delta(0, std::string(500, 'z')));
  EXPECT_TRUE(queue.over_limit());
  EXPECT_EQ(queue.size(), 2u);  // merged into one waiting delta, not a hundred frames
  queue.drop_stream(7);
  EXPECT_FALSE(queue.over_limit());
  EXPECT_EQ(drain(queue), (std::vector<std::string>{"keep"}));
  queue.push_delta(7, renderer, delta(0, "new"));  // the dropped stream's merge slot is gone too
  EXPECT_EQ(drain(queue), (std::vector<std::string>{"0:new:1"}));
}

TEST(OutgoingQueue, AReplacedFrameKeepsOnlyTheNewestOneWaiting) {
  outgoing_queue queue(1'000);
  queue.push_frame(0, -1, "error");
  for (int i = 0; i < 1'000; ++i) queue.replace_frame(9, "pong" + std::to_string(i) + std::string(100, '.'));
  EXPECT_EQ(queue.size(), 2u);  // a thousand pings, one pending pong
  EXPECT_FALSE(queue.over_limit());
  EXPECT_EQ(queue.queued_bytes(), 5u + 107u);
  const std::vector<std::string> frames = drain(queue);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0], "error");
  EXPECT_EQ(frames[1].substr(0, 7), "pong999");
  EXPECT_EQ(queue.queued_bytes(), 0u);
}

}  // namespace
}  // namespace troupe::api

// Stop strings over a stream of deltas, checked against a brute-force
// reference over the whole text and on hand-picked cases.

#include "model/text/stop_string_matcher.hpp"

#include <gtest/gtest.h>

#include <random>

namespace troupe::text {
namespace {

/// The reference: scanning end positions left to right, the first position
/// where some stop string ends; the longest one there.
std::optional<stop_match> first_completed(const std::string& text, const std::vector<std::string>& stops) {
  for (std::size_t end = 1; end <= text.size(); ++end) {
    std::optional<stop_match> best;
    std::size_t best_length = 0;
    for (std::size_t i = 0; i < stops.size(); ++i) {
      const std::string& stop = stops[i];
      if (stop.size() <= end && text.compare(end - stop.size(), stop.size(), stop) == 0 && stop.size() > best_length) {
        best = stop_match{i, end - stop.size()};
        best_length = stop.size();
      }
    }
    if (best) return best;
  }
  return std::nullopt;
}

/// The reference hold-back: the longest suffix of `text` that is a proper
/// prefix of a stop string.
std::size_t reference_hold(const std::string& text, const std::vector<std::string>& stops) {
  std::size_t hold = 0;
  for (const std::string& stop : stops) {
    for (std::size_t length = std::min(stop.size() - 1, text.size()); length > hold; --length) {
      if (text.compare(text.size() - length, length, stop, 0, length) == 0) {
        hold = length;
        break;
      }
    }
  }
  return hold;
}

struct stream_result {
  std::string released;
  std::optional<stop_match> match;
};

stream_result run(const std::vector<std::string>& stops, const std::vector<std::string>& deltas) {
  stop_string_matcher matcher(stops);
  stream_result result;
  for (const std::string& delta : deltas) {
    stop_scan scan = matcher.push(delta);
    result.released += scan.text;
    if (scan.match) result.match = scan.match;
  }
  result.released += matcher.flush();
  return result;
}

TEST(StopStringMatcher, FindsAStopStringSpanningDeltas) {
  const auto result = run({"</answer>"}, {"foo </ans", "wer", "> bar"});
  EXPECT_EQ(result.released, "foo ");
  ASSERT_TRUE(result.match);
  EXPECT_EQ(result.match->stop_index, 0u);
  EXPECT_EQ(result.match->offset, 4u);
}

TEST(StopStringMatcher, HoldsBackOnlyAPossiblePrefix) {
  stop_string_matcher matcher({"STOP"});
  EXPECT_EQ(matcher.push("hello S").text, "hello ");
  EXPECT_EQ(matcher.held_bytes(), 1u);
  EXPECT_EQ(matcher.push("T").text, "");
  EXPECT_EQ(matcher.push("x").text, "STx");
  EXPECT_EQ(matcher.held_bytes(), 0u);
  EXPECT_EQ(matcher.push("no stop here").text, "no stop here");
  EXPECT_EQ(matcher.push("ST").text, "");
  EXPECT_EQ(matcher.flush(), "ST");
  EXPECT_FALSE(matcher.stopped());
}

TEST(StopStringMatcher, OverlappingCandidatesFirstCompletionWins) {
  // "bc" completes (at byte 3) before "abcd" would (at byte 4).
  auto result = run({"abcd", "bc"}, {"xabcd"});
  EXPECT_EQ(result.released, "xa");
  ASSERT_TRUE(result.match);
  EXPECT_EQ(result.match->stop_index, 1u);
  // Both end at the same byte: the longer one cuts earlier.
  result = run({"c", "abc"}, {"zab", "c"});
  EXPECT_EQ(result.released, "z");
  EXPECT_EQ(result.match->stop_index, 1u);
  // A stop string that overlaps itself.
  result = run({"aab"}, {"aa", "a", "b!"});
  EXPECT_EQ(result.released, "a");
  EXPECT_EQ(result.match->offset, 1u);
}

TEST(StopStringMatcher, SeveralStopStrings) {
  const auto result = run({"\n\nUser:", "<|end|>", "###"}, {"Answer: 42\n", "\nUse", "d ###"});
  EXPECT_EQ(result.released, "Answer: 42\n\nUsed ");
  EXPECT_EQ(result.match->stop_index, 2u);
}

TEST(StopStringMatcher, StopAtTheVeryStart) {
  stop_string_matcher matcher({"<|end|>"});
  const stop_scan scan = matcher.push("<|end|>and more");
  EXPECT_EQ(scan.text, "");
  ASSERT_TRUE(scan.match);
  EXPECT_EQ(scan.match->offset, 0u);
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.push("ignored").text, "");
  EXPECT_EQ(matcher.flush(), "");
}

TEST(StopStringMatcher, MultibyteStopStrings) {
  const auto result = run({"。", "🛑"}, {"你好", "\xE3\x80", "\x82", "later"});
  EXPECT_EQ(result.released, "你好");
  EXPECT_EQ(result.match->offset, 6u);
}

TEST(StopStringMatcher, NoStopStringsReleasesEverything) {
  stop_string_matcher matcher({});
  EXPECT_EQ(matcher.push("abc").text, "abc");
  EXPECT_EQ(matcher.held_bytes(), 0u);
}

TEST(StopStringMatcher, EmptyStopStringIsRejected) {
  EXPECT_THROW(stop_string_matcher({"ok", ""}), std::invalid_argument);
}

TEST(StopStringMatcher, AgreesWithBruteForceOnRandomStreams) {
  std::mt19937 rng(12345);
  const auto random_string = [&](std::size_t max_length, std::size_t min_length) {
    std::string s(std::uniform_int_distribution<std::size_t>(min_length, max_length)(rng), 'a');
    for (char& c : s) c = static_cast<char>('a' + std::uniform_int_distribution<int>(0, 2)(rng));
    return s;
  };
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::string> stops(std::uniform_int_distribution<int>(1, 4)(rng));
    for (auto& stop : stops) stop = random_string(5, 1);
    const std::string text = random_string(40, 0);
    stop_string_matcher matcher(stops);
    std::string released;
    std::optional<stop_match> match;
    std::size_t position = 0;
    while (position < text.size() && !match) {
      const std::size_t length = std::uniform_int_distribution<std::size_t>(1, 6)(rng);
      const std::string delta = text.substr(position, length);
      position += delta.size();
      const stop_scan scan = matcher.push(delta);
      released += scan.text;
      match = scan.match;
      if (!match) {
        ASSERT_EQ(matcher.held_bytes(), reference_hold(text.substr(0, position), stops)) << text;
        ASSERT_EQ(released + text.substr(position - matcher.held_bytes(), matcher.held_bytes()),
                  text.substr(0, position));
      }
    }
    released += matcher.flush();
    const auto expected = first_completed(text, stops);
    ASSERT_EQ(match.has_value(), expected.has_value()) << text;
    if (expected) {
      EXPECT_EQ(match->stop_index, expected->stop_index) << text;
      EXPECT_EQ(match->offset, expected->offset) << text;
      EXPECT_EQ(released, text.substr(0, expected->offset)) << text;
    } else {
      EXPECT_EQ(released, text);
    }
  }
}

}  // namespace
}  // namespace troupe::text

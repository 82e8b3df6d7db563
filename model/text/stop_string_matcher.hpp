#pragma once
// Finds stop strings in a stream of text deltas. Text that could still turn
// into a stop string (the longest suffix that is a prefix of one) is held
// back; everything else is released at once. The first stop string to
// complete wins (the earliest end; on a tie the longest), so the result does
// not depend on how the stream was cut into deltas.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::text {

/// Where a stop string completed.
struct stop_match {
  std::size_t stop_index;  ///< index into the stop strings given to the matcher
  std::size_t offset;      ///< byte offset in the whole stream where it starts (where to cut)
};

/// What one push() releases.
struct stop_scan {
  std::string text;                 ///< text safe to emit now (never part of a stop string)
  std::optional<stop_match> match;  ///< set once a stop string completed; text ends at match->offset
};

/// Per-request matcher (a byte-level Aho-Corasick automaton); not thread-safe.
class stop_string_matcher {
 public:
  /// Throws std::invalid_argument if a stop string is empty.
  explicit stop_string_matcher(std::vector<std::string> stop_strings);

  /// Scans `delta`. After a match, further pushes release nothing.
  stop_scan push(std::string_view delta);
  /// End of stream without a match: releases the held-back text.
  std::string flush();

  /// Whether a stop string has completed.
  bool stopped() const { return stopped_; }
  /// Bytes currently held back.
  std::size_t held_bytes() const { return held_.size(); }
  /// The stop strings, as given.
  const std::vector<std::string>& stop_strings() const { return stop_strings_; }

 private:
  struct state {
    std::vector<std::pair<unsigned char, std::int32_t>> edges;  ///< sorted trie edges
    std::int32_t fail = 0;
    std::int32_t depth = 0;
    std::int32_t output = -1;  ///< longest stop string ending here (via suffix links), or -1
  };
  std::int32_t child(std::int32_t node, unsigned char byte) const;
  std::int32_t step(std::int32_t node, unsigned char byte) const;
  void build();

  std::vector<std::string> stop_strings_;
  std::vector<state> states_;
  std::int32_t current_ = 0;
  std::string held_;          ///< the stream's last current_.depth bytes
  std::size_t released_ = 0;  ///< bytes of the stream already released
  bool stopped_ = false;
};

}  // namespace troupe::text

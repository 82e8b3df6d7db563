#pragma once
// HF's SplitDelimiterBehavior: how the matched parts of a piece combine with
// the parts between them when the piece is split.

#include <optional>
#include <vector>

#include "base/json_field.hpp"
#include "model/text/pre_tokenizer.hpp"

namespace troupe::text {

/// What happens to a match when a piece is split on it.
enum class split_behavior {
  removed,               ///< matches are dropped
  isolated,              ///< matches become pieces of their own
  merged_with_previous,  ///< a match joins the piece before it
  merged_with_next,      ///< a match joins the piece after it
  contiguous,            ///< adjacent matches join each other
};

/// Parses "Removed", "Isolated", "MergedWithPrevious", "MergedWithNext" or
/// "Contiguous"; throws std::runtime_error naming the path otherwise.
split_behavior parse_split_behavior(const json_field& node);

/// Receives, in order, the parts [begin, end) that cover one piece, each
/// flagged as match or not, and appends the resulting non-empty pieces.
class split_sink {
 public:
  /// `piece` is the piece being split; results go to `out`.
  split_sink(split_behavior behavior, const text_piece& piece, std::vector<text_piece>& out)
      : behavior_(behavior), piece_(piece), out_(out) {}

  /// The next covering part.
  void item(std::size_t begin, std::size_t end, bool is_match);
  /// Flushes what is still pending; call once after the last item.
  void finish();

 private:
  void emit(std::size_t begin, std::size_t end);

  split_behavior behavior_;
  const text_piece& piece_;
  std::vector<text_piece>& out_;
  std::optional<text_piece> pending_;
  bool previous_match_ = false;
};

}  // namespace troupe::text

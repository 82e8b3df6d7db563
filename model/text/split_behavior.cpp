#include "model/text/split_behavior.hpp"

#include <string>

namespace troupe::text {

split_behavior parse_split_behavior(const json_field& node) {
  const std::string_view name = node.string();
  if (name == "Removed") return split_behavior::removed;
  if (name == "Isolated") return split_behavior::isolated;
  if (name == "MergedWithPrevious") return split_behavior::merged_with_previous;
  if (name == "MergedWithNext") return split_behavior::merged_with_next;
  if (name == "Contiguous") return split_behavior::contiguous;
  node.fail("unknown split behavior \"" + std::string(name) + "\"");
}

void split_sink::emit(std::size_t begin, std::size_t end) {
  if (begin == end) return;
  out_.push_back({begin, end, piece_.at_origin && begin == piece_.begin});
}

void split_sink::item(std::size_t begin, std::size_t end, bool is_match) {
  switch (behavior_) {
    case split_behavior::removed:
      if (!is_match) emit(begin, end);
      break;
    case split_behavior::isolated:
      emit(begin, end);
      break;
    case split_behavior::contiguous:
      if (pending_ && is_match == previous_match_) {
        pending_->end = end;
      } else {
        if (pending_) emit(pending_->begin, pending_->end);
        pending_ = text_piece{begin, end, false};
      }
      break;
    case split_behavior::merged_with_previous:
      if (pending_ && is_match && !previous_match_) {
        pending_->end = end;
      } else {
        if (pending_) emit(pending_->begin, pending_->end);
        pending_ = text_piece{begin, end, false};
      }
      break;
    case split_behavior::merged_with_next:
      // pending_ holds a match waiting for the part after it.
      if (pending_ && !is_match) {
        emit(pending_->begin, end);
        pending_.reset();
      } else {
        if (pending_) emit(pending_->begin, pending_->end);
        pending_.reset();
        if (is_match) {
          pending_ = text_piece{begin, end, false};
        } else {
          emit(begin, end);
        }
      }
      break;
  }
  previous_match_ = is_match;
}

void split_sink::finish() {
  if (pending_) emit(pending_->begin, pending_->end);
  pending_.reset();
}

}  // namespace troupe::text

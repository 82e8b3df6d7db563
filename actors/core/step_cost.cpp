#include "actors/core/step_cost.hpp"

namespace troupe {

void step_cost_model::observe_serial_gap(double seconds) {
  gap_s_ = observations_++ == 0 ? seconds : 0.95 * gap_s_ + 0.05 * seconds;
}

overlap_mode step_cost_model::mode() {
  if (fixed_step_s_ <= 0) return overlap_mode::alternate;
  if (mode_ == overlap_mode::serial && observations_ >= 50 && 2 * fixed_step_s_ < gap_s_) mode_ = overlap_mode::split;
  return mode_;
}

const char* overlap_mode_name(overlap_mode mode) {
  switch (mode) {
    case overlap_mode::alternate:
      return "alternate";
    case overlap_mode::split:
      return "split";
    case overlap_mode::serial:
      return "serial";
  }
  return "?";
}

}  // namespace troupe

#pragma once
// How consecutive steps overlap. While a step runs, sequences awaiting its
// tokens sit out the next one, so with two steps in flight the decoding
// sequences fall into two groups taking turns. That hides the scheduler's
// turnaround (result handling and planning) behind the other step, but every
// step pays the fixed cost of reading all weights, so for a real checkpoint
// two half batches cost nearly twice one full batch. The engine starts
// serial (one step in flight) and measures how long the executor idles
// between steps; it switches to split overlap for good once twice the fixed
// cost (the executor time of a one-token step) is below that idle time:
// tiny models only. Switching back would be judged on the idle time left
// under overlap, which is small exactly when overlap works, so it is not done.

namespace troupe {

/// How the scheduler overlaps steps.
enum class overlap_mode {
  alternate,  ///< two steps in flight, decodes wherever they are ready (fixed cost unknown)
  split,      ///< two steps in flight, decodes split evenly between them (fixed cost ≪ turnaround)
  serial,     ///< one step in flight, every decode in it (fixed cost ≫ turnaround)
};

/// The overlap decision from the measured fixed cost of a step and the
/// executor's idle time between serial steps.
class step_cost_model {
 public:
  /// `fixed_step_s`: executor seconds of a one-token step (0: unknown).
  explicit step_cost_model(double fixed_step_s = 0) : fixed_step_s_(fixed_step_s) {}

  /// Seconds the executor waited between a serial step and the next: the
  /// messages both ways plus the scheduler's result handling and planning.
  void observe_serial_gap(double seconds);

  /// The mode to plan the next step in (see the file comment).
  overlap_mode mode();

  double fixed_step_s() const { return fixed_step_s_; }
  /// Smoothed gap between serial steps, seconds (0 before the first).
  double serial_gap_s() const { return gap_s_; }

 private:
  double fixed_step_s_;
  double gap_s_ = 0;
  int observations_ = 0;
  overlap_mode mode_ = overlap_mode::serial;
};

/// "alternate", "split" or "serial".
const char* overlap_mode_name(overlap_mode mode);

}  // namespace troupe

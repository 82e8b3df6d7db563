#pragma once
// Runs a scheduler with up to `depth` steps in flight: each step is planned
// while the results of the previous `depth` steps are still outstanding
// (the fake model computes steps in plan order, as an executor would), and
// results are handed back late. Records every event.

#include <gtest/gtest.h>

#include <deque>
#include <map>

#include "actors/core/scheduler.hpp"
#include "actors/core/step_builder.hpp"
#include "memory/block_manager.hpp"
#include "tests/scheduler/fake_model.hpp"

namespace troupe::testing {

class pipeline {
 public:
  pipeline(scheduler& sched, block_manager& kv, fake_model& model, int depth)
      : sched_(sched), kv_(kv), model_(model), depth_(depth) {}

  /// Plans and runs one step at `now`; applies results older than `depth` steps.
  void step(double now) {
    scheduled_step s = sched_.schedule(now, kv_);
    record(s.events);
    EXPECT_LE(s.num_tokens(), sched_.config().max_num_batched_tokens);
    EXPECT_EQ(kv_.check_invariants(), "");
    const step_batch batch = build_step_batch(s, sched_.config().block_size);
    kv_cache_spec spec;
    spec.block_size = sched_.config().block_size;
    spec.num_blocks = kv_.config().num_device_blocks;
    EXPECT_EQ(validate_step_batch(batch, spec), "");
    if (!s.empty()) {  // a step of copies alone must run too
      step_result result = model_.run(s, batch);
      if (!s.sequences.empty()) in_flight_.push_back(std::move(result));
    }
    if (s.sequences.empty() && !in_flight_.empty()) deliver(now);  // nothing could run without a result
    while (static_cast<int>(in_flight_.size()) > depth_) deliver(now);
  }

  /// Applies every outstanding result.
  void drain(double now) {
    while (!in_flight_.empty()) deliver(now);
  }

  void record(const scheduler_events& events) {
    EXPECT_EQ(events.error, "");
    for (const auto& t : events.tokens) outputs[{t.request, t.choice}].push_back(t.sample.token);
    for (const auto& f : events.finished) {
      ++finishes[{f.request, f.choice}];
      reasons[{f.request, f.choice}] = f.reason;
      done += f.request_done;
      if (f.request_done) ++done_per_request[f.request];
    }
    preemptions += static_cast<int>(events.preempted.size());
  }

  std::map<std::pair<request_handle, int>, std::vector<std::int32_t>> outputs;
  std::map<std::pair<request_handle, int>, int> finishes;
  std::map<std::pair<request_handle, int>, finish_reason> reasons;
  std::map<request_handle, int> done_per_request;
  int done = 0;
  int preemptions = 0;

 private:
  void deliver(double now) {
    record(sched_.on_step_result(in_flight_.front(), now));
    in_flight_.pop_front();
  }

  scheduler& sched_;
  block_manager& kv_;
  fake_model& model_;
  int depth_;
  std::deque<step_result> in_flight_;
};

}  // namespace troupe::testing

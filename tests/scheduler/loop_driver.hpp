#pragma once
// Drives a scheduler_loop the way the scheduler actor does, without CAF:
// KV requests go to the fake KV manager at once, planned steps stay in
// flight until the test hands their results back, and time is the test's.
// Records finishes and drain answers.

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actors/core/scheduler_loop.hpp"
#include "tests/scheduler/fake_kv.hpp"
#include "tests/scheduler/harness.hpp"

namespace troupe::testing {

/// Loop knobs for small tests: small_config(), `max_steps_in_flight`, and
/// the one-token step time that decides the overlap mode (0: alternate).
inline scheduler_loop_config small_loop_config(int max_steps_in_flight = 2, double one_token_step_s = 0) {
  scheduler_loop_config config;
  config.scheduler = small_config();
  config.max_steps_in_flight = max_steps_in_flight;
  config.stuck_after_s = 30;
  config.one_token_step_s = one_token_step_s;
  return config;
}

class loop_driver {
 public:
  explicit loop_driver(scheduler_loop_config config = small_loop_config())
      : loop(config),
        kv(config.scheduler.num_device_blocks, config.scheduler.num_host_blocks, config.scheduler.block_size) {}

  /// Submits request `id`: a 4-token prompt generating `max_tokens`.
  loop_submission submit(const std::string& id, int max_tokens = 4) {
    loop_submission out = loop.submit(id, make_spec({.prompt_len = 4, .max_tokens = max_tokens}), now);
    record(out.events);
    return out;
  }

  /// Plans a step as the actor does (begin_step, every KV round,
  /// take_step); nullopt when no step was due. Records its events.
  std::optional<planned_step> plan() {
    std::optional<kv_request> request = loop.begin_step(now);
    if (!request) return std::nullopt;
    while (auto again = loop.on_kv_reply(kv.plan(*request))) request = std::move(again);
    planned_step planned = loop.take_step(now);
    record(planned.events);
    return planned;
  }

  /// Hands back step `step`'s result (token 1 in every row, executor time `execute_s`).
  step_outcome complete(const scheduled_step& step, double execute_s = 0) {
    step_result result;
    result.step = step.id;
    result.samples.resize(step.rows.size());
    for (sample_output& sample : result.samples) sample.token = 1;
    result.execute_s = execute_s;
    step_outcome outcome = loop.on_step_result(result, now);
    EXPECT_EQ(outcome.events.events.error, "");
    record(outcome.events);
    return outcome;
  }

  /// Plans and completes one step at a time, `step_s` apart, until no step is due.
  void run_serially(double step_s = 0.01, int limit = 1000) {
    for (int i = 0; i < limit; ++i) {
      std::optional<planned_step> planned = plan();
      if (!planned || planned->next != after_planning::run) return;
      now += step_s;
      complete(planned->step);
    }
  }

  void record(const loop_events& events) {
    for (const finish_event& finish : events.events.finished) finished.push_back(finish);
    for (const drain_reply& reply : events.drains) {
      EXPECT_EQ(drain_answers.count(reply.id), 0u) << "drain " << reply.id << " answered twice";
      drain_answers[reply.id] = reply.drained;
    }
  }

  /// Finishes of request `handle` recorded so far.
  std::vector<finish_event> finishes_of(request_handle handle) const {
    std::vector<finish_event> found;
    for (const finish_event& finish : finished) {
      if (finish.request == handle) found.push_back(finish);
    }
    return found;
  }

  scheduler_loop loop;
  fake_kv kv;
  double now = 0;
  std::vector<finish_event> finished;
  std::map<drain_id, bool> drain_answers;
};

}  // namespace troupe::testing

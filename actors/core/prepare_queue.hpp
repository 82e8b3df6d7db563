#pragma once
// The queue of prompt preparations (render, encode, constraint compile) and
// /tokenize calls the intake holds until a tokenizer worker is free. Pure:
// jobs are tickets, the intake keeps their payloads.
//
// It bounds what waits (queued + running): globally, per origin (one HTTP
// connection or WebSocket), and together with the scheduler's queue of
// requests not yet started (max_waiting_requests), so a flood is refused
// before it costs an encode. It hands jobs out in turns across origins,
// each origin's in arrival order, so one connection's flood delays another
// connection's request by at most one job per busy origin. A cancelled job
// that has not started is removed and never runs, and so is one still
// queued at its deadline (its request's timeout).

#include <atomic>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "troupe/engine.hpp"

namespace troupe {

/// Queue lengths one actor publishes for another's admission check and for
/// stats. Atomics, not messages: the intake reads the scheduler's length on
/// every submission, and a stale value moves a refusal by a request or two.
struct queue_gauges {
  std::atomic<std::int32_t> scheduler_queued{0};  ///< requests the scheduler holds not yet started (its writes)
  std::atomic<std::int32_t> prompts_pending{0};   ///< jobs queued for or in preparation (the intake's writes)
  /// Requests the intake ended as aborted before the scheduler saw them
  /// (cancelled or timed out awaiting preparation; the intake's writes).
  /// Stats add them to the scheduler's finished-as-abort count.
  std::atomic<std::uint64_t> requests_aborted_unprepared{0};
};

/// The bounds on jobs awaiting preparation.
struct prepare_limits {
  /// The bounds at their registry defaults.
  prepare_limits();
  /// The bounds `engine` sets (knobs max_pending_prompts,
  /// max_pending_prompts_per_connection, max_waiting_requests).
  explicit prepare_limits(const engine_config& engine);

  int max_pending;             ///< queued + running jobs at most
  int max_pending_per_origin;  ///< queued + running jobs of one origin at most (origin 0 is exempt)
  int max_waiting;             ///< pending jobs + the scheduler's not-yet-started requests at most
};

/// Which bound refused a job.
enum class prepare_refusal : std::uint8_t {
  pending_full,  ///< max_pending
  origin_full,   ///< max_pending_per_origin
  waiting_full,  ///< max_waiting
};

/// The error for request `id` that `refusal` refused (kind overloaded),
/// naming the bound and its knob; the code says which (connection_prompt_limit,
/// prompt_queue_full; none for the waiting queue, as the scheduler's own).
error_event refusal_error(const std::string& id, prepare_refusal refusal, const prepare_limits& limits);

/// One job, queued or running.
using prepare_ticket = std::uint64_t;

/// What push() did: a ticket, or the bound that refused the job.
struct prepare_push {
  prepare_ticket ticket = 0;
  std::optional<prepare_refusal> refusal;
};

/// What cancel() found for an id.
struct prepare_cancel {
  std::vector<prepare_ticket> removed;  ///< queued jobs taken out: they never run
  bool running = false;                 ///< a running job was marked: finish() will say to drop its result
};

class prepare_queue {
 public:
  explicit prepare_queue(prepare_limits limits) : limits_(limits) {}

  /// Queues a job of `origin` (0: none) that cancel(`id`) can remove (empty:
  /// none can), unless a bound refuses it. `scheduler_queued`: the
  /// scheduler's requests not yet started, counted against max_waiting.
  /// `deadline_s`: when the job, if still queued, expires (expire()), in
  /// seconds on the caller's clock; infinity: never.
  prepare_push push(const std::string& id, std::uint64_t origin, int scheduler_queued,
                    double deadline_s = std::numeric_limits<double>::infinity());
  /// The next job to run: the origin after the last one served that has a
  /// job queued, its oldest. Nullopt when nothing is queued. The job counts
  /// as running (and pending) until finish().
  std::optional<prepare_ticket> pop();
  /// A running job ended. True when it was cancelled meanwhile: its result
  /// must be dropped.
  bool finish(prepare_ticket ticket);
  /// Removes the queued jobs named `id` and marks its running ones.
  prepare_cancel cancel(const std::string& id);
  /// Removes the queued jobs whose deadline is at or before `now_s`
  /// (seconds, the push() clock), earliest deadline first. A running job
  /// is left to finish: whoever reads its result checks the deadline.
  std::vector<prepare_ticket> expire(double now_s);
  /// The earliest deadline of a queued job (seconds); nullopt when none has one.
  std::optional<double> next_deadline() const;

  /// Changes the bounds; jobs already pending stay.
  void set_limits(const prepare_limits& limits) { limits_ = limits; }
  const prepare_limits& limits() const { return limits_; }
  /// Jobs queued and not started.
  std::size_t queued() const { return queued_; }
  /// Jobs queued or running.
  std::size_t pending() const { return jobs_.size(); }
  /// Jobs of `origin` queued or running.
  int pending_of(std::uint64_t origin) const;

 private:
  struct job {
    std::string id;
    std::uint64_t origin = 0;
    double deadline_s = std::numeric_limits<double>::infinity();
    bool running = false;
    bool cancelled = false;
  };

  std::optional<prepare_refusal> refusal(std::uint64_t origin, int scheduler_queued) const;
  void unqueue(prepare_ticket ticket);
  void forget(prepare_ticket ticket);

  prepare_limits limits_;
  prepare_ticket next_ticket_ = 1;
  std::unordered_map<prepare_ticket, job> jobs_;
  std::map<std::uint64_t, std::deque<prepare_ticket>> queues_;  ///< per origin, oldest first; no empty deques
  std::set<std::pair<double, prepare_ticket>> deadlines_;       ///< queued jobs with a finite deadline, earliest first
  std::unordered_multimap<std::string, prepare_ticket> by_id_;
  std::unordered_map<std::uint64_t, int> per_origin_;  ///< pending jobs per origin (none at zero)
  std::optional<std::uint64_t> last_origin_;           ///< the origin pop() served last
  std::size_t queued_ = 0;
};

}  // namespace troupe

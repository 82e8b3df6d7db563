#pragma once
// Scheduling policies: objects that order requests, say when a waiting
// request may preempt a running one, and may refuse admission. The
// scheduler owns one and can swap it between steps; a new policy rebuilds
// its state from the live requests (on_attach).

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "actors/core/request_state.hpp"

namespace troupe {

/// What admission control may consult.
struct admission_context {
  double now = 0;          ///< seconds
  double step_time_s = 0;  ///< caller's estimate of one step's duration (0: unknown)
  int max_prefill_chunk = 0;
  int max_num_batched_tokens = 0;
  int max_model_len = 0;
  std::span<const request_state* const> queued;  ///< requests not yet started
};

/// The interface every policy implements.
class scheduling_policy {
 public:
  virtual ~scheduling_policy() = default;
  /// "fcfs", "priority", "mlfq", "deadline" or "fair".
  virtual const char* name() const = 0;
  /// The request's place in line: lower is served first, equal keys go by
  /// arrival. The scheduler reads it once per step (and again after
  /// on_scheduled returns true), so it may cost a lookup.
  virtual double sort_key(const request_state& request) const = 0;
  /// New tunables between steps; the policy keeps the state it holds on requests.
  virtual void set_config(const policy_config&) {}
  /// Whether a waiting `candidate` may take a running `victim`'s place.
  virtual bool may_preempt(const request_state& candidate, const request_state& victim) const;
  /// Whether admission_problem reads admission_context::queued (building it costs a scan).
  virtual bool needs_queue_at_admission() const { return false; }
  /// Empty to admit, else why the request cannot be served (rejected as overloaded).
  virtual std::string admission_problem(const request_state& request, const admission_context& context) const;
  /// A request arrived, or the policy took over a live one.
  virtual void on_attach(request_state& request, double now);
  /// A request left (finished or cancelled).
  virtual void on_detach(const request_state& request);
  /// Before each step's planning, with every live request.
  virtual void on_step_begin(double now, std::span<request_state* const> requests);
  /// While planning: `request` got `prompt_tokens` prompt (non-decode) tokens
  /// in the step. Returns true when that may change the order of requests.
  virtual bool on_scheduled(request_state& request, std::int64_t prompt_tokens, double now);
  /// After a step: `request` generated `generated_tokens` tokens (all choices).
  virtual void on_served(request_state& request, std::int64_t generated_tokens, double now);
};

/// Orders two requests by the policy's key, then by arrival (a total order).
bool serve_before(const scheduling_policy& policy, const request_state& a, const request_state& b);

/// First come, first served; never preempts for urgency.
class fcfs_policy final : public scheduling_policy {
 public:
  const char* name() const override { return "fcfs"; }
  double sort_key(const request_state& request) const override;
};

/// Lower `priority` first; preempts running requests of higher value.
class priority_policy final : public scheduling_policy {
 public:
  const char* name() const override { return "priority"; }
  double sort_key(const request_state& request) const override;
  bool may_preempt(const request_state& candidate, const request_state& victim) const override;
};

/// FastServe's skip-join MLFQ: entry level from prompt length, demotion
/// after the level's quantum of decode iterations, promotion to level 0
/// after waiting unserved too long.
class mlfq_policy final : public scheduling_policy {
 public:
  explicit mlfq_policy(const policy_config& config) : config_(config) {}
  const char* name() const override { return "mlfq"; }
  void set_config(const policy_config& config) override { config_ = config; }
  double sort_key(const request_state& request) const override;
  bool may_preempt(const request_state& candidate, const request_state& victim) const override;
  void on_attach(request_state& request, double now) override;
  void on_step_begin(double now, std::span<request_state* const> requests) override;
  bool on_scheduled(request_state& request, std::int64_t prompt_tokens, double now) override;
  void on_served(request_state& request, std::int64_t generated_tokens, double now) override;
  /// The level a prompt of `prompt_tokens` tokens joins.
  int entry_level(std::int64_t prompt_tokens) const;
  /// Decode iterations a request may run at `level` before demotion.
  std::int64_t quantum(int level) const;

 private:
  policy_config config_;
};

/// Earliest deadline first; requests without a deadline come last. Rejects
/// at admission what the step-time estimate says cannot finish in time.
class deadline_policy final : public scheduling_policy {
 public:
  const char* name() const override { return "deadline"; }
  double sort_key(const request_state& request) const override;
  bool may_preempt(const request_state& candidate, const request_state& victim) const override;
  bool needs_queue_at_admission() const override { return true; }
  std::string admission_problem(const request_state& request, const admission_context& context) const override;
  /// Seconds the request needs once started: its prefill chunks and decode steps at `step_time_s` each.
  static double service_time_estimate(const request_state& request, const admission_context& context);
};

/// Per-tenant fairness by virtual token counters (Sheng et al., "Fairness in
/// Serving Large Language Models", OSDI'24): the tenant with the least
/// weighted service goes first. A tenant whose queue was empty is lifted, on
/// its next arrival, to the least counter among backlogged tenants (or the
/// greatest counter ever reached when none is backlogged), so service it did
/// not ask for is not banked. Its state is O(tenants with live requests):
/// a tenant whose last request left is kept idle (counter remembered) until
/// more than policy_config::fair_idle_tenants are idle, then the least
/// recently active idle tenants are forgotten (at the next arrival or step).
/// Per-request work is O(log tenants).
class fair_policy final : public scheduling_policy {
 public:
  explicit fair_policy(const policy_config& config) : config_(config) {}
  const char* name() const override { return "fair"; }
  void set_config(const policy_config& config) override { config_ = config; }
  double sort_key(const request_state& request) const override;
  void on_attach(request_state& request, double now) override;
  void on_detach(const request_state& request) override;
  void on_step_begin(double now, std::span<request_state* const> requests) override;
  bool on_scheduled(request_state& request, std::int64_t prompt_tokens, double now) override;
  void on_served(request_state& request, std::int64_t generated_tokens, double now) override;
  /// The tenant's counter (0 for an unknown tenant).
  double counter(const std::string& user) const;
  /// Tenants it holds state for: those with live requests plus the idle ones kept.
  std::size_t num_tenants() const { return tenants_.size(); }

 private:
  struct tenant {
    double counter = 0;
    std::set<request_handle> queued;                     ///< requests not yet started
    std::int64_t live = 0;                               ///< attached requests
    std::list<const std::string*>::iterator idle_entry;  ///< its place in idle_ while live == 0
  };
  using tenant_map = std::unordered_map<std::string, tenant>;
  /// Sets a tenant's counter, keeping the backlog index and the greatest counter.
  void set_counter(tenant_map::iterator it, double value);
  /// Drops `handle` from the tenant's queue (and the tenant from the backlog when it empties).
  void leave_queue(tenant_map::iterator it, request_handle handle);
  /// Forgets the least recently active idle tenants beyond the bound.
  void trim_idle();

  policy_config config_;
  tenant_map tenants_;                                       ///< node-based: the key pointers below stay valid
  std::set<std::pair<double, const std::string*>> backlog_;  ///< (counter, name) of tenants with queued requests
  std::list<const std::string*> idle_;                       ///< tenants without live requests, latest first
  double greatest_counter_ = 0;                              ///< greatest counter any tenant reached
};

/// Builds a policy by name; nullptr when the name is unknown.
std::unique_ptr<scheduling_policy> make_policy(std::string_view name, const policy_config& config = {});

}  // namespace troupe

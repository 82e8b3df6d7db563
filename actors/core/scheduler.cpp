// Requests, knobs and queries of the scheduler core; planning lives in
// scheduler_plan.cpp, the KV reply in scheduler_reply.cpp, step results in
// scheduler_result.cpp.

#include "actors/core/scheduler.hpp"
#include "actors/core/sequence_constraint.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>

#include "config/config_store.hpp"

namespace troupe {

namespace {

std::uint64_t mix_seed(std::uint64_t base, std::uint64_t counter) { return choice_seed(base + counter, 1); }

// The shortest text that reads back as `value`: a value just outside a
// knob's range is not rounded into it, and messages stay readable.
std::string real_text(double value) {
  char buffer[32];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, value).ptr;
  return std::string(buffer, end);
}

}  // namespace

scheduler::scheduler(scheduler_config config, std::unique_ptr<scheduling_policy> policy)
    : config_(std::move(config)), policy_(std::move(policy)) {
  if (auto problem = validate_config(config_); !problem.empty()) throw std::invalid_argument("scheduler: " + problem);
  if (!policy_) policy_ = std::make_unique<fcfs_policy>();
  policy_->set_config(config_.policies);
  known_usage_.device_blocks = config_.num_device_blocks;
  known_usage_.device_free_blocks = config_.num_device_blocks;
  known_usage_.host_blocks = config_.num_host_blocks;
  known_usage_.host_free_blocks = config_.num_host_blocks;
  metrics_.kv = known_usage_;
  metrics_.spec_accepted_per_position.resize(static_cast<std::size_t>(config_.num_speculative_tokens));
}

scheduler::~scheduler() = default;

std::string scheduler::validate_config(const scheduler_config& c) {
  const config_store& knobs = knob_defaults();
  const policy_config& p = c.policies;
  for (const auto& [knob, value] : {std::pair{"max_num_batched_tokens", c.max_num_batched_tokens},
                                    {"max_num_seqs", c.max_num_seqs},
                                    {"max_prefill_chunk", c.max_prefill_chunk},
                                    {"block_size", c.block_size},
                                    {"max_waiting_requests", c.max_waiting_requests},
                                    {"mlfq_quantum", p.mlfq_base_quantum},
                                    {"mlfq_levels", p.mlfq_levels},
                                    {"mlfq_quantum_growth", p.mlfq_quantum_growth},
                                    {"mlfq_entry_prompt_tokens", p.mlfq_entry_prompt_tokens},
                                    {"swap_min_tokens", c.swap_min_tokens},
                                    {"preemption_grace_steps", c.preemption_grace_steps},
                                    {"num_speculative_tokens", c.num_speculative_tokens},
                                    {"speculative_max_batch", c.speculative_max_batch},
                                    {"speculative_tree_width", c.speculative_tree_width}}) {
    if (std::string problem = knobs.problem(knob, std::to_string(value)); !problem.empty()) return problem;
  }
  for (const auto& [knob, value] : {std::pair{"mlfq_promote_after", p.mlfq_promote_after_s},
                                    {"fair_prompt_weight", p.fair_prompt_weight},
                                    {"fair_output_weight", p.fair_output_weight},
                                    {"admission_watermark", c.admission_watermark}}) {
    if (std::string problem = knobs.problem(knob, real_text(value)); !problem.empty()) return problem;
  }
  if (c.max_model_len < 2) return "max_model_len must be at least 2";
  if (c.num_device_blocks < 1) return "num_device_blocks must be at least 1";
  if (c.num_host_blocks < 0) return "num_host_blocks must not be negative";
  return {};
}

std::int32_t scheduler::blocks_for(std::int64_t tokens) const {
  return static_cast<std::int32_t>((tokens + config_.block_size - 1) / config_.block_size);
}

std::vector<request_state*> scheduler::live_requests() const {
  std::vector<request_state*> live;
  live.reserve(requests_.size());
  for (const auto& [handle, request] : requests_) {
    if (!request->done()) live.push_back(request.get());
  }
  return live;
}

std::string scheduler::submit_problem(const request_state& request, error_kind& kind) const {
  const request_spec& spec = request.spec;
  kind = error_kind::invalid_request;
  if (spec.prompt.empty()) return "the prompt is empty";
  if (spec.n < 1) return "n must be at least 1";
  kind = error_kind::too_long;
  if (static_cast<std::int64_t>(spec.prompt.size()) >= config_.max_model_len)
    return "the prompt (" + std::to_string(spec.prompt.size()) + " tokens) leaves no room in the context of " +
           std::to_string(config_.max_model_len) + " tokens";
  if (blocks_for(static_cast<std::int64_t>(spec.prompt.size()) + 1) > config_.num_device_blocks)
    return "the prompt does not fit in the KV cache";
  kind = error_kind::overloaded;
  if (num_queued_ >= config_.max_waiting_requests)
    return "the waiting queue is full (" + std::to_string(config_.max_waiting_requests) + " requests)";
  std::vector<const request_state*> queued;
  if (policy_->needs_queue_at_admission()) {
    for (const auto& [handle, other] : requests_) {
      if (other->in_queue) queued.push_back(other.get());
    }
  }
  admission_context context{request.arrival,           step_time_estimate_s_,
                            config_.max_prefill_chunk, config_.max_num_batched_tokens,
                            config_.max_model_len,     queued};
  return policy_->admission_problem(request, context);
}

submit_result scheduler::submit(request_spec spec, double now) {
  auto request = std::make_shared<request_state>();
  request->handle = next_handle_;
  request->arrival = now;
  request->arrival_order = next_handle_;
  request->seed = spec.seed ? *spec.seed : mix_seed(config_.seed, next_seed_counter_++);
  if (spec.deadline_s) request->absolute_deadline = now + *spec.deadline_s;
  if (spec.timeout_s) request->timeout_at = now + *spec.timeout_s;
  if (!spec.ignore_eos) request->min_tokens_suppressed = config_.eos_token_ids;
  request->min_tokens_suppressed.insert(request->min_tokens_suppressed.end(), spec.stop_token_ids.begin(),
                                        spec.stop_token_ids.end());
  request->spec = std::move(spec);
  submit_result result;
  if (std::string problem = submit_problem(*request, result.error); !problem.empty()) {
    ++metrics_.requests_rejected;
    result.message = std::move(problem);
    return result;
  }
  ++next_handle_;
  request->in_queue = true;
  ++num_queued_;
  request->usage.prompt_tokens = static_cast<int>(request->spec.prompt.size());
  metrics_.prompt_tokens += request->spec.prompt.size();
  request->choices.reserve(static_cast<std::size_t>(request->spec.n));
  add_sequence(*request, 0);
  policy_->on_attach(*request, now);
  result.accepted = true;
  result.handle = request->handle;
  requests_.emplace(request->handle, std::move(request));
  return result;
}

sequence& scheduler::add_sequence(request_state& request, int choice) {
  auto seq = std::make_unique<sequence>();
  seq->id = next_sequence_++;
  seq->request = &request;
  seq->choice = choice;
  seq->seed = choice_seed(request.seed, choice);
  seq->acceptance = acceptance_prior_;
  start_matcher(*seq);
  sequence& ref = *seq;
  ++status_counts_[static_cast<int>(ref.status)];
  sequences_.emplace(ref.id, &ref);
  request.choices.push_back(std::move(seq));
  return ref;
}

void scheduler::leave_queue(request_state& request) {
  if (!request.in_queue) return;
  request.in_queue = false;
  --num_queued_;
}

void scheduler::list_for_release(request_state& request) {
  if (request.release_listed) return;
  request.release_listed = true;
  release_list_.push_back(request.handle);
}

sequence* scheduler::find_sequence(sequence_id id) const {
  const auto it = sequences_.find(id);
  return it == sequences_.end() ? nullptr : it->second;
}

const request_state* scheduler::find_request(request_handle request) const {
  const auto it = requests_.find(request);
  return it == requests_.end() ? nullptr : it->second.get();
}

void scheduler::finish_sequence(sequence& seq, finish_reason reason, double now, scheduler_events& events) {
  if (seq.status == sequence_status::finished) return;
  if (seq.kv_known) {
    pending_frees_.push_back({seq.id, false});
    if (seq.resident()) pending_freed_blocks_ += freeable_blocks(seq);
  }
  transition(seq, &sequence::to_finished);
  request_state& request = *seq.request;
  ++request.finished_choices;
  events.finished.push_back({request.handle, seq.choice, reason, request.usage, request.done()});
  if (request.done()) {
    metrics_.e2e_request_latency_s.observe(now - request.arrival);
    ++metrics_.request_success[finish_reason_name(reason)];
    policy_->on_detach(request);
    leave_queue(request);
    list_for_release(request);
  }
}

void scheduler::cancel_request(request_state& request, double now, scheduler_events& events) {
  request.cancelled = true;
  for (auto& seq : request.choices) finish_sequence(*seq, finish_reason::abort, now, events);
  // Choices that were never forked finish too, so every choice gets its event.
  for (int choice = static_cast<int>(request.choices.size()); choice < request.spec.n; ++choice) {
    ++request.finished_choices;
    events.finished.push_back({request.handle, choice, finish_reason::abort, request.usage, request.done()});
    if (request.done()) {
      metrics_.e2e_request_latency_s.observe(now - request.arrival);
      ++metrics_.request_success[finish_reason_name(finish_reason::abort)];
      policy_->on_detach(request);
      leave_queue(request);
      list_for_release(request);
    }
  }
}

scheduler_events scheduler::cancel(request_handle handle, double now) {
  scheduler_events events;
  const auto it = requests_.find(handle);
  if (it == requests_.end() || it->second->done()) return events;
  cancel_request(*it->second, now, events);
  release_done_requests();
  return events;
}

scheduler_events scheduler::finish(request_handle handle, int choice, finish_reason reason, double now) {
  scheduler_events events;
  const auto it = requests_.find(handle);
  if (it == requests_.end()) return events;
  for (auto& seq : it->second->choices) {
    if (seq->choice == choice) finish_sequence(*seq, reason, now, events);
  }
  release_done_requests();
  return events;
}

void scheduler::release_done_requests() {
  if (plan_) return;  // grants of the step being planned point into requests
  std::erase_if(release_list_, [this](request_handle handle) {
    const auto it = requests_.find(handle);
    if (it == requests_.end()) return true;
    if (it->second->rows_in_flight > 0) return false;  // a running step still points into it
    for (const auto& seq : it->second->choices) {
      --status_counts_[static_cast<int>(seq->status)];
      sequences_.erase(seq->id);
    }
    requests_.erase(it);
    return true;
  });
}

bool scheduler::set_policy(std::string_view name, double now) {
  auto policy = make_policy(name, config_.policies);
  if (!policy) return false;
  set_policy(std::move(policy), now);
  return true;
}

void scheduler::set_policy(std::unique_ptr<scheduling_policy> policy, double now) {
  if (!policy) return;
  policy_ = std::move(policy);
  policy_->set_config(config_.policies);
  for (request_state* request : live_requests()) policy_->on_attach(*request, now);
}

std::string scheduler::set_config(const scheduler_config& config) {
  scheduler_config next = config;
  next.block_size = config_.block_size;  // fixed by the KV pool
  next.num_device_blocks = config_.num_device_blocks;
  next.num_host_blocks = config_.num_host_blocks;
  if (auto problem = validate_config(next); !problem.empty()) return problem;
  config_ = std::move(next);
  policy_->set_config(config_.policies);
  auto& per_position = metrics_.spec_accepted_per_position;  // every position's series exists from the start
  per_position.resize(std::max(per_position.size(), static_cast<std::size_t>(config_.num_speculative_tokens)));
  return {};
}

int scheduler::num_running() const { return status_counts_[static_cast<int>(sequence_status::running)]; }

int scheduler::num_waiting() const { return status_counts_[static_cast<int>(sequence_status::waiting)]; }

int scheduler::num_swapped() const { return status_counts_[static_cast<int>(sequence_status::swapped)]; }

}  // namespace troupe

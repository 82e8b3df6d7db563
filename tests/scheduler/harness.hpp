#pragma once
// Drives a scheduler step by step against a KV manager (the fake or the
// real block manager) and the fake model, checking on every step what must
// always hold: the token budget, the sequence limit, a valid step batch, and
// (with the real manager) its invariants. Records tokens, finishes and
// preemptions per (request, choice).

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <string>

#include "actors/core/scheduler.hpp"
#include "actors/core/step_builder.hpp"
#include "memory/block_manager.hpp"
#include "tests/scheduler/fake_kv.hpp"
#include "tests/scheduler/fake_model.hpp"

namespace troupe::testing {

/// The shape of a test request: `prompt_len` tokens counting up from
/// `first_token`, generating `max_tokens`.
struct spec_shape {
  int prompt_len = 1;
  int max_tokens = 1;
  std::int32_t first_token = 1;
  std::uint64_t seed = 7;
};

/// A request of `shape` that ignores EOS.
inline request_spec make_spec(const spec_shape& shape) {
  request_spec spec;
  spec.prompt.resize(static_cast<std::size_t>(shape.prompt_len));
  std::iota(spec.prompt.begin(), spec.prompt.end(), shape.first_token);
  spec.max_tokens = shape.max_tokens;
  spec.seed = shape.seed;
  spec.ignore_eos = true;
  return spec;
}

/// The scheduler sizes a small test varies.
struct small_sizes {
  int budget = 64;  ///< max_num_batched_tokens
  int max_seqs = 8;
  int chunk = 32;            ///< max_prefill_chunk
  std::int32_t blocks = 64;  ///< device KV blocks
  std::int32_t host_blocks = 32;
};

/// Scheduler knobs for small tests.
inline scheduler_config small_config(const small_sizes& sizes = {}) {
  scheduler_config config;
  config.max_num_batched_tokens = sizes.budget;
  config.max_num_seqs = sizes.max_seqs;
  config.max_prefill_chunk = sizes.chunk;
  config.block_size = 4;
  config.max_model_len = 4096;
  config.num_device_blocks = sizes.blocks;
  config.num_host_blocks = sizes.host_blocks;
  config.admission_watermark = 0;
  config.preemption = preemption_mode::recompute;
  config.preemption_grace_steps = 0;
  return config;
}

/// How a harness runs its scheduler.
struct harness_options {
  std::string policy = "fcfs";
  bool real_kv = false;                   ///< the real block manager instead of the fake
  std::optional<policy_config> policies;  ///< when given, replaces config.policies
};

using choice_key = std::pair<request_handle, int>;

class harness {
 public:
  static constexpr std::int32_t kVocab = 1000;

  explicit harness(scheduler_config config, const harness_options& options = {})
      : config_(config),
        model_(config.num_device_blocks, std::max(config.num_host_blocks, 1), config.block_size, kVocab) {
    if (options.policies) config_.policies = *options.policies;
    sched_ = std::make_unique<scheduler>(config_, make_policy(options.policy));
    if (options.real_kv) {
      auto manager = std::make_unique<block_manager>(kv_manager_config(config_));
      real_ = manager.get();
      kv_ = std::move(manager);
    } else {
      auto fake = std::make_unique<fake_kv>(config.num_device_blocks, config.num_host_blocks, config.block_size);
      fake_ = fake.get();
      kv_ = std::move(fake);
    }
  }

  scheduler& sched() { return *sched_; }
  fake_kv& fake() { return *fake_; }
  block_manager* real() { return real_; }

  request_handle submit(request_spec spec) {
    const submit_result r = sched_->submit(std::move(spec), now);
    EXPECT_TRUE(r.accepted) << r.message;
    live_.insert(r.handle);
    return r.handle;
  }

  /// One step: plan, check, run the fake model, apply the result.
  const scheduled_step& step() {
    steps.push_back(sched_->schedule(now, *kv_));
    const scheduled_step& s = steps.back();
    record(s.events);
    EXPECT_LE(s.num_tokens(), sched_->config().max_num_batched_tokens) << "token budget exceeded in step " << s.id;
    EXPECT_LE(sched_->num_running(), sched_->config().max_num_seqs);
    if (real_) {
      EXPECT_EQ(real_->check_invariants(), "");
    }
    step_batch batch = build_step_batch(s, config_.block_size);
    kv_spec_.block_size = config_.block_size;
    kv_spec_.num_blocks = config_.num_device_blocks;
    EXPECT_EQ(validate_step_batch(batch, kv_spec_), "") << "step " << s.id;
    check_sequences();
    now += step_s;
    if (s.sequences.empty() && !s.copies.empty()) model_.run(s, batch);  // copies alone must run too
    if (!s.sequences.empty()) {
      fill_sampling_rows(batch, s);
      scheduler_events events = sched_->on_step_result(model_.run(s, batch), now);
      EXPECT_EQ(events.error, "");
      record(events);
      check_sequences();
    }
    return s;
  }

  /// Steps until every request finished (at most `limit` steps).
  void run(int limit = 10000) {
    for (int i = 0; i < limit && (sched_->has_unfinished_requests() || sched_->has_pending_kv_updates()); ++i) step();
    EXPECT_FALSE(sched_->has_unfinished_requests()) << "requests left after " << limit << " steps";
  }

  /// Every sequence of the live requests submitted here keeps its status's invariants.
  void check_sequences() {
    for (auto it = live_.begin(); it != live_.end();) {
      const request_state* request = sched_->find_request(*it);
      if (request == nullptr) {
        it = live_.erase(it);
        continue;
      }
      for (const auto& seq : request->choices)
        EXPECT_EQ(seq->invariant_problem(config_.block_size), "") << "request " << *it << " choice " << seq->choice;
      ++it;
    }
  }

  void record(const scheduler_events& events) {
    for (const auto& t : events.tokens) outputs[{t.request, t.choice}].push_back(t.sample.token);
    for (const auto& f : events.finished) finished[{f.request, f.choice}] = f;
    for (const auto& p : events.preempted) preempted.push_back(p);
  }

  std::vector<std::int32_t> output(request_handle request, int choice = 0) const {
    const auto it = outputs.find({request, choice});
    return it == outputs.end() ? std::vector<std::int32_t>{} : it->second;
  }
  std::optional<finish_reason> reason(request_handle request, int choice = 0) const {
    const auto it = finished.find({request, choice});
    if (it == finished.end()) return std::nullopt;
    return it->second.reason;
  }

  /// The entries of `step` for `request` (any choice).
  static std::vector<const scheduled_sequence*> entries(const scheduled_step& step, request_handle request) {
    std::vector<const scheduled_sequence*> found;
    for (const auto& s : step.sequences) {
      if (s.request == request) found.push_back(&s);
    }
    return found;
  }

  double now = 0;
  double step_s = 0.01;
  std::vector<scheduled_step> steps;
  std::map<choice_key, std::vector<std::int32_t>> outputs;
  std::map<choice_key, finish_event> finished;
  std::vector<preempt_event> preempted;

 private:
  scheduler_config config_;
  kv_cache_spec kv_spec_;
  std::unique_ptr<scheduler> sched_;
  std::unique_ptr<kv_planner> kv_;
  fake_kv* fake_ = nullptr;
  block_manager* real_ = nullptr;
  fake_model model_;
  std::set<request_handle> live_;  ///< submitted here and not yet released
};

}  // namespace troupe::testing

#pragma once
// Drives a scheduler with speculative decoding against the real block
// manager and the fake model: after each take_step a fake proposer fills the
// draft slots through set_drafts; the fake model verifies greedily. Up to
// `depth` results may be outstanding while the next step is planned. On
// every step it checks the manager's invariants, the token budget, the
// batch, the verify rows' hooks, and that every prefix-cache block holds
// what the model wrote there (never a rejected draft, which the fake model
// poisons).

#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>

#include "actors/core/draft_tree.hpp"
#include "actors/core/scheduler.hpp"
#include "actors/core/step_builder.hpp"
#include "memory/block_manager.hpp"
#include "tests/scheduler/fake_model.hpp"
#include "tests/scheduler/harness.hpp"

namespace troupe::testing {

/// Scheduler knobs for speculation tests (small_config's, 16 sequences): k_max `k`, adaptive off.
inline scheduler_config spec_config(int k, std::int32_t blocks = 64, std::int32_t host_blocks = 32, int budget = 64,
                                    int chunk = 16) {
  scheduler_config config =
      small_config({.budget = budget, .max_seqs = 16, .chunk = chunk, .blocks = blocks, .host_blocks = host_blocks});
  config.num_speculative_tokens = k;
  config.speculative_adaptive = false;
  config.speculative_max_batch = 64;
  return config;
}

/// How a fake proposer's drafts relate to what the fake model will sample.
enum class proposer_kind {
  right,         ///< every draft is the model's next token
  wrong,         ///< no draft is
  right_prefix,  ///< a random number of right drafts, then wrong ones
  short_right,   ///< right, but a random number of drafts (0..slots)
  tree,          ///< a tree of tree_width branches: one random branch right for a random length, the others wrong
};

/// Proposes drafts for a scheduled sequence from the scheduler's state.
class fake_proposer {
 public:
  fake_proposer(proposer_kind kind, std::int32_t vocab, std::uint32_t seed = 1)
      : kind_(kind), vocab_(vocab), rng_(seed) {}

  /// When set: what the model draws at output position `index` from the
  /// unconstrained token (a constrained request's mask applied).
  std::function<std::int32_t(std::size_t index, std::int32_t token)> constrain;

  /// A tree (proposer_kind::tree): branch b of ceil(slots / width) drafts is
  /// the right one for a random number of tokens, then wrong; the others
  /// start with a wrong token of their own.
  draft_tree propose_tree(const scheduler& sched, const scheduled_sequence& scheduled) {
    const request_state& request = *sched.find_request(scheduled.request);
    const sequence& seq = *request.choices.at(static_cast<std::size_t>(scheduled.choice));
    const std::int32_t width = std::max(1, scheduled.tree_width);
    const std::int32_t depth = (scheduled.draft_slots + width - 1) / width;
    const std::int32_t right_branch = pick(0, width - 1), right = pick(0, depth);
    std::vector<std::vector<std::int32_t>> branches;
    for (std::int32_t b = 0; b < width; ++b) {
      std::vector<std::int32_t> context = request.spec.prompt, branch;
      context.insert(context.end(), seq.outputs.begin(), seq.outputs.end());
      for (std::int32_t i = 0; i < depth; ++i) {
        const std::int32_t next =
            fake_next_token(seq.seed, seq.outputs.size() + static_cast<std::size_t>(i), context, vocab_);
        const bool is_right = b == right_branch && i < right;
        branch.push_back(is_right ? next : (next + 1 + (i == 0 ? b : 0)) % vocab_);
        context.push_back(branch.back());
      }
      branches.push_back(std::move(branch));
    }
    return merge_branches(branches, scheduled.draft_slots);
  }

  proposer_kind kind() const { return kind_; }

  std::vector<std::int32_t> propose(const scheduler& sched, const scheduled_sequence& scheduled) {
    const request_state& request = *sched.find_request(scheduled.request);
    const sequence& seq = *request.choices.at(static_cast<std::size_t>(scheduled.choice));
    std::vector<std::int32_t> context = request.spec.prompt;
    context.insert(context.end(), seq.outputs.begin(), seq.outputs.end());
    std::int32_t count = scheduled.draft_slots, right = count;
    if (kind_ == proposer_kind::wrong) right = 0;
    if (kind_ == proposer_kind::right_prefix) right = pick(0, count);
    if (kind_ == proposer_kind::short_right) count = right = pick(0, count);
    std::vector<std::int32_t> drafts;
    for (std::int32_t i = 0; i < count; ++i) {
      const std::int32_t next =
          fake_next_token(seq.seed, seq.outputs.size() + static_cast<std::size_t>(i), context, vocab_);
      const std::int32_t model_token = constrain ? constrain(seq.outputs.size() + i, next) : next;
      drafts.push_back(i < right ? model_token : (model_token + 1) % vocab_);
      context.push_back(drafts.back());
    }
    return drafts;
  }

 private:
  std::int32_t pick(std::int32_t lo, std::int32_t hi) {
    return std::uniform_int_distribution<std::int32_t>(lo, hi)(rng_);
  }

  proposer_kind kind_;
  std::int32_t vocab_;
  std::mt19937 rng_;
};

/// Forwards to a block manager and keeps every request.
class logging_planner final : public kv_planner {
 public:
  explicit logging_planner(block_manager& kv) : kv_(kv) {}
  kv_reply plan(const kv_request& request) override {
    requests.push_back(request);
    return kv_.plan(request);
  }
  std::vector<kv_request> requests;

 private:
  block_manager& kv_;
};

class spec_driver {
 public:
  /// Without a proposer, draft slots stay empty (and with num_speculative_tokens 0 there are none).
  spec_driver(const scheduler_config& config, std::optional<fake_proposer> proposer, int depth = 0,
              std::int32_t vocab = 64)
      : config_(config),
        sched_(config, make_policy("fcfs")),
        kv_(kv_manager_config(config)),
        log_(kv_),
        model_(config.num_device_blocks, std::max(config.num_host_blocks, 1), config.block_size, vocab),
        proposer_(std::move(proposer)),
        depth_(depth) {}

  scheduler& sched() { return sched_; }
  block_manager& kv() { return kv_; }
  /// Every KV request sent so far.
  const std::vector<kv_request>& kv_requests() const { return log_.requests; }

  request_handle submit(request_spec spec) {
    const submit_result r = sched_.submit(std::move(spec), now);
    EXPECT_TRUE(r.accepted) << r.message;
    handles_.push_back(r.handle);
    return r.handle;
  }

  /// The sequence of a live request's choice (nullptr once released).
  const sequence* find(request_handle handle, int choice = 0) const {
    const request_state* request = sched_.find_request(handle);
    if (request == nullptr || static_cast<std::size_t>(choice) >= request->choices.size()) return nullptr;
    return request->choices[static_cast<std::size_t>(choice)].get();
  }

  /// Plans a step and fills its draft slots.
  scheduled_step plan() {
    const std::vector<const sequence*> unsettled = with_unsettled_slots();
    scheduled_step s = sched_.schedule(now, log_);
    for (const sequence* seq : unsettled) preempted_with_unsettled_slots += !seq->resident();
    record(s.events);
    EXPECT_EQ(kv_.check_invariants(), "");
    for (std::size_t i = 0; proposer_ && i < s.sequences.size(); ++i) {
      if (s.sequences[i].draft_slots == 0) continue;
      if (proposer_->kind() == proposer_kind::tree) {
        draft_tree tree = proposer_->propose_tree(sched_, s.sequences[i]);
        EXPECT_EQ(sched_.set_drafts(s, i, std::move(tree.drafts), {}, std::move(tree.parents)), "");
        continue;
      }
      EXPECT_EQ(sched_.set_drafts(s, i, proposer_->propose(sched_, s.sequences[i])), "");
    }
    EXPECT_LE(s.num_tokens(), sched_.config().max_num_batched_tokens) << "token budget exceeded in step " << s.id;
    return s;
  }

  /// Runs a planned step on the fake model (copies alone too).
  step_result execute(const scheduled_step& s) {
    step_batch batch = build_step_batch(s, config_.block_size);
    fill_sampling_rows(batch, s);
    kv_cache_spec spec;
    spec.block_size = config_.block_size;
    spec.num_blocks = config_.num_device_blocks;
    EXPECT_EQ(validate_step_batch(batch, spec), "") << "step " << s.id;
    check_verify_rows(batch);
    step_result result = model_.run(s, batch);
    check_cache();
    return result;
  }

  void deliver(const step_result& result) { record(sched_.on_step_result(result, now)); }

  /// One step: plan, run, and apply the results older than `depth` steps.
  void step() {
    const scheduled_step s = plan();
    ++steps;
    now += 0.01;
    if (!s.empty()) {
      step_result result = execute(s);
      if (!s.sequences.empty()) in_flight_.push_back(std::move(result));
    }
    if (s.sequences.empty() && !in_flight_.empty()) deliver_oldest();  // nothing runs without a result
    while (static_cast<int>(in_flight_.size()) > depth_) deliver_oldest();
  }

  void deliver_oldest() {
    deliver(in_flight_.front());
    in_flight_.pop_front();
  }

  /// Steps until every request finished; then checks the pools are whole again.
  void run(int limit = 20000) {
    for (int i = 0;
         i < limit && (sched_.has_unfinished_requests() || sched_.has_pending_kv_updates() || !in_flight_.empty()); ++i)
      step();
    EXPECT_FALSE(sched_.has_unfinished_requests()) << "requests left after " << limit << " steps";
    expect_empty_pools();
  }

  void expect_empty_pools() {
    EXPECT_EQ(kv_.num_sequences(), 0u);
    EXPECT_EQ(kv_.usage().device_free_blocks, config_.num_device_blocks) << "device blocks leaked";
    EXPECT_EQ(kv_.usage().host_free_blocks, config_.num_host_blocks) << "host blocks leaked";
  }

  void record(const scheduler_events& events) {
    EXPECT_EQ(events.error, "");
    for (const auto& t : events.tokens) outputs[{t.request, t.choice}].push_back(t.sample.token);
    for (const auto& f : events.finished) reasons[{f.request, f.choice}] = f.reason;
    preemptions += static_cast<int>(events.preempted.size());
  }

  /// The tokens a choice got so far.
  std::vector<std::int32_t> output(request_handle request, int choice = 0) const {
    const auto it = outputs.find({request, choice});
    return it == outputs.end() ? std::vector<std::int32_t>{} : it->second;
  }
  /// Why a choice finished, if it did.
  std::optional<finish_reason> reason(request_handle request, int choice = 0) const {
    const auto it = reasons.find({request, choice});
    if (it == reasons.end()) return std::nullopt;
    return it->second;
  }

  double now = 0;
  int steps = 0;
  int preemptions = 0;
  int preempted_with_unsettled_slots = 0;  ///< preempted or finished while a speculative step was in flight
  std::map<std::pair<request_handle, int>, std::vector<std::int32_t>> outputs;
  std::map<std::pair<request_handle, int>, finish_reason> reasons;

 private:
  std::vector<const sequence*> with_unsettled_slots() const {
    std::vector<const sequence*> found;
    for (request_handle handle : handles_) {
      const request_state* request = sched_.find_request(handle);
      if (request == nullptr) continue;
      for (const auto& seq : request->choices) {
        if (seq->unsettled_slots > 0) found.push_back(seq.get());
      }
    }
    return found;
  }

  /// Row i of a verify group samples token base + i after the outputs and
  /// d1..di (a tree's: base + depth, after its path).
  void check_verify_rows(const step_batch& batch) const {
    for (const verify_group& group : batch.verify) {
      if (!group.parents.empty()) {
        const std::span<const sampling_row> rows(batch.sampling.data() + group.first_row, group.drafts.size() + 1);
        EXPECT_EQ(verify_rows_problem(rows, group.drafts, group.parents), "");
        continue;
      }
      const sampling_row& first = batch.sampling.at(static_cast<std::size_t>(group.first_row));
      for (std::size_t i = 1; i <= group.drafts.size(); ++i) {
        const sampling_row& row = batch.sampling.at(static_cast<std::size_t>(group.first_row) + i);
        EXPECT_EQ(row.token_index, first.token_index + i);
        EXPECT_EQ(row.seed, first.seed);
        ASSERT_EQ(row.output_tokens.size(), first.output_tokens.size() + i);
        EXPECT_TRUE(std::equal(first.output_tokens.begin(), first.output_tokens.end(), row.output_tokens.begin()));
        EXPECT_TRUE(std::equal(group.drafts.begin(), group.drafts.begin() + static_cast<std::ptrdiff_t>(i),
                               row.output_tokens.begin() + static_cast<std::ptrdiff_t>(first.output_tokens.size())));
      }
    }
  }

  /// Every cached block holds the tokens it is indexed with (so no rejected draft).
  void check_cache() const {
    const device_block_pool& pool = kv_.device_pool();
    for (std::int32_t b = 0; b < pool.num_blocks(); ++b) {
      const auto tokens = pool.cached_tokens(b);
      for (std::size_t i = 0; i < tokens.size(); ++i)
        ASSERT_EQ(model_.device_slot(static_cast<std::int64_t>(b) * config_.block_size + static_cast<std::int64_t>(i)),
                  tokens[i])
            << "cached block " << b << " slot " << i;
    }
  }

  scheduler_config config_;
  scheduler sched_;
  block_manager kv_;
  logging_planner log_;
  fake_model model_;
  std::optional<fake_proposer> proposer_;
  int depth_;
  std::deque<step_result> in_flight_;
  std::vector<request_handle> handles_;
};

}  // namespace troupe::testing

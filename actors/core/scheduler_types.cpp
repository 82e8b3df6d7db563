#include "actors/core/scheduler_types.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "memory/kv_pool_sizing.hpp"

namespace troupe {

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  std::uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <typename T>
void move_append(std::vector<T>& to, std::vector<T>& from) {
  to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
}

}  // namespace

policy_config::policy_config() : policy_config(engine_config{}) {}

policy_config::policy_config(const engine_config& engine)
    : mlfq_levels(engine.mlfq_levels),
      mlfq_base_quantum(engine.mlfq_quantum),
      mlfq_quantum_growth(engine.mlfq_quantum_growth),
      mlfq_entry_prompt_tokens(engine.mlfq_entry_prompt_tokens),
      mlfq_promote_after_s(engine.mlfq_promote_after_s),
      fair_prompt_weight(engine.fair_prompt_weight),
      fair_output_weight(engine.fair_output_weight),
      fair_idle_tenants(static_cast<std::size_t>(engine.fair_idle_tenants)) {}

scheduler_config::scheduler_config() : scheduler_config(engine_config{}) {}

scheduler_config::scheduler_config(const engine_config& engine)
    : max_num_batched_tokens(engine.max_num_batched_tokens),
      max_num_seqs(engine.max_num_seqs),
      max_prefill_chunk(engine.max_prefill_chunk),
      block_size(engine.block_size),
      max_waiting_requests(engine.max_waiting_requests),
      policies(engine),
      swap_min_tokens(engine.swap_min_tokens),
      preemption_grace_steps(engine.preemption_grace_steps),
      admission_watermark(engine.admission_watermark),
      enable_prefix_caching(engine.enable_prefix_caching),
      num_speculative_tokens(engine.num_speculative_tokens),
      speculative_adaptive(engine.speculative_adaptive),
      speculative_turn_down(engine.speculative_turn_down),
      speculative_max_batch(engine.speculative_max_batch),
      speculative_tree_width(engine.speculative_tree_width) {
  const auto mode = parse_preemption_mode(engine.preemption_mode);
  if (!mode) throw std::runtime_error("knob 'preemption_mode': unknown mode '" + engine.preemption_mode + "'");
  preemption = *mode;
  const auto ahead = parse_draft_ahead_mode(engine.speculative_draft_ahead);
  if (!ahead)
    throw std::runtime_error("knob 'speculative_draft_ahead': unknown mode '" + engine.speculative_draft_ahead + "'");
  speculative_draft_ahead = *ahead;
  if (engine.speculative == "ngram")
    prompt_lookup = {.max_ngram = engine.prompt_lookup_max, .min_ngram = engine.prompt_lookup_min};
}

block_manager_config kv_manager_config(const scheduler_config& config) {
  block_manager_config kv;
  kv.block_size = config.block_size;
  kv.num_device_blocks = config.num_device_blocks;
  kv.num_host_blocks = config.num_host_blocks;
  kv.enable_prefix_caching = config.enable_prefix_caching;
  return kv;
}

const char* preemption_mode_name(preemption_mode mode) {
  switch (mode) {
    case preemption_mode::swap:
      return "swap";
    case preemption_mode::recompute:
      return "recompute";
    case preemption_mode::automatic:
      return "auto";
  }
  return "unknown";
}

std::optional<preemption_mode> parse_preemption_mode(std::string_view name) {
  if (name == "swap") return preemption_mode::swap;
  if (name == "recompute") return preemption_mode::recompute;
  if (name == "auto") return preemption_mode::automatic;
  return std::nullopt;
}

const char* preemption_kind_name(preemption_kind kind) { return kind == preemption_kind::swap ? "swap" : "recompute"; }

namespace {

// The one list of draft_ahead_mode names, read both ways.
constexpr std::pair<draft_ahead_mode, const char*> draft_ahead_names[] = {
    {draft_ahead_mode::automatic, "auto"}, {draft_ahead_mode::on, "on"}, {draft_ahead_mode::off, "off"}};

}  // namespace

const char* draft_ahead_mode_name(draft_ahead_mode mode) {
  for (const auto& [value, name] : draft_ahead_names)
    if (value == mode) return name;
  return "unknown";
}

std::optional<draft_ahead_mode> parse_draft_ahead_mode(std::string_view text) {
  for (const auto& [value, name] : draft_ahead_names)
    if (text == name) return value;
  return std::nullopt;
}

request_spec make_request_spec(const generation_request& request, std::vector<std::int32_t> prompt_ids) {
  request_spec spec;
  spec.request_id = request.request_id;
  spec.prompt = std::move(prompt_ids);
  spec.sampling = request.sampling;
  spec.seed = request.seed;
  spec.max_tokens = request.max_tokens;
  spec.min_tokens = request.min_tokens;
  spec.ignore_eos = request.ignore_eos;
  spec.speculate = request.speculative;
  spec.stop_token_ids = request.stop_token_ids;
  spec.n = request.n;
  spec.priority = request.priority;
  if (request.deadline_ms) spec.deadline_s = *request.deadline_ms / 1000.0;
  spec.user = request.user;
  spec.cache_salt = request.cache_salt;
  spec.timeout_s = request.timeout_s;
  return spec;
}

std::uint64_t choice_seed(std::uint64_t request_seed, int choice) {
  if (choice == 0) return request_seed;
  return splitmix64(request_seed + splitmix64(static_cast<std::uint64_t>(choice)));
}

void scheduler_events::append(scheduler_events&& other) {
  move_append(tokens, other.tokens);
  move_append(finished, other.finished);
  move_append(preempted, other.preempted);
  if (error.empty()) error = std::move(other.error);
}

std::size_t workspace_bound::bytes(int max_num_batched_tokens, int max_num_seqs) const {
  const auto tokens = static_cast<std::size_t>(std::max(0, max_num_batched_tokens));
  const auto rows = std::min(tokens, static_cast<std::size_t>(std::max(0, max_num_seqs)));
  return tokens * per_token + rows * per_row;
}

std::string workspace_bound::problem(int max_num_batched_tokens, int max_num_seqs) const {
  const std::size_t needed = bytes(max_num_batched_tokens, max_num_seqs);
  if (limit == 0 || needed <= limit) return {};
  return "max_num_batched_tokens " + std::to_string(max_num_batched_tokens) + " and max_num_seqs " +
         std::to_string(max_num_seqs) + " need a step workspace of " + format_bytes(static_cast<std::int64_t>(needed)) +
         ", more than the " + format_bytes(static_cast<std::int64_t>(limit)) +
         " fixed at start (knob max_step_workspace_bytes)";
}

std::int32_t scheduled_step::num_tokens() const {
  std::int32_t total = 0;
  for (const auto& s : sequences) total += static_cast<std::int32_t>(s.tokens.size() + s.drafts.size());
  return total;
}

}  // namespace troupe

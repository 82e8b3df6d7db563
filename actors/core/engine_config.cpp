// engine_config (api/troupe/engine.hpp) and the knob registry: one table
// says which field holds which engine knob, and both reading a config_store
// and checking a config go through it. Compiled into the cores' library, the
// lowest that knows engine_config, so the cores (and their tests and the
// simulator) build their own configs from it the way the engine does,
// without linking the engine facade.

#include <sstream>
#include <utility>
#include <variant>

#include "config/config_store.hpp"
#include "troupe/engine.hpp"

namespace troupe {

namespace {

using engine_field = std::variant<std::string engine_config::*, int engine_config::*, std::int64_t engine_config::*,
                                  double engine_config::*, bool engine_config::*>;

// Every engine knob and the field that holds it.
const std::pair<const char*, engine_field> engine_fields[] = {
    {"model", &engine_config::model_dir},
    {"served_model_name", &engine_config::served_model_name},
    {"device", &engine_config::device},
    {"threads", &engine_config::threads},
    {"max_num_batched_tokens", &engine_config::max_num_batched_tokens},
    {"max_num_seqs", &engine_config::max_num_seqs},
    {"max_prefill_chunk", &engine_config::max_prefill_chunk},
    {"max_step_workspace_bytes", &engine_config::max_step_workspace_bytes},
    {"block_size", &engine_config::block_size},
    {"kv_cache_bytes", &engine_config::kv_cache_bytes},
    {"kv_cache_memory_fraction", &engine_config::kv_cache_memory_fraction},
    {"swap_space_bytes", &engine_config::swap_space_bytes},
    {"swap_space_memory_fraction", &engine_config::swap_space_memory_fraction},
    {"max_model_len", &engine_config::max_model_len},
    {"policy", &engine_config::policy},
    {"mlfq_quantum", &engine_config::mlfq_quantum},
    {"mlfq_levels", &engine_config::mlfq_levels},
    {"mlfq_quantum_growth", &engine_config::mlfq_quantum_growth},
    {"mlfq_entry_prompt_tokens", &engine_config::mlfq_entry_prompt_tokens},
    {"mlfq_promote_after", &engine_config::mlfq_promote_after_s},
    {"fair_prompt_weight", &engine_config::fair_prompt_weight},
    {"fair_output_weight", &engine_config::fair_output_weight},
    {"fair_idle_tenants", &engine_config::fair_idle_tenants},
    {"swap_min_tokens", &engine_config::swap_min_tokens},
    {"preemption_grace_steps", &engine_config::preemption_grace_steps},
    {"admission_watermark", &engine_config::admission_watermark},
    {"preemption_mode", &engine_config::preemption_mode},
    {"enable_prefix_caching", &engine_config::enable_prefix_caching},
    {"max_waiting_requests", &engine_config::max_waiting_requests},
    {"max_pending_prompts", &engine_config::max_pending_prompts},
    {"max_pending_prompts_per_connection", &engine_config::max_pending_prompts_per_connection},
    {"max_n", &engine_config::max_n},
    {"max_stop_strings", &engine_config::max_stop_strings},
    {"max_stop_string_bytes", &engine_config::max_stop_string_bytes},
    {"max_logit_bias", &engine_config::max_logit_bias},
    {"max_top_logprobs", &engine_config::max_top_logprobs},
    {"max_request_output_tokens", &engine_config::max_request_output_tokens},
    {"min_request_priority", &engine_config::min_request_priority},
    {"min_request_deadline_ms", &engine_config::min_request_deadline_ms},
    {"tokenizer_workers", &engine_config::tokenizer_workers},
    {"request_timeout", &engine_config::request_timeout_s},
    {"step_timeout", &engine_config::step_timeout_s},
    {"batch_invariant", &engine_config::batch_invariant},
    {"tool_call_parser", &engine_config::tool_call_parser},
    {"quantization", &engine_config::quantization},
    {"lm_head_quantization", &engine_config::lm_head_quantization},
    {"speculative", &engine_config::speculative},
    {"draft_model", &engine_config::draft_model},
    {"draft_quantization", &engine_config::draft_quantization},
    {"draft_vocab_size", &engine_config::draft_vocab_size},
    {"speculative_skip_layers", &engine_config::speculative_skip_layers},
    {"draft_threads", &engine_config::draft_threads},
    {"speculative_draft_ahead", &engine_config::speculative_draft_ahead},
    {"prompt_lookup_max", &engine_config::prompt_lookup_max},
    {"prompt_lookup_min", &engine_config::prompt_lookup_min},
    {"num_speculative_tokens", &engine_config::num_speculative_tokens},
    {"speculative_adaptive", &engine_config::speculative_adaptive},
    {"speculative_turn_down", &engine_config::speculative_turn_down},
    {"speculative_max_batch", &engine_config::speculative_max_batch},
    {"speculative_tree_width", &engine_config::speculative_tree_width},
    {"test_fail_executor_after_steps", &engine_config::test_fail_executor_after_steps},
    {"test_executor_fault", &engine_config::test_executor_fault},
    {"test_tokenizer_fault_marker", &engine_config::test_tokenizer_fault_marker},
    {"test_tokenizer_fault", &engine_config::test_tokenizer_fault}};

void read(const config_store& knobs, const char* name, std::string& field) { field = knobs.get_text(name); }
void read(const config_store& knobs, const char* name, int& field) { field = static_cast<int>(knobs.get_int(name)); }
void read(const config_store& knobs, const char* name, std::int64_t& field) { field = knobs.get_int(name); }
void read(const config_store& knobs, const char* name, double& field) { field = knobs.get_real(name); }
void read(const config_store& knobs, const char* name, bool& field) { field = knobs.get_bool(name); }

// A field's value as a config file would hold it (reals at full precision).
std::string as_text(const std::string& value) { return value; }
std::string as_text(bool value) { return value ? "true" : "false"; }
std::string as_text(double value) {
  std::ostringstream out;
  out.precision(17);
  out << value;
  return out.str();
}
template <typename Integer>
std::string as_text(Integer value) {
  return std::to_string(value);
}

}  // namespace

engine_config::engine_config() : engine_config(knob_defaults()) {}

engine_config::engine_config(const config_store& knobs) {
  for (const auto& [name, field] : engine_fields)
    std::visit([&, name = name](auto member) { read(knobs, name, this->*member); }, field);
}

std::string engine_config::problem() const {
  const config_store& knobs = knob_defaults();
  for (const auto& [name, field] : engine_fields) {
    std::string problem =
        std::visit([&, name = name](auto member) { return knobs.problem(name, as_text(this->*member)); }, field);
    if (!problem.empty()) return problem;
  }
  return {};
}

}  // namespace troupe

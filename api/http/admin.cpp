#include "api/http/admin.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value_from.hpp>

#include "api/http/api_error.hpp"
#include "config/config_store.hpp"

namespace troupe::api {

namespace {

/// The engine's live knobs: what PATCH /admin/config accepts (the registry
/// refuses the others with source runtime).
std::vector<knob_spec> live_knobs() {
  std::vector<knob_spec> live;
  for (knob_spec& knob : engine_knobs()) {
    if (knob.live) live.push_back(std::move(knob));
  }
  return live;
}

// What the console needs to draw a knob's input: its help, unit, range and choices.
boost::json::object knob_json(const knob_spec& knob) {
  boost::json::object out{{"help", knob.help}};
  if (!knob.unit.empty()) out["unit"] = knob.unit;
  if (knob.min) out["min"] = *knob.min;
  if (knob.max) out["max"] = *knob.max;
  if (!knob.choices.empty()) out["choices"] = boost::json::value_from(knob.choices);
  if (knob.kind == knob_kind::boolean) out["choices"] = {"true", "false"};  // the console's select
  return out;
}

std::string scalar_text(const std::string& name, const boost::json::value& value) {
  if (value.is_string()) return std::string(value.as_string());
  if (value.is_number() || value.is_bool()) return boost::json::serialize(value);
  throw invalid_field(name, "setting '" + name + "' must be a string, number or boolean", "invalid_setting");
}

}  // namespace

boost::json::object admin_config_json(const engine_stats& stats) {
  const live_settings& s = stats.settings;
  boost::json::array live;
  boost::json::object knobs;
  for (const knob_spec& knob : live_knobs()) {
    live.emplace_back(knob.name);
    knobs[knob.name] = knob_json(knob);
  }
  boost::json::object preemptions;
  for (const auto& [kind, count] : stats.preemptions) preemptions[kind] = count;
  return {
      {"settings",
       {{"policy", s.policy},
        {"preemption_mode", s.preemption_mode},
        {"max_num_batched_tokens", s.max_num_batched_tokens},
        {"max_num_seqs", s.max_num_seqs},
        {"max_prefill_chunk", s.max_prefill_chunk},
        {"max_waiting_requests", s.max_waiting_requests},
        {"mlfq_quantum", s.mlfq_quantum},
        {"num_speculative_tokens", s.num_speculative_tokens},
        {"speculative_adaptive", s.speculative_adaptive},
        {"speculative_max_batch", s.speculative_max_batch}}},
      {"live_settings", std::move(live)},
      {"knobs", std::move(knobs)},
      {"stats",
       {{"healthy", stats.healthy},
        {"health_detail", stats.health_detail},
        {"num_requests_running", stats.num_requests_running},
        {"num_requests_waiting", stats.num_requests_waiting},
        {"num_requests_swapped", stats.num_requests_swapped},
        {"kv_cache_usage", stats.kv_cache_usage},
        {"host_kv_cache_usage", stats.host_kv_cache_usage},
        {"kv_blocks_total", stats.kv_blocks_total},
        {"prompt_tokens", stats.prompt_tokens},
        {"generation_tokens", stats.generation_tokens},
        {"steps", stats.steps},
        {"preemptions", std::move(preemptions)}}},
  };
}

settings_change parse_settings_change(const boost::json::object& body) {
  config_store store(engine_knobs());
  for (const auto& [key, value] : body) {
    const std::string name(key);
    try {
      store.set(name, scalar_text(name, value), config_source::runtime);
    } catch (const config_error& error) {
      throw invalid_field(name, error.what(), "invalid_setting");
    }
  }
  settings_change change;
  const auto given = [&](const char* name) { return body.contains(name); };
  if (given("policy")) change.policy = store.get_text("policy");
  if (given("preemption_mode")) change.preemption_mode = store.get_text("preemption_mode");
  if (given("max_num_batched_tokens"))
    change.max_num_batched_tokens = static_cast<int>(store.get_int("max_num_batched_tokens"));
  if (given("max_num_seqs")) change.max_num_seqs = static_cast<int>(store.get_int("max_num_seqs"));
  if (given("max_prefill_chunk")) change.max_prefill_chunk = static_cast<int>(store.get_int("max_prefill_chunk"));
  if (given("max_waiting_requests"))
    change.max_waiting_requests = static_cast<int>(store.get_int("max_waiting_requests"));
  if (given("mlfq_quantum")) change.mlfq_quantum = static_cast<int>(store.get_int("mlfq_quantum"));
  if (given("num_speculative_tokens"))
    change.num_speculative_tokens = static_cast<int>(store.get_int("num_speculative_tokens"));
  if (given("speculative_adaptive")) change.speculative_adaptive = store.get_bool("speculative_adaptive");
  if (given("speculative_max_batch"))
    change.speculative_max_batch = static_cast<int>(store.get_int("speculative_max_batch"));
  return change;
}

}  // namespace troupe::api

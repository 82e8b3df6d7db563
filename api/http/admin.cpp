// The admin API's view of the knobs: every knob with its registry entry and
// current value, the one table between live knobs and the live_settings /
// settings_change fields, and validation of changes.

#include "api/http/admin.hpp"

#include <algorithm>
#include <boost/json/serialize.hpp>
#include <boost/json/value_from.hpp>
#include <charconv>
#include <cstdlib>
#include <variant>

#include "api/http/admin_access.hpp"
#include "api/http/api_error.hpp"

namespace troupe::api {

namespace {

/// A live knob and the fields that carry it.
template <typename T>
struct live_field {
  const char* name;
  T live_settings::*value;
  std::optional<T> settings_change::*change;
};

using any_live_field = std::variant<live_field<std::string>, live_field<int>, live_field<std::int64_t>,
                                    live_field<double>, live_field<bool>>;

// Every live knob, in registry order: the one place a live knob meets its fields.
const any_live_field live_fields[] = {
    live_field<int>{"max_num_batched_tokens", &live_settings::max_num_batched_tokens,
                    &settings_change::max_num_batched_tokens},
    live_field<int>{"max_num_seqs", &live_settings::max_num_seqs, &settings_change::max_num_seqs},
    live_field<int>{"max_prefill_chunk", &live_settings::max_prefill_chunk, &settings_change::max_prefill_chunk},
    live_field<std::string>{"policy", &live_settings::policy, &settings_change::policy},
    live_field<int>{"mlfq_quantum", &live_settings::mlfq_quantum, &settings_change::mlfq_quantum},
    live_field<int>{"mlfq_levels", &live_settings::mlfq_levels, &settings_change::mlfq_levels},
    live_field<int>{"mlfq_quantum_growth", &live_settings::mlfq_quantum_growth, &settings_change::mlfq_quantum_growth},
    live_field<int>{"mlfq_entry_prompt_tokens", &live_settings::mlfq_entry_prompt_tokens,
                    &settings_change::mlfq_entry_prompt_tokens},
    live_field<double>{"mlfq_promote_after", &live_settings::mlfq_promote_after, &settings_change::mlfq_promote_after},
    live_field<double>{"fair_prompt_weight", &live_settings::fair_prompt_weight, &settings_change::fair_prompt_weight},
    live_field<double>{"fair_output_weight", &live_settings::fair_output_weight, &settings_change::fair_output_weight},
    live_field<int>{"fair_idle_tenants", &live_settings::fair_idle_tenants, &settings_change::fair_idle_tenants},
    live_field<std::string>{"preemption_mode", &live_settings::preemption_mode, &settings_change::preemption_mode},
    live_field<int>{"swap_min_tokens", &live_settings::swap_min_tokens, &settings_change::swap_min_tokens},
    live_field<int>{"preemption_grace_steps", &live_settings::preemption_grace_steps,
                    &settings_change::preemption_grace_steps},
    live_field<double>{"admission_watermark", &live_settings::admission_watermark,
                       &settings_change::admission_watermark},
    live_field<int>{"max_waiting_requests", &live_settings::max_waiting_requests,
                    &settings_change::max_waiting_requests},
    live_field<int>{"num_speculative_tokens", &live_settings::num_speculative_tokens,
                    &settings_change::num_speculative_tokens},
    live_field<bool>{"speculative_adaptive", &live_settings::speculative_adaptive,
                     &settings_change::speculative_adaptive},
    live_field<bool>{"speculative_turn_down", &live_settings::speculative_turn_down,
                     &settings_change::speculative_turn_down},
    live_field<int>{"speculative_max_batch", &live_settings::speculative_max_batch,
                    &settings_change::speculative_max_batch},
    live_field<int>{"speculative_tree_width", &live_settings::speculative_tree_width,
                    &settings_change::speculative_tree_width},
    live_field<std::string>{"speculative_draft_ahead", &live_settings::speculative_draft_ahead,
                            &settings_change::speculative_draft_ahead},
    live_field<int>{"max_n", &live_settings::max_n, &settings_change::max_n},
    live_field<int>{"max_stop_strings", &live_settings::max_stop_strings, &settings_change::max_stop_strings},
    live_field<int>{"max_stop_string_bytes", &live_settings::max_stop_string_bytes,
                    &settings_change::max_stop_string_bytes},
    live_field<int>{"max_logit_bias", &live_settings::max_logit_bias, &settings_change::max_logit_bias},
    live_field<int>{"max_top_logprobs", &live_settings::max_top_logprobs, &settings_change::max_top_logprobs},
    live_field<std::int64_t>{"max_request_output_tokens", &live_settings::max_request_output_tokens,
                             &settings_change::max_request_output_tokens},
    live_field<int>{"min_request_priority", &live_settings::min_request_priority,
                    &settings_change::min_request_priority},
    live_field<double>{"min_request_deadline_ms", &live_settings::min_request_deadline_ms,
                       &settings_change::min_request_deadline_ms},
};

std::string text_of(const std::string& value) { return value; }
std::string text_of(int value) { return std::to_string(value); }
std::string text_of(std::int64_t value) { return std::to_string(value); }
std::string text_of(bool value) { return value ? "true" : "false"; }
std::string text_of(double value) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);  // shortest text that reads back
  return std::string(buffer, result.ptr);
}

void read_into(const config_store& store, const char* name, std::optional<std::string>& out) {
  out = store.get_text(name);
}
void read_into(const config_store& store, const char* name, std::optional<int>& out) {
  out = static_cast<int>(store.get_int(name));
}
void read_into(const config_store& store, const char* name, std::optional<std::int64_t>& out) {
  out = store.get_int(name);
}
void read_into(const config_store& store, const char* name, std::optional<double>& out) { out = store.get_real(name); }
void read_into(const config_store& store, const char* name, std::optional<bool>& out) { out = store.get_bool(name); }

/// A knob's value text as typed JSON.
boost::json::value typed(knob_kind kind, const std::string& text) {
  switch (kind) {
    case knob_kind::integer:
      return std::strtoll(text.c_str(), nullptr, 10);
    case knob_kind::real:
      return std::strtod(text.c_str(), nullptr);
    case knob_kind::boolean:
      return text == "true";
    case knob_kind::text:
      break;
  }
  return boost::json::string(text);
}

const char* kind_name(knob_kind kind) {
  switch (kind) {
    case knob_kind::integer:
      return "integer";
    case knob_kind::real:
      return "real";
    case knob_kind::boolean:
      return "boolean";
    case knob_kind::text:
      break;
  }
  return "text";
}

// A knob as the console draws it: the registry entry, the value and where it came from.
boost::json::object knob_json(const knob_spec& knob, const std::string& value, std::string_view source) {
  boost::json::object out{{"kind", kind_name(knob.kind)}, {"help", knob.help}, {"live", knob.live},
                          {"group", knob.group},          {"source", source},  {"secret", knob.secret}};
  if (knob.secret) {
    out["set"] = !value.empty();
  } else {
    out["value"] = typed(knob.kind, value);
    out["default"] = typed(knob.kind, knob.default_value);
  }
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
  throw invalid_field(name, "knob '" + name + "' must be a string, number or boolean", "invalid_setting");
}

}  // namespace

admin_context::admin_context(const config_store& knobs, bool enabled, std::string token, std::string config_file,
                             double stream_interval_s, std::size_t audit_entries)
    : enabled(enabled),
      token(std::move(token)),
      config_file(std::move(config_file)),
      stream_interval_s(stream_interval_s),
      audit(audit_entries),
      knobs(knobs) {}

std::unique_ptr<admin_context> make_admin_context(const server_config& config) {
  if (std::string problem = admin_startup_problem(config.host, config.admin_enabled, config.admin_token);
      !problem.empty())
    throw std::runtime_error(problem);
  if (!config.admin_enabled) return nullptr;
  auto admin = std::make_unique<admin_context>(config.knobs ? *config.knobs : knob_defaults(), true, config.admin_token,
                                               config.config_file, config.admin_stream_interval_s,
                                               static_cast<std::size_t>(std::max(1, config.admin_audit_entries)));
  admin->allowed_origins = config.allowed_origins;
  return admin;
}

std::vector<std::pair<std::string, std::string>> live_setting_values(const live_settings& settings) {
  std::vector<std::pair<std::string, std::string>> values;
  for (const any_live_field& field : live_fields)
    std::visit([&](const auto& f) { values.emplace_back(f.name, text_of(settings.*f.value)); }, field);
  return values;
}

std::vector<std::pair<std::string, std::string>> changed_values(const settings_change& change) {
  std::vector<std::pair<std::string, std::string>> values;
  for (const any_live_field& field : live_fields) {
    std::visit(
        [&](const auto& f) {
          if (const auto& given = change.*f.change) values.emplace_back(f.name, text_of(*given));
        },
        field);
  }
  return values;
}

boost::json::object admin_config_json(const live_settings& settings, const config_store& knobs) {
  const auto live = live_setting_values(settings);
  boost::json::object values;
  boost::json::array live_names;
  boost::json::object described;
  for (const knob_spec& knob : knobs.specs()) {
    std::string value = knobs.get_as_text(knob.name);
    std::string_view source = config_source_name(knobs.source_of(knob.name));
    for (const auto& [name, text] : live) {
      if (name != knob.name) continue;
      if (text != value) source = "runtime";  // changed by someone other than this server's PATCH
      value = text;
      values[name] = typed(knob.kind, text);
      live_names.emplace_back(name);
    }
    if (is_server_live_knob(knob)) {
      values[knob.name] = typed(knob.kind, value);
      live_names.emplace_back(knob.name);
    }
    described[knob.name] = knob_json(knob, value, source);
  }
  return {{"settings", std::move(values)}, {"live_settings", std::move(live_names)}, {"knobs", std::move(described)}};
}

admin_change parse_settings_change(const boost::json::object& body) {
  config_store store(all_knobs());
  admin_change change;
  for (const auto& [key, value] : body) {
    const std::string name(key);
    try {
      const knob_spec& knob = store.spec(name);
      if (!knob.live) {
        throw config_error("knob '" + name + "' is restart-only: it cannot change while the engine runs (set it " +
                           knob_flag(name) + " and restart)");
      }
      store.set(name, scalar_text(name, value), config_source::runtime);
      if (is_server_live_knob(knob)) change.server.emplace_back(name, store.get_as_text(name));
    } catch (const config_error& error) {
      throw invalid_field(name, error.what(), "invalid_setting");
    }
  }
  for (const any_live_field& field : live_fields) {
    std::visit(
        [&](const auto& f) {
          if (body.contains(f.name)) read_into(store, f.name, change.engine.*f.change);
        },
        field);
  }
  return change;
}

bool is_server_live_knob(const knob_spec& knob) { return knob.live && knob.group == "server"; }

request_limits limits_after(const request_limits& current, const settings_change& change, const config_store& knobs,
                            const model_sampling_defaults& model) {
  request_limits next = current;
  apply_limit_change(change, next.engine);  // the engine accepted these values already
  next.sampling = sampling_defaults::resolve(sampling_default_knobs(knobs), model);
  return next;
}

}  // namespace troupe::api

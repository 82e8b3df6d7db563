#include "api/http/request_limits.hpp"

#include "config/config_store.hpp"

namespace troupe::api {

namespace {

/// The knob's value, nullopt at or below `unset_at`.
std::optional<double> real_knob(const config_store& knobs, std::string_view name, double unset_at) {
  const double value = knobs.get_real(name);
  return value > unset_at ? std::optional(value) : std::nullopt;
}

std::optional<int> int_knob(const config_store& knobs, std::string_view name, std::int64_t unset_at) {
  const std::int64_t value = knobs.get_int(name);
  return value > unset_at ? std::optional(static_cast<int>(value)) : std::nullopt;
}

}  // namespace

sampling_defaults sampling_defaults::resolve(const model_sampling_defaults& knobs,
                                             const model_sampling_defaults& model) {
  sampling_defaults out;
  out.temperature = knobs.temperature.value_or(model.temperature.value_or(out.temperature));
  out.top_p = knobs.top_p.value_or(model.top_p.value_or(out.top_p));
  out.top_k = knobs.top_k.value_or(model.top_k.value_or(out.top_k));
  out.min_p = knobs.min_p.value_or(model.min_p.value_or(out.min_p));
  out.repetition_penalty = knobs.repetition_penalty.value_or(model.repetition_penalty.value_or(out.repetition_penalty));
  out.max_tokens = knobs.max_tokens ? knobs.max_tokens : model.max_tokens;
  return out;
}

model_sampling_defaults sampling_default_knobs(const config_store& knobs) {
  model_sampling_defaults out;
  out.temperature = real_knob(knobs, "default_temperature", -0.5);
  out.top_p = real_knob(knobs, "default_top_p", 0.0);
  out.top_k = int_knob(knobs, "default_top_k", -1);
  out.min_p = real_knob(knobs, "default_min_p", -0.5);
  out.repetition_penalty = real_knob(knobs, "default_repetition_penalty", 0.0);
  out.max_tokens = int_knob(knobs, "default_max_tokens", 0);
  return out;
}

request_limits request_limits::from_engine_config(const engine_config& config) {
  request_limits limits;
  limits.engine = admission_limits(config);
  return limits;
}

live_request_limits::live_request_limits(request_limits initial)
    : current_(std::make_shared<const request_limits>(std::move(initial))) {}

std::shared_ptr<const request_limits> live_request_limits::get() const {
  const std::lock_guard lock(mutex_);
  return current_;
}

void live_request_limits::set(request_limits next) {
  auto replacement = std::make_shared<const request_limits>(std::move(next));
  const std::lock_guard lock(mutex_);
  current_ = std::move(replacement);
}

}  // namespace troupe::api

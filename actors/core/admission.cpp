#include "actors/core/admission.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>
#include <string>
#include <variant>

#include "config/config_store.hpp"

namespace troupe {

namespace {

admission_error invalid(std::string message, std::string param) {
  return {error_kind::invalid_request, std::move(message), std::move(param)};
}

bool in_range(double value, double low, double high) { return std::isfinite(value) && value >= low && value <= high; }

/// A request-limit knob: its live_settings / settings_change fields and the limit it sets.
template <typename T>
struct limit_field {
  const char* knob;
  std::optional<T> settings_change::*change;
  T live_settings::*live;
  T admission_limits::*limit;
};

using any_limit_field = std::variant<limit_field<int>, limit_field<std::int64_t>, limit_field<double>>;

// The one mapping between the live request-limit knobs and admission_limits.
const any_limit_field limit_fields[] = {
    limit_field<int>{"max_n", &settings_change::max_n, &live_settings::max_n, &admission_limits::max_n},
    limit_field<int>{"max_stop_strings", &settings_change::max_stop_strings, &live_settings::max_stop_strings,
                     &admission_limits::max_stop_strings},
    limit_field<int>{"max_stop_string_bytes", &settings_change::max_stop_string_bytes,
                     &live_settings::max_stop_string_bytes, &admission_limits::max_stop_string_bytes},
    limit_field<int>{"max_logit_bias", &settings_change::max_logit_bias, &live_settings::max_logit_bias,
                     &admission_limits::max_logit_bias},
    limit_field<int>{"max_top_logprobs", &settings_change::max_top_logprobs, &live_settings::max_top_logprobs,
                     &admission_limits::max_top_logprobs},
    limit_field<std::int64_t>{"max_request_output_tokens", &settings_change::max_request_output_tokens,
                              &live_settings::max_request_output_tokens, &admission_limits::max_request_output_tokens},
    limit_field<int>{"min_request_priority", &settings_change::min_request_priority,
                     &live_settings::min_request_priority, &admission_limits::min_priority},
    limit_field<double>{"min_request_deadline_ms", &settings_change::min_request_deadline_ms,
                        &live_settings::min_request_deadline_ms, &admission_limits::min_deadline_ms},
};

std::string value_text(double value) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}
std::string value_text(std::int64_t value) { return std::to_string(value); }
std::string value_text(int value) { return std::to_string(value); }

std::optional<admission_error> check_prompt_form(const generation_request& r, const admission_limits& limits) {
  switch (r.kind) {
    case prompt_kind::text:
      if (r.prompt_text.empty()) return invalid("prompt must not be empty", "prompt");
      if (r.prompt_text.size() > limits.max_prompt_bytes)
        return admission_error{error_kind::too_long, "prompt is too large", "prompt"};
      break;
    case prompt_kind::token_ids:
      if (r.prompt_token_ids.empty()) return invalid("prompt must not be empty", "prompt");
      for (std::int32_t id : r.prompt_token_ids) {
        if (id < 0 || id >= limits.vocab_size)
          return invalid("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                             std::to_string(limits.vocab_size) + ")",
                         "prompt");
      }
      break;
    case prompt_kind::chat:
      if (r.chat_messages_json.empty()) return invalid("messages must not be empty", "messages");
      if (r.chat_messages_json.size() + r.chat_tools_json.size() > limits.max_prompt_bytes)
        return admission_error{error_kind::too_long, "messages are too large", "messages"};
      break;
  }
  return std::nullopt;
}

std::optional<admission_error> check_sampling(const sampling_params& s, const admission_limits& limits) {
  if (!in_range(s.temperature, 0.0, 100.0)) return invalid("temperature must be in [0, 100]", "temperature");
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) return invalid("top_p must be in (0, 1]", "top_p");
  if (s.top_k < -1) return invalid("top_k must be -1 (disabled), 0 (disabled) or positive", "top_k");
  if (!in_range(s.min_p, 0.0, 1.0)) return invalid("min_p must be in [0, 1]", "min_p");
  if (!(s.repetition_penalty > 0.0f && s.repetition_penalty <= 100.0f))
    return invalid("repetition_penalty must be in (0, 100]", "repetition_penalty");
  if (!in_range(s.presence_penalty, -2.0, 2.0))
    return invalid("presence_penalty must be in [-2, 2]", "presence_penalty");
  if (!in_range(s.frequency_penalty, -2.0, 2.0))
    return invalid("frequency_penalty must be in [-2, 2]", "frequency_penalty");
  if (static_cast<int>(s.logit_bias.size()) > limits.max_logit_bias)
    return invalid("logit_bias has more than " + std::to_string(limits.max_logit_bias) + " entries", "logit_bias");
  for (const auto& [id, bias] : s.logit_bias) {
    if (id < 0 || id >= limits.vocab_size)
      return invalid("logit_bias token id " + std::to_string(id) + " is outside the vocabulary", "logit_bias");
    if (!in_range(bias, -100.0, 100.0)) return invalid("logit_bias values must be in [-100, 100]", "logit_bias");
  }
  if (s.top_logprobs < 0 || s.top_logprobs > limits.max_top_logprobs)
    return invalid("top_logprobs must be in [0, " + std::to_string(limits.max_top_logprobs) + "]", "top_logprobs");
  return std::nullopt;
}

std::optional<admission_error> check_stops(const generation_request& r, const admission_limits& limits) {
  if (static_cast<int>(r.stop.size()) > limits.max_stop_strings)
    return invalid("stop has more than " + std::to_string(limits.max_stop_strings) + " entries", "stop");
  for (const auto& stop : r.stop) {
    if (stop.empty()) return invalid("stop strings must not be empty", "stop");
    if (static_cast<int>(stop.size()) > limits.max_stop_string_bytes)
      return invalid("a stop string is longer than " + std::to_string(limits.max_stop_string_bytes) + " bytes", "stop");
  }
  if (static_cast<int>(r.stop_token_ids.size()) > limits.max_stop_strings * 16)
    return invalid("stop_token_ids has too many entries", "stop_token_ids");
  for (std::int32_t id : r.stop_token_ids) {
    if (id < 0 || id >= limits.vocab_size)
      return invalid("stop_token_ids holds an id outside the vocabulary", "stop_token_ids");
  }
  return std::nullopt;
}

/// The operator's bounds on how urgent a client may make its request.
std::optional<admission_error> check_urgency(const generation_request& r, const admission_limits& limits) {
  if (r.priority < limits.min_priority)
    return invalid("priority must be at least " + std::to_string(limits.min_priority) + " on this server", "priority");
  if (r.deadline_ms && *r.deadline_ms < limits.min_deadline_ms) {
    std::ostringstream bound;
    bound << limits.min_deadline_ms;
    return invalid("deadline_ms must be at least " + bound.str() + " on this server", "deadline_ms");
  }
  return std::nullopt;
}

}  // namespace

admission_limits::admission_limits() : admission_limits(engine_config{}) {}

admission_limits::admission_limits(const engine_config& engine)
    : max_n(engine.max_n),
      max_stop_strings(engine.max_stop_strings),
      max_stop_string_bytes(engine.max_stop_string_bytes),
      max_logit_bias(engine.max_logit_bias),
      max_top_logprobs(engine.max_top_logprobs),
      min_priority(engine.min_request_priority),
      min_deadline_ms(engine.min_request_deadline_ms),
      max_request_output_tokens(engine.max_request_output_tokens) {}

std::string apply_limit_change(const settings_change& change, admission_limits& limits) {
  admission_limits changed = limits;
  std::string problem;
  for (const any_limit_field& field : limit_fields) {
    std::visit(
        [&](const auto& f) {
          const auto& given = change.*f.change;
          if (!given || !problem.empty()) return;
          problem = knob_defaults().problem(f.knob, value_text(*given));
          changed.*f.limit = *given;
        },
        field);
  }
  if (problem.empty()) limits = changed;
  return problem;
}

void report_limits(const admission_limits& limits, live_settings& settings) {
  for (const any_limit_field& field : limit_fields)
    std::visit([&](const auto& f) { settings.*f.live = limits.*f.limit; }, field);
}

std::optional<admission_error> check_request(const generation_request& r, const admission_limits& limits) {
  if (auto error = check_prompt_form(r, limits)) return error;
  if (r.n < 1 || r.n > limits.max_n) return invalid("n must be in [1, " + std::to_string(limits.max_n) + "]", "n");
  if (r.max_tokens == 0 || r.max_tokens > limits.max_model_len)
    return invalid("max_tokens must be in [1, " + std::to_string(limits.max_model_len) + "]", "max_tokens");
  if (r.min_tokens < 0 || (r.max_tokens > 0 && r.min_tokens > r.max_tokens))
    return invalid("min_tokens must be in [0, max_tokens]", "min_tokens");
  if (auto error = check_output_budget(r.n, r.max_tokens, limits)) return error;
  if (auto error = check_sampling(r.sampling, limits)) return error;
  if (auto error = check_stops(r, limits)) return error;
  if (r.deadline_ms && !(std::isfinite(*r.deadline_ms) && *r.deadline_ms > 0))
    return invalid("deadline_ms must be positive", "deadline_ms");
  if (auto error = check_urgency(r, limits)) return error;
  if (r.timeout_s && !(std::isfinite(*r.timeout_s) && *r.timeout_s > 0))
    return invalid("timeout must be positive", "timeout");
  if (r.user.size() > 256) return invalid("user is longer than 256 bytes", "user");
  if (r.request_id.size() > 256) return invalid("request id is longer than 256 bytes", "request_id");
  return std::nullopt;
}

std::optional<admission_error> check_output_budget(std::int64_t sequences, int max_tokens,
                                                   const admission_limits& limits) {
  const std::int64_t context = limits.max_model_len;
  const std::int64_t per_sequence = max_tokens > 0 ? max_tokens : context;
  const std::int64_t budget = std::max(limits.max_request_output_tokens, context);
  if (sequences <= 0 || per_sequence <= budget / sequences) return std::nullopt;
  return invalid(std::to_string(sequences) + " choices of up to " + std::to_string(per_sequence) +
                     " tokens each (max_tokens; unset counts as the context length) exceed this server's limit of " +
                     std::to_string(budget) + " generated tokens per request (max_request_output_tokens)",
                 "max_tokens");
}

std::optional<admission_error> check_prompt_length(std::size_t prompt_tokens, const generation_request& request,
                                                   const admission_limits& limits) {
  const auto context = static_cast<std::size_t>(limits.max_model_len);
  if (prompt_tokens == 0) return invalid("the prompt has no tokens", "prompt");
  if (prompt_tokens >= context)
    return admission_error{error_kind::too_long,
                           "the prompt has " + std::to_string(prompt_tokens) + " tokens; this model's context is " +
                               std::to_string(context) + " tokens",
                           request.kind == prompt_kind::chat ? "messages" : "prompt"};
  if (request.max_tokens > 0 && prompt_tokens + static_cast<std::size_t>(request.max_tokens) > context)
    return invalid("prompt (" + std::to_string(prompt_tokens) + " tokens) plus max_tokens (" +
                       std::to_string(request.max_tokens) + ") exceeds the context of " + std::to_string(context),
                   "max_tokens");
  return std::nullopt;
}

}  // namespace troupe

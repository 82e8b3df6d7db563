#pragma once
// Admission: the checks a request passes before it costs anything. Pure:
// the limits come from the engine configuration, the verdict is a value.

#include <cstdint>
#include <optional>

#include "troupe/engine.hpp"
#include "troupe/request.hpp"

namespace troupe {

/// The explicit limits requests are held to: the request-size knobs of the
/// engine configuration, plus the model's vocabulary and context length
/// (set by whoever loads the model).
struct admission_limits {
  /// The knob-backed limits at their registry defaults.
  admission_limits();
  /// The knob-backed limits `engine` sets.
  explicit admission_limits(const engine_config& engine);

  int max_n;                                 ///< `n` at most
  int max_stop_strings;                      ///< `stop` entries at most
  int max_stop_string_bytes;                 ///< bytes per stop string at most
  int max_logit_bias;                        ///< `logit_bias` entries at most
  int max_top_logprobs;                      ///< `top_logprobs` at most
  int min_priority;                          ///< `priority` at least (lower is more urgent)
  double min_deadline_ms;                    ///< `deadline_ms` at least
  std::int64_t max_request_output_tokens;    ///< tokens one request may generate at most (see check_output_budget)
  int max_model_len = 4096;                  ///< prompt + generated tokens at most
  std::int64_t vocab_size = 0;               ///< token ids must be below this
  std::size_t max_prompt_bytes = 32u << 20;  ///< text / chat JSON size at most
};

/// Applies the request-limit fields of `change` (max_n, max_stop_strings,
/// ..., min_request_deadline_ms; the others are not limits) to `limits`.
/// Returns "" or why not, naming the knob whose value is outside its
/// registry range; then `limits` is unchanged.
std::string apply_limit_change(const settings_change& change, admission_limits& limits);

/// Copies the knob-backed limits into the request-limit fields of `settings`.
void report_limits(const admission_limits& limits, live_settings& settings);

/// An invalid request: what is wrong, and which field.
struct admission_error {
  error_kind kind = error_kind::invalid_request;
  std::string message;
  std::string param;
};

/// Checks every field that does not need the tokenizer. Nullopt when valid.
std::optional<admission_error> check_request(const generation_request& request, const admission_limits& limits);

/// Checks the output budget of a request of `sequences` choices (prompts ×
/// n) of `max_tokens` each, where max_tokens <= 0 (up to the context) counts
/// as the context length: over max_request_output_tokens is invalid, naming
/// max_tokens. One sequence up to the context always fits, so the budget
/// never refuses what a single choice could ask for. Nullopt when it fits.
std::optional<admission_error> check_output_budget(std::int64_t sequences, int max_tokens,
                                                   const admission_limits& limits);

/// Checks the tokenized prompt against the context: too long (too_long), or
/// no room for max_tokens. Nullopt when it fits.
std::optional<admission_error> check_prompt_length(std::size_t prompt_tokens, const generation_request& request,
                                                   const admission_limits& limits);

}  // namespace troupe

#pragma once
// Request-size limits the API enforces before anything reaches the engine,
// and the sampling defaults for fields a request leaves out. Both may
// change while the server runs (PATCH /admin/config): live_request_limits.

#include <memory>
#include <mutex>
#include <optional>

#include "actors/core/admission.hpp"
#include "config/config_store.hpp"
#include "troupe/engine.hpp"

namespace troupe::api {

/// The values a request's omitted sampling fields take. Precedence, highest
/// first: the request's own field, the default_* knob when set, the model's
/// generation_config.json, these built-ins (OpenAI's).
struct sampling_defaults {
  double temperature = 1.0;
  double top_p = 1.0;
  int top_k = 0;  ///< 0: off
  double min_p = 0.0;
  double repetition_penalty = 1.0;
  std::optional<int> max_tokens;  ///< unset: the endpoint's own (16 for completions, the context for chat)

  /// `knobs` (the default_* knobs; unset fields left to the model) over
  /// `model` (generation_config.json) over the built-ins.
  static sampling_defaults resolve(const model_sampling_defaults& knobs, const model_sampling_defaults& model);
};

/// The default_* knobs of `knobs` (a store holding the server knobs); a
/// knob at its "unset" value (-1; 0 for default_max_tokens and ≤ 0 for
/// default_top_p and default_repetition_penalty) is nullopt.
model_sampling_defaults sampling_default_knobs(const config_store& knobs);

/// The engine's admission limits, checked early so a 400 names the field,
/// plus a few only the API needs, and the sampling defaults.
struct request_limits {
  admission_limits
      engine;  ///< n, stop, logit_bias, top_logprobs (the API reads these; the model's come from model_info)
  int max_prompts = max_prompts_per_request;  ///< prompts in one completions request at most
  int max_stop_token_ids = 64;                ///< `stop_token_ids` entries at most
  int max_tools = 128;                        ///< `tools` entries at most
  sampling_defaults sampling;                 ///< for the sampling fields a request omits

  /// The limits an engine is configured with (the API-only ones keep their defaults).
  static request_limits from_engine_config(const engine_config& config);
};

/// The request limits in force; each request reads one snapshot, a change
/// replaces them whole. Thread-safe.
class live_request_limits {
 public:
  explicit live_request_limits(request_limits initial);
  /// The limits now; the snapshot stays valid while held.
  std::shared_ptr<const request_limits> get() const;
  /// Replaces the limits for every later request.
  void set(request_limits next);

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<const request_limits> current_;
};

}  // namespace troupe::api

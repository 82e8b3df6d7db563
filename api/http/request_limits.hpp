#pragma once
// Request-size limits the API enforces before anything reaches the engine.

#include "actors/core/admission.hpp"
#include "troupe/engine.hpp"

namespace troupe::api {

/// The engine's admission limits, checked early so a 400 names the field,
/// plus a few only the API needs.
struct request_limits {
  admission_limits
      engine;            ///< n, stop, logit_bias, top_logprobs (the API reads these; the model's come from model_info)
  int max_prompts = 64;  ///< prompts in one completions request at most
  int max_stop_token_ids = 64;  ///< `stop_token_ids` entries at most
  int max_tools = 128;          ///< `tools` entries at most

  /// The limits an engine is configured with (the API-only ones keep their defaults).
  static request_limits from_engine_config(const engine_config& config);
};

}  // namespace troupe::api

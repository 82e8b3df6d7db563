#pragma once
// Request-size limits the API enforces before anything reaches the engine.

#include "troupe/engine.hpp"

namespace troupe::api {

/// engine_config's request limits, plus a few only the API needs.
struct request_limits {
  int max_n = 16;                   ///< `n` at most
  int max_stop_strings = 16;        ///< `stop` entries at most
  int max_stop_string_bytes = 256;  ///< bytes per stop string at most
  int max_logit_bias = 1024;        ///< `logit_bias` entries at most
  int max_top_logprobs = 20;        ///< `top_logprobs` (and completions' `logprobs`) at most
  int max_prompts = 64;             ///< prompts in one completions request at most
  int max_stop_token_ids = 64;      ///< `stop_token_ids` entries at most
  int max_tools = 128;              ///< `tools` entries at most

  /// The limits an engine is configured with (the API-only ones keep their defaults).
  static request_limits from_engine_config(const engine_config& config);
};

}  // namespace troupe::api

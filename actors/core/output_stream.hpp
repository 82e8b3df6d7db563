#pragma once
// One request's output on its way to the sink: token ids become text deltas
// (complete UTF-8 only), stop strings are found across token boundaries and
// cut, logprobs carry each token's text, and each choice finishes exactly
// once. Pure: the tokenizer actor owns one per live request.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/sampling.hpp"
#include "model/text/incremental_detokenizer.hpp"
#include "model/text/stop_string_matcher.hpp"
#include "model/text/tokenizer.hpp"
#include "troupe/request.hpp"

namespace troupe {

/// What shapes a request's output.
struct output_settings {
  int n = 1;
  bool skip_special_tokens = true;
  std::vector<std::string> stop;  ///< stop strings, cut from the output
  bool logprobs = false;          ///< deltas carry per-token logprobs
};

/// The result of one sampled token.
struct token_outcome {
  std::optional<delta_event> delta;  ///< set when there is text, a token or logprobs to send
  bool stop_string_matched = false;  ///< the choice ended on a stop string: tell the scheduler
};

/// The result of a choice finishing.
struct finish_outcome {
  std::optional<delta_event> delta;        ///< held-back text released at the end
  std::optional<finished_event> finished;  ///< nullopt when the choice had already finished
};

class output_stream {
 public:
  output_stream(std::shared_ptr<const text::tokenizer> tokenizer, std::string request_id, output_settings settings);

  /// A token sampled for `choice` (ignored after the choice stopped).
  token_outcome on_token(int choice, const sample_output& sample);
  /// The scheduler finished `choice`; a stop string found earlier wins as the reason.
  finish_outcome on_finished(int choice, finish_reason reason, const usage_info& usage, bool request_done);

  const std::string& request_id() const { return request_id_; }

 private:
  struct choice_state {
    text::incremental_detokenizer detokenizer;
    std::optional<text::stop_string_matcher> matcher;
    std::optional<std::string> stop_reason;  ///< the stop string that matched
    bool stopped = false;                    ///< a stop string matched; later tokens are dropped
    bool finished = false;                   ///< finished_event sent
  };

  delta_event make_delta(int choice) const;
  token_logprobs logprobs_of(const sample_output& sample) const;
  std::string pass_stops(choice_state& state, std::string text);

  std::shared_ptr<const text::tokenizer> tokenizer_;
  std::string request_id_;
  output_settings settings_;
  std::vector<choice_state> choices_;
};

}  // namespace troupe

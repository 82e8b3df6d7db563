#pragma once
// Streaming decode: ids go in as the model produces them, text deltas come
// out. Deltas hold only complete UTF-8 and concatenate (with finish()) to
// exactly tokenizer::decode of all ids.

#include <memory>
#include <span>
#include <string>

#include "model/text/tokenizer.hpp"

namespace troupe::text {

class decode_stream;

/// Per-request decoding state; not thread-safe (one per sequence).
class incremental_detokenizer {
 public:
  /// Decodes with `tok` (kept alive by this object).
  incremental_detokenizer(std::shared_ptr<const tokenizer> tok, bool skip_special_tokens);
  ~incremental_detokenizer();
  incremental_detokenizer(incremental_detokenizer&&) noexcept;
  incremental_detokenizer& operator=(incremental_detokenizer&&) noexcept;

  /// Adds one id; returns the text that became final (may be empty: e.g. the
  /// first bytes of a multi-token character are held back).
  std::string push(token_id id);
  /// Adds several ids; returns the text that became final.
  std::string push(std::span<const token_id> ids);
  /// Ends the stream and returns the held-back rest (an incomplete character
  /// becomes U+FFFD, as in a full decode). Later calls return "".
  std::string finish();

 private:
  std::shared_ptr<const tokenizer> tokenizer_;
  bool skip_special_tokens_;
  bool finished_ = false;
  std::unique_ptr<decode_stream> stream_;
};

}  // namespace troupe::text

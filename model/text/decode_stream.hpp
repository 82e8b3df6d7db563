#pragma once
// The decoder chain as a stream: token strings go in one at a time and text
// comes out as soon as no later token can change it. Each stage mirrors one
// HF decoder exactly, so the concatenated output equals decode_tokens() on
// the whole list. Stages after a merging stage (ByteLevel, Fuse) see one
// growing token: they receive extend() calls with its new text.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/text/decoder.hpp"

namespace troupe::text {

/// One streaming decoder step; passes its output to the next step.
class stream_stage {
 public:
  virtual ~stream_stage() = default;
  /// A new token whose text starts with `text`.
  virtual void token(std::string_view text) = 0;
  /// More text of the current token (only downstream of a merging stage).
  virtual void extend(std::string_view text) = 0;
  /// End of input: release everything held back.
  virtual void finish() = 0;
};

/// A decoder chain that turns token strings into final text incrementally.
class decode_stream {
 public:
  /// `spec` may be null (no decoder: tokens joined with spaces); it must
  /// outlive the stream.
  explicit decode_stream(const decoder_spec* spec);
  ~decode_stream();
  decode_stream(decode_stream&&) noexcept;
  decode_stream& operator=(decode_stream&&) noexcept;

  /// Feeds one token string; appends text that is now final to `out`.
  void push(std::string_view token, std::string& out);
  /// Ends the stream; appends the rest of the text to `out`. Call once.
  void finish(std::string& out);

 private:
  class output_stage;
  void collect(std::string& out);

  std::vector<std::unique_ptr<stream_stage>> stages_;  ///< stages_[0] receives the tokens; the last collects text
  output_stage* output_ = nullptr;
};

}  // namespace troupe::text

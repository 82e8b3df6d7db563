#pragma once
// tokenizer.json "pre_tokenizer" components: Split (regex or string, with
// HF's split behaviours and invert), ByteLevel, Metaspace, Digits, Sequence.

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "base/json_field.hpp"

namespace troupe::text {

/// A byte range [begin, end) of split_text::text that the model will see.
/// `at_origin` is true when it starts at offset 0 of the original input
/// (Metaspace's prepend_scheme "first" depends on it).
struct text_piece {
  std::size_t begin;
  std::size_t end;
  bool at_origin;
};

/// A normalized segment and its current pieces, in order.
struct split_text {
  std::string text;
  std::vector<text_piece> pieces;
};

/// One pre-tokenization step: refines (and may rewrite) the pieces.
class pre_tokenizer {
 public:
  virtual ~pre_tokenizer() = default;
  /// Splits every piece of `input` further; may rewrite `input.text`.
  virtual void pre_tokenize(split_text& input) const = 0;
};

/// What a ByteLevel step at the very end of the pipeline leaves to the model:
/// instead of spelling bytes as GPT-2 characters, the model looks up raw
/// bytes (the mapping is a bijection, so results are identical).
struct pre_tokenizer_info {
  bool ends_with_byte_level = false;
};

/// Builds the pre-tokenizer described by `node`. Fills `info`. Throws
/// std::runtime_error naming the path for unknown types or bad fields.
std::unique_ptr<pre_tokenizer> make_pre_tokenizer(const json_field& node, pre_tokenizer_info& info);

}  // namespace troupe::text

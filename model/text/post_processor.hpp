#pragma once
// tokenizer.json "post_processor" for single sequences: TemplateProcessing,
// BertProcessing, RobertaProcessing, ByteLevel (ids unchanged) and Sequence.
// Each reduces to a template: special ids around the encoded text.

#include <cstdint>
#include <vector>

#include "base/json_field.hpp"

namespace troupe::text {

/// Ids added by the post-processor when special tokens are requested.
struct sequence_template {
  std::vector<std::int32_t> before;  ///< ids placed before the text
  std::vector<std::int32_t> after;   ///< ids placed after the text
};

/// Parses the post-processor described by `node`. Throws std::runtime_error
/// naming the path for unknown types, missing special tokens or bad ids.
sequence_template parse_post_processor(const json_field& node);

}  // namespace troupe::text

#pragma once
// tokenizer.json "normalizer" components: Unicode normalization forms
// (utf8proc), Prepend, Replace, Strip and Sequence.

#include <memory>
#include <string>

#include "base/json_field.hpp"

namespace troupe::text {

/// One normalization step applied to each text segment between added tokens.
class normalizer {
 public:
  virtual ~normalizer() = default;
  /// Rewrites `text` (valid UTF-8) in place; the result is valid UTF-8.
  virtual void normalize(std::string& text) const = 0;
};

/// Builds the normalizer described by `node` (an object with a "type").
/// Throws std::runtime_error naming the path for unknown types or bad fields.
std::unique_ptr<normalizer> make_normalizer(const json_field& node);

}  // namespace troupe::text

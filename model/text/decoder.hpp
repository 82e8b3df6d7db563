#pragma once
// tokenizer.json "decoder" components (ByteLevel, ByteFallback, Fuse, Strip,
// Replace, Metaspace, Sequence) as HF's decode_chain over the list of token
// strings. The streaming twin used by the incremental detokenizer lives in
// decode_stream.hpp and is built from the same description.

#include <memory>
#include <string>
#include <vector>

#include "base/json_field.hpp"
#include "model/text/text_pattern.hpp"

namespace troupe::text {

/// A parsed decoder component.
struct decoder_spec {
  /// Which HF decoder this is.
  enum class kind { byte_level, byte_fallback, fuse, strip, replace, metaspace, sequence };
  kind type = kind::fuse;                       ///< the decoder type
  std::string text;                             ///< Strip/Metaspace character, Replace content
  std::size_t strip_start = 0;                  ///< Strip: leading characters to remove
  std::size_t strip_stop = 0;                   ///< Strip: trailing characters to remove
  std::shared_ptr<const text_pattern> pattern;  ///< Replace pattern
  bool metaspace_prepend = true;                ///< Metaspace: prepend_scheme is not "never"
  std::vector<decoder_spec> children;           ///< Sequence steps
};

/// Parses the decoder described by `node`; throws std::runtime_error naming
/// the path for unknown types or bad fields.
decoder_spec parse_decoder(const json_field& node);

/// HF's decode_chain: transforms the token strings of one decode call.
void decode_chain(const decoder_spec& spec, std::vector<std::string>& tokens);

/// Decodes token strings to text: the chain (or, without a decoder, HF's
/// default of joining with spaces) and concatenation.
std::string decode_tokens(const decoder_spec* spec, std::vector<std::string> tokens);

/// Byte value of a ByteFallback token "<0xHH>", or -1 (HF's parsing rules).
int byte_fallback_value(std::string_view token);

}  // namespace troupe::text

#pragma once
// The exact bytes each token id stands for, as structured-output
// constraints need them (constraints::vocabulary): byte-level pieces and
// SentencePiece byte-fallback tokens give their raw bytes, even when those
// are a fragment of a UTF-8 character.

#include <string>
#include <vector>

#include "model/text/tokenizer.hpp"

namespace troupe::text {

/// Bytes of `id` when it follows other text; empty for special tokens
/// (added tokens marked special) and unknown ids.
std::string token_bytes(const tokenizer& tok, token_id id);

/// [vocab_size] token_bytes of every id.
std::vector<std::string> vocabulary_bytes(const tokenizer& tok);

}  // namespace troupe::text

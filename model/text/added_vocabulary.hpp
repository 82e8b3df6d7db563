#pragma once
// tokenizer.json "added_tokens": tokens matched in the raw (or normalized)
// text before pre-tokenization, leftmost-longest, honouring lstrip, rstrip,
// single_word and normalized; ids assigned the way HF assigns them.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_field.hpp"
#include "model/text/bpe_model.hpp"
#include "model/text/flat_maps.hpp"
#include "model/text/normalizer.hpp"

namespace troupe::text {

/// One entry of "added_tokens".
struct added_token {
  std::string content;       ///< the text that is matched
  std::int32_t id = 0;       ///< id as HF assigns it (not necessarily the stored "id")
  bool special = false;      ///< skipped by skip_special_tokens
  bool lstrip = false;       ///< swallow whitespace to the left
  bool rstrip = false;       ///< swallow whitespace to the right
  bool single_word = false;  ///< only match when not inside a word
  bool normalized = false;   ///< match in normalized text (else in raw text)
  std::string spelling;      ///< what decoding sees: the content, normalized when `normalized`
};

/// A part of the text after added-token splitting: an added token's id, or
/// plain text [begin, end) when `id` is `plain`.
struct added_split {
  static constexpr std::int32_t plain = -1;  ///< `id` of a plain-text part
  std::size_t begin;                         ///< byte offset in the split text
  std::size_t end;                           ///< one past the last byte
  std::int32_t id;                           ///< token id, or `plain`
};

/// Leftmost-longest matcher over a set of byte strings (a trie).
class token_trie {
 public:
  /// Adds `pattern` (non-empty) standing for `value`.
  void add(std::string_view pattern, std::int32_t value);
  /// Longest pattern starting at `text[position]`: its length and value, or
  /// length 0 if none.
  std::pair<std::size_t, std::int32_t> longest_at(std::string_view text, std::size_t position) const;
  /// Whether a pattern can start with byte `b`.
  bool may_start_with(unsigned char b) const { return first_bytes_[b]; }
  /// Whether no pattern was added.
  bool empty() const { return nodes_.size() <= 1; }

 private:
  struct node {
    std::vector<std::pair<unsigned char, std::int32_t>> children;  ///< sorted by byte
    std::int32_t value = -1;
  };
  std::vector<node> nodes_{1};
  bool first_bytes_[256] = {};
};

/// The added tokens of a tokenizer and their two matchers.
class added_vocabulary {
 public:
  /// Loads "added_tokens" (`list` may be null). `norm` (may be null) is
  /// applied to the content of normalized tokens. Throws std::runtime_error
  /// naming the field on malformed entries.
  added_vocabulary(const json_field* list, const bpe_model& model, const normalizer* norm);

  /// Splits `text` on the raw-text tokens (`normalized_set` false) or on the
  /// normalized-text tokens (true), appending the parts in order.
  void split(std::string_view text, bool normalized_set, std::vector<added_split>& out) const;

  /// Whether any token matches in the given set.
  bool has_tokens(bool normalized_set) const { return !(normalized_set ? normalized_ : raw_).empty(); }
  /// The added token with `id`, or nullptr.
  const added_token* find(std::int32_t id) const;
  /// Id of the added token spelled `content`, or nullopt.
  std::optional<std::int32_t> token_to_id(std::string_view content) const;
  /// Whether `content` is the spelling of a special added token.
  bool is_special_content(std::string_view content) const;
  /// One past the largest added id (0 when there are none).
  std::int32_t id_limit() const { return static_cast<std::int32_t>(by_id_.size()); }

 private:
  std::vector<added_token> tokens_;  ///< in insertion order
  std::vector<std::int32_t> by_id_;  ///< id -> index in tokens_, or -1
  string_map by_content_;            ///< content -> index in tokens_
  token_trie raw_;
  token_trie normalized_;
};

}  // namespace troupe::text

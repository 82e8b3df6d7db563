#pragma once
// The BPE model of tokenizer.json ("model": {"type": "BPE", ...}): vocab,
// ranked merges applied lowest rank first (leftmost on ties) through a heap
// over a linked list of symbols, byte_fallback, unk handling, ignore_merges,
// continuing_subword_prefix / end_of_word_suffix, and a piece cache.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_field.hpp"
#include "model/text/flat_maps.hpp"
#include "model/text/piece_cache.hpp"

namespace troupe::text {

/// Largest token id accepted from a tokenizer file (guards memory use).
inline constexpr std::int64_t max_token_id = 16'777'215;

/// A loaded BPE model; tokenize() is const and safe to call concurrently.
class bpe_model {
 public:
  /// Builds the model from the "model" node. With `byte_symbols` the pieces
  /// it receives are raw bytes (the ByteLevel pre-tokenizer ran last) and
  /// each byte is one initial symbol. Throws std::runtime_error naming the
  /// offending field (missing vocab, merges with unknown tokens, bad ids).
  bpe_model(const json_field& model, bool byte_symbols);

  /// Appends the ids of one non-empty piece to `out`. Throws
  /// std::runtime_error when an unknown character needs an unk_token that
  /// is not in the vocabulary.
  void tokenize(std::string_view piece, std::vector<std::int32_t>& out) const;

  /// Id of `token` (as spelled in the vocab), or nullopt.
  std::optional<std::int32_t> token_to_id(std::string_view token) const;
  /// Spelling of `id`, or nullptr if the vocab has no such id.
  const std::string* id_to_token(std::int32_t id) const;
  /// Number of vocab entries (HF's model vocab size).
  std::size_t vocab_entries() const { return vocab_.size(); }
  /// One past the largest id in the vocab.
  std::int32_t id_limit() const { return static_cast<std::int32_t>(spellings_.size()); }

 private:
  struct symbol {
    std::int32_t id;
    std::int32_t prev;  ///< index of the previous live symbol, -1 at the start
    std::int32_t next;  ///< index of the next live symbol, -1 at the end
    bool alive;
  };
  struct candidate {
    std::uint32_t rank;
    std::int32_t position;
    std::int32_t merged;
  };

  void load_vocab(const json_field& vocab);
  void load_merges(const json_field& merges);
  void load_options(const json_field& model);
  void initial_symbols(std::string_view piece, std::vector<symbol>& symbols) const;
  bool byte_fallback_symbols(std::string_view symbol_text, std::vector<symbol>& symbols) const;
  void merge(std::vector<symbol>& symbols) const;
  void tokenize_word(std::string_view piece, std::vector<std::int32_t>& out) const;
  std::int32_t unk_id() const;

  bool byte_symbols_;
  string_map vocab_;                    ///< spelling -> id
  string_map symbols_;                  ///< lookup space of pieces (raw bytes when byte_symbols_)
  std::vector<std::string> spellings_;  ///< id -> spelling
  std::vector<bool> has_spelling_;
  pair_map merges_;
  std::optional<std::string> unk_token_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::string prefix_;  ///< continuing_subword_prefix in symbol space
  std::string suffix_;  ///< end_of_word_suffix in symbol space
  std::array<std::int32_t, 256> byte_fallback_ids_{};
  /// SentencePiece vocabularies whose merges never join a character to a
  /// following "▁" can tokenize each "▁word" on its own (and cache it).
  bool split_at_word_marks_ = false;
  std::uint64_t cache_owner_ = thread_piece_cache::new_owner();
  piece_cache cache_;
};

}  // namespace troupe::text

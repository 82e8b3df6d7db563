#pragma once
// A Hugging Face tokenizer.json (BPE models: byte-level like Llama 3, Qwen,
// DeepSeek; SentencePiece-style with byte fallback like Llama 2, Mistral)
// reimplemented to give the same ids and text as the `tokenizers` library.
// One instance is shared by many threads: every member is const and safe to
// call concurrently.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::text {

/// Index of a token in the vocabulary (and of a row of the embedding table).
using token_id = std::int32_t;

/// A special token named in tokenizer_config.json (bos_token, eos_token...).
struct special_token {
  std::string text;            ///< its spelling
  std::optional<token_id> id;  ///< its id, if the tokenizer knows the spelling
};

/// An immutable tokenizer loaded from tokenizer.json (+ tokenizer_config.json).
class tokenizer {
 public:
  /// Loads `dir`/tokenizer.json and, if present, `dir`/tokenizer_config.json.
  /// Throws std::runtime_error naming the file and field on any problem.
  static std::shared_ptr<const tokenizer> load(const std::filesystem::path& dir);

  /// Builds a tokenizer from file contents; `tokenizer_config_json` may be
  /// empty. Throws std::runtime_error naming the field on malformed input.
  static std::shared_ptr<const tokenizer> from_json(std::string_view tokenizer_json,
                                                    std::string_view tokenizer_config_json = {});

  /// Token ids of `text` (UTF-8), as HF `encode(text, add_special_tokens)`.
  /// Added/special tokens written in the text are always recognized; the flag
  /// only controls the post-processor's BOS/EOS. Throws std::invalid_argument
  /// naming the byte offset when `text` is not valid UTF-8.
  std::vector<token_id> encode(std::string_view text, bool add_special_tokens) const;

  /// Text of `ids`, as HF `decode(ids, skip_special_tokens)`. Ids the
  /// tokenizer does not know (negative, or beyond its vocabulary) decode to
  /// nothing. Bytes that do not form UTF-8 become U+FFFD.
  std::string decode(std::span<const token_id> ids, bool skip_special_tokens) const;

  /// One past the largest id the tokenizer can produce or decode.
  int vocab_size() const;

  /// Id of the token spelled `token` (added tokens first, then the model).
  std::optional<token_id> token_to_id(std::string_view token) const;

  /// Spelling of `id` (e.g. "Ġthe", "<|eot_id|>"), or nullopt if unknown.
  std::optional<std::string> id_to_token(token_id id) const;

  /// Whether `id` is a special added token (skipped by skip_special_tokens).
  bool is_special(token_id id) const;

  /// The spelling the decoder receives for `id`, or nullptr when the id
  /// decodes to nothing (unknown, or special while `skip_special_tokens`).
  const std::string* decode_piece(token_id id, bool skip_special_tokens) const;

  /// bos_token of tokenizer_config.json (a string or {"content": ...}).
  const std::optional<special_token>& bos_token() const;
  /// eos_token of tokenizer_config.json.
  const std::optional<special_token>& eos_token() const;
  /// pad_token of tokenizer_config.json.
  const std::optional<special_token>& pad_token() const;
  /// add_bos_token / add_eos_token of tokenizer_config.json, if present. They
  /// are informational: encode() follows tokenizer.json's post-processor, as
  /// HF tokenizers and transformers 5 do.
  std::optional<bool> add_bos_token() const;
  /// See add_bos_token().
  std::optional<bool> add_eos_token() const;

  ~tokenizer();
  tokenizer(const tokenizer&) = delete;
  tokenizer& operator=(const tokenizer&) = delete;

  /// Loaded parts (defined in tokenizer_impl.hpp, used only inside model/text).
  struct impl;

 private:
  explicit tokenizer(std::unique_ptr<impl> state);
  friend class incremental_detokenizer;
  std::unique_ptr<impl> impl_;
};

}  // namespace troupe::text

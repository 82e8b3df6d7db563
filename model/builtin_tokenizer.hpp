#pragma once
// A small byte-level BPE tokenizer written as HF files, for checkpoints made
// without a real tokenizer (the demo model, `make-model` without
// --tokenizer). Its layout copies Llama 3's: a Split pre-tokenizer with the
// Llama 3 regex then ByteLevel, the 256 byte tokens first (GPT-2 byte
// order), merges learned deterministically from a short embedded English
// text, then the special tokens <|begin_of_text|>, <|end_of_text|>,
// <|start_header_id|>, <|end_header_id|>, <|eot_id|> and a Llama-3-style
// chat template.

#include <cstdint>
#include <string>
#include <string_view>

namespace troupe {

/// The built-in tokenizer's files and the ids the model config needs.
struct builtin_tokenizer {
  std::string tokenizer_json;         ///< text of tokenizer.json
  std::string tokenizer_config_json;  ///< text of tokenizer_config.json (bos/eos, chat_template)
  std::int64_t size = 0;              ///< number of token ids (largest id + 1)
  std::int64_t begin_of_text_id = 0;  ///< bos
  std::int64_t end_of_text_id = 0;    ///< end of a document
  std::int64_t eot_id = 0;            ///< end of a chat turn; the tokenizer's eos_token
};

/// Number of merges the trainer aims for (fewer if the text runs out of repeated pairs).
inline constexpr int builtin_tokenizer_target_merges = 400;

/// Builds the tokenizer (deterministic: the same bytes on every call and
/// platform). `model_max_length` is written to tokenizer_config.json.
builtin_tokenizer make_builtin_tokenizer(std::int64_t model_max_length);

/// The embedded training text.
std::string_view builtin_tokenizer_corpus();

/// The Llama-3-style chat template of the built-in tokenizer.
std::string_view builtin_chat_template();

}  // namespace troupe

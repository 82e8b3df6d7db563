#pragma once
// The tokenizer and chat template embedded in a GGUF file, turned into the
// HF files troupe's tokenizer is built from. Two styles are read:
//  - "gpt2" (byte-level BPE: tokens, token types, merges) with
//    `tokenizer.ggml.pre` "llama-bpe" (Llama 3), "qwen2" or "gpt-2", each
//    mapped to the pre-tokenizer regex its HF tokenizer.json uses;
//  - "llama" (SentencePiece BPE: tokens, scores, byte tokens <0xXX>), whose
//    merges are derived from the scores as transformers' SentencePiece
//    converter does, with byte fallback.
// Control tokens become special added tokens; user-defined ones non-special
// added tokens; unused (padding) ids are left out.

#include <filesystem>
#include <memory>
#include <string>

#include "model/chat/chat_template.hpp"
#include "model/gguf.hpp"
#include "model/text/tokenizer.hpp"

namespace troupe {

/// tokenizer.json and tokenizer_config.json texts equivalent to a GGUF tokenizer.
struct gguf_tokenizer_files {
  std::string tokenizer_json;
  std::string tokenizer_config_json;  ///< bos/eos/unk/pad tokens and add_bos/add_eos flags
};

/// Builds the files from `file`'s tokenizer.ggml.* metadata. Throws
/// std::runtime_error naming the file and key for a missing or malformed
/// key or an unsupported style, e.g. "m.gguf: metadata key
/// 'tokenizer.ggml.pre': 'falcon' is not supported (supported: ...)".
gguf_tokenizer_files gguf_tokenizer_json(const gguf_file& file);

/// The tokenizer of `file`.
std::shared_ptr<const text::tokenizer> load_gguf_tokenizer(const gguf_file& file);

/// `tokenizer.chat_template` as the "default" template (and every
/// `tokenizer.chat_template.<name>` under its name), with the bos/eos/unk/pad
/// token texts. Empty templates when the file has none.
chat_template_source gguf_chat_template(const gguf_file& file);

}  // namespace troupe

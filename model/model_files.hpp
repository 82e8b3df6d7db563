#pragma once
// What a `--model` path names besides the weights: the tokenizer, the chat
// templates and the generation defaults, read either from an HF directory
// (tokenizer.json, tokenizer_config.json, generation_config.json, ...) or
// from the metadata of a single GGUF file.

#include <filesystem>
#include <memory>

#include "model/chat/chat_template.hpp"
#include "model/generation_config.hpp"
#include "model/text/tokenizer.hpp"

namespace troupe {

/// True when `model` has a tokenizer: a GGUF file, or a directory with tokenizer.json.
bool model_has_tokenizer(const std::filesystem::path& model);

/// The tokenizer of an HF directory or a GGUF file.
std::shared_ptr<const text::tokenizer> load_model_tokenizer(const std::filesystem::path& model);

/// The chat templates of a GGUF file, or of a directory as load_chat_template
/// reads them (empty when the directory has neither tokenizer_config.json
/// nor chat_template.jinja).
chat_template_source load_model_chat_template(const std::filesystem::path& model);

/// generation_config.json of a directory, or the GGUF file's special ids.
generation_config load_model_generation_config(const std::filesystem::path& model);

}  // namespace troupe

#include "model/model_files.hpp"

#include "model/gguf.hpp"
#include "model/gguf_model.hpp"
#include "model/gguf_tokenizer.hpp"

namespace troupe {

bool model_has_tokenizer(const std::filesystem::path& model) {
  return is_gguf_path(model) || std::filesystem::exists(model / "tokenizer.json");
}

std::shared_ptr<const text::tokenizer> load_model_tokenizer(const std::filesystem::path& model) {
  if (is_gguf_path(model)) return load_gguf_tokenizer(gguf_file(model));
  return text::tokenizer::load(model);
}

chat_template_source load_model_chat_template(const std::filesystem::path& model) {
  if (is_gguf_path(model)) return gguf_chat_template(gguf_file(model));
  const bool has_config = std::filesystem::exists(model / "tokenizer_config.json") ||
                          std::filesystem::exists(model / "chat_template.jinja");
  return has_config ? load_chat_template(model) : chat_template_source{};
}

generation_config load_model_generation_config(const std::filesystem::path& model) {
  if (is_gguf_path(model)) return gguf_generation_config(gguf_file(model));
  return load_generation_config(model);
}

}  // namespace troupe

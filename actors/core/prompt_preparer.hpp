#pragma once
// Turns a request's prompt (text, token ids, or chat messages) into token
// ids and text: renders chat messages through the model's template and
// encodes. Pure and thread-safe: the tokenizer actors share one.

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/chat/chat_template.hpp"
#include "model/text/tokenizer.hpp"
#include "troupe/request.hpp"

namespace troupe {

/// The outcome of preparing one prompt.
struct prepared_prompt_result {
  std::vector<std::int32_t> ids;
  std::string text;                  ///< the prompt as text (rendered chat, or decoded ids)
  std::optional<std::string> error;  ///< what was wrong (invalid request)
  std::string param;                 ///< the field to blame
};

class prompt_preparer {
 public:
  /// `templates` may be empty (the model has no chat template: chat requests fail).
  prompt_preparer(std::shared_ptr<const text::tokenizer> tokenizer, chat_template_source templates);

  /// Loads tokenizer.json and the chat templates of `model_dir`.
  static std::shared_ptr<const prompt_preparer> load(const std::filesystem::path& model_dir);

  prepared_prompt_result prepare(const generation_request& request) const;
  /// Renders chat messages (a JSON array) through the template.
  std::string render_chat(const std::string& messages_json, const std::string& tools_json,
                          const std::string& kwargs_json, bool add_generation_prompt) const;

  /// Runs a /tokenize or /detokenize call. A template that refuses the
  /// messages is the caller's error (invalid_request, code template_error);
  /// other failures throw.
  text_task_result run(const text_task& task) const;

  const std::shared_ptr<const text::tokenizer>& tokenizer() const { return tokenizer_; }
  /// The model's chat templates (empty when it has none).
  const chat_template_source& templates() const { return source_; }

 private:
  std::shared_ptr<const text::tokenizer> tokenizer_;
  chat_template_source source_;
  std::map<std::string, chat_template> compiled_;  ///< by template name
};

}  // namespace troupe

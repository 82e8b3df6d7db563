#include "actors/core/prompt_preparer.hpp"

#include <boost/json.hpp>
#include <stdexcept>

#include "model/chat/tool_calls.hpp"

namespace troupe {

namespace {

/// The JSON value at `text` as the given kind, or an invalid_argument naming `field`.
boost::json::value parse_json(const std::string& text, const char* field) {
  boost::system::error_code error;
  boost::json::value value = boost::json::parse(text, error);
  if (error) throw std::invalid_argument(std::string(field) + " is not valid JSON: " + error.message());
  return value;
}

}  // namespace

prompt_preparer::prompt_preparer(std::shared_ptr<const text::tokenizer> tokenizer, chat_template_source templates)
    : tokenizer_(std::move(tokenizer)), source_(std::move(templates)) {
  for (const auto& [name, text] : source_.templates) compiled_.emplace(name, chat_template::compile(text));
}

std::shared_ptr<const prompt_preparer> prompt_preparer::load(const std::filesystem::path& model_dir) {
  chat_template_source templates;
  const bool has_config = std::filesystem::exists(model_dir / "tokenizer_config.json") ||
                          std::filesystem::exists(model_dir / "chat_template.jinja");
  if (has_config) templates = load_chat_template(model_dir);
  return std::make_shared<const prompt_preparer>(text::tokenizer::load(model_dir), std::move(templates));
}

std::string prompt_preparer::render_chat(const std::string& messages_json, const std::string& tools_json,
                                         const std::string& kwargs_json, bool add_generation_prompt) const {
  chat_template_inputs inputs;
  const boost::json::value messages = parse_json(messages_json, "messages");
  if (!messages.is_array() || messages.as_array().empty())
    throw std::invalid_argument("messages must be a non-empty array");
  inputs.messages = messages.as_array();
  if (!tools_json.empty()) {
    const boost::json::value tools = parse_json(tools_json, "tools");
    if (!tools.is_array()) throw std::invalid_argument("tools must be an array");
    inputs.tools = tools.as_array();
  }
  if (!kwargs_json.empty()) {
    const boost::json::value kwargs = parse_json(kwargs_json, "chat_template_kwargs");
    if (!kwargs.is_object()) throw std::invalid_argument("chat_template_kwargs must be an object");
    inputs.extra = kwargs.as_object();
  }
  inputs.add_generation_prompt = add_generation_prompt;
  inputs.special_tokens = source_.special_tokens;
  if (compiled_.empty()) throw std::invalid_argument("this model has no chat template");
  const std::string& name_source = source_.select(inputs.tools.has_value());
  // OpenAI clients send call arguments as JSON text; most templates render them with tojson.
  const tool_call_family family = detect_tool_call_family(name_source);
  for (boost::json::value& message : inputs.messages) {
    if (message.is_object()) adapt_tool_call_arguments(message.get_object(), family);
  }
  for (const auto& [name, text] : source_.templates) {
    if (&text == &name_source) return compiled_.at(name).render(make_chat_context(inputs));
  }
  throw std::invalid_argument("this model has no usable chat template");
}

prepared_prompt_result prompt_preparer::prepare(const generation_request& request) const {
  prepared_prompt_result out;
  try {
    switch (request.kind) {
      case prompt_kind::text:
        out.text = request.prompt_text;
        out.ids = tokenizer_->encode(request.prompt_text, true);
        break;
      case prompt_kind::token_ids:
        out.ids = request.prompt_token_ids;
        out.text = tokenizer_->decode(request.prompt_token_ids, false);
        break;
      case prompt_kind::chat:
        out.text = render_chat(request.chat_messages_json, request.chat_tools_json, request.chat_template_kwargs_json,
                               request.add_generation_prompt);
        // The template writes BOS and other special tokens itself.
        out.ids = tokenizer_->encode(out.text, false);
        break;
    }
  } catch (const chat_template_error& e) {
    out.error = std::string("chat template: ") + e.what();
    out.param = "messages";
  } catch (const std::exception& e) {
    out.error = e.what();
    out.param = request.kind == prompt_kind::chat ? "messages" : "prompt";
  }
  return out;
}

text_task_result prompt_preparer::run(const text_task& task) const {
  text_task_result out;
  switch (task.type) {
    case text_task::kind::encode:
      out.ids = tokenizer_->encode(task.text, task.add_special_tokens);
      break;
    case text_task::kind::encode_chat: {
      std::string text;
      try {
        text = render_chat(task.chat_messages_json, task.chat_tools_json, "", task.add_generation_prompt);
      } catch (const std::exception& e) {
        // Templates reject conversations they cannot render (raise_exception): the client's to fix.
        out.error = error_event{{},
                                error_kind::invalid_request,
                                std::string("the chat template failed: ") + e.what(),
                                "messages",
                                "template_error"};
        return out;
      }
      out.ids = tokenizer_->encode(text, task.add_special_tokens);
      break;
    }
    case text_task::kind::decode:
      out.text = tokenizer_->decode(task.ids, task.skip_special_tokens);
      break;
  }
  return out;
}

}  // namespace troupe

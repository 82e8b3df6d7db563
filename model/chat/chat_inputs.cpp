// What transformers feeds a chat template: the render context built by
// apply_chat_template, and the template(s) found in a model directory.

#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>

#include "model/chat/chat_template.hpp"
#include "model/chat/exact_json.hpp"

namespace troupe {

namespace {

constexpr std::uintmax_t max_config_bytes = 64u << 20;
constexpr std::uintmax_t max_template_bytes = 4u << 20;
constexpr std::array<std::string_view, 7> special_token_fields = {"bos_token", "eos_token", "unk_token", "sep_token",
                                                                  "pad_token", "cls_token", "mask_token"};
constexpr std::array<std::string_view, 3> reasoning_fields = {"reasoning_content", "thinking", "reasoning"};

[[noreturn]] void input_error(const std::string& message) {
  throw chat_template_error(chat_template_error_kind::input, "ValueError", message, 0, 0);
}

std::string read_file(const std::filesystem::path& path, std::uintmax_t max_bytes) {
  std::error_code ec;
  std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) input_error(path.string() + ": cannot read: " + ec.message());
  if (size > max_bytes)
    input_error(path.string() + ": file of " + std::to_string(size) + " bytes exceeds the limit of " +
                std::to_string(max_bytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) input_error(path.string() + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// transformers' _alias_reasoning_fields: {"thinking": r, **message, "reasoning_content": r}.
boost::json::object alias_reasoning(const boost::json::object& message) {
  const boost::json::value* reasoning = nullptr;
  for (std::string_view field : reasoning_fields) {
    auto it = message.find(field);
    if (it != message.end() && !it->value().is_null()) {
      reasoning = &it->value();
      break;
    }
  }
  if (reasoning == nullptr) return message;
  boost::json::object out;
  out["thinking"] = *reasoning;
  for (const auto& [k, v] : message) out[k] = v;
  out["reasoning_content"] = *reasoning;
  return out;
}

std::optional<std::string> special_token(const boost::json::object& config, std::string_view field,
                                         const std::filesystem::path& file) {
  auto it = config.find(field);
  if (it == config.end() || it->value().is_null()) return std::nullopt;
  if (it->value().is_string()) return std::string(it->value().get_string());
  if (it->value().is_object()) {
    auto content = it->value().get_object().find("content");
    if (content != it->value().get_object().end() && content->value().is_string())
      return std::string(content->value().get_string());
  }
  input_error(file.string() + ": field '" + std::string(field) +
              "' must be a string or an object with a string \"content\"");
}

std::map<std::string, std::string> templates_from_config(const boost::json::object& config,
                                                         const std::filesystem::path& file) {
  std::map<std::string, std::string> templates;
  auto it = config.find("chat_template");
  if (it == config.end() || it->value().is_null()) return templates;
  if (it->value().is_string()) {
    templates["default"] = std::string(it->value().get_string());
    return templates;
  }
  if (!it->value().is_array()) input_error(file.string() + ": field 'chat_template' must be a string or a list");
  std::size_t index = 0;
  for (const auto& entry : it->value().get_array()) {
    const boost::json::object* obj = entry.if_object();
    auto name = obj ? obj->find("name") : nullptr;
    auto text = obj ? obj->find("template") : nullptr;
    if (obj == nullptr || name == obj->end() || text == obj->end() || !name->value().is_string() ||
        !text->value().is_string())
      input_error(file.string() + ": field 'chat_template[" + std::to_string(index) +
                  "]' must be an object with string 'name' and 'template'");
    templates[std::string(name->value().get_string())] = std::string(text->value().get_string());
    ++index;
  }
  return templates;
}

std::map<std::string, std::string> templates_from_files(const std::filesystem::path& dir) {
  std::map<std::string, std::string> templates;
  std::filesystem::path main = dir / "chat_template.jinja";
  if (std::filesystem::is_regular_file(main)) templates["default"] = read_file(main, max_template_bytes);
  std::filesystem::path extra = dir / "additional_chat_templates";
  std::error_code ec;
  if (std::filesystem::is_directory(extra, ec)) {
    for (const auto& entry : std::filesystem::directory_iterator(extra, ec)) {
      if (entry.path().extension() == ".jinja" && entry.is_regular_file())
        templates[entry.path().stem().string()] = read_file(entry.path(), max_template_bytes);
    }
  }
  return templates;
}

}  // namespace

boost::json::object make_chat_context(const chat_template_inputs& inputs) {
  if (inputs.messages.empty())
    input_error("Cannot apply chat template to an empty conversation. Provide at least one message.");
  boost::json::array messages;
  for (std::size_t i = 0; i < inputs.messages.size(); ++i) {
    const boost::json::object* message = inputs.messages[i].if_object();
    if (message == nullptr) input_error("messages[" + std::to_string(i) + "] must be an object");
    boost::json::object kept;
    for (const auto& [k, v] : *message)
      if (!v.is_null()) kept[k] = v;
    messages.push_back(alias_reasoning(kept));
  }
  boost::json::object context = inputs.special_tokens;
  for (const auto& [k, v] : inputs.extra) {
    if (k == "messages" || k == "tools" || k == "documents" || k == "add_generation_prompt")
      input_error("extra template variable '" + std::string(k) + "' would replace an apply_chat_template argument");
    context[k] = v;
  }
  context["messages"] = std::move(messages);
  context["tools"] = inputs.tools ? boost::json::value(*inputs.tools) : boost::json::value(nullptr);
  context["documents"] = inputs.documents ? boost::json::value(*inputs.documents) : boost::json::value(nullptr);
  context["add_generation_prompt"] = inputs.add_generation_prompt;
  return context;
}

const std::string& chat_template_source::select(bool with_tools) const {
  if (templates.empty())
    input_error(
        "Cannot use chat template functions because tokenizer.chat_template is not set and no template "
        "argument was passed! For information about writing templates and setting the "
        "tokenizer.chat_template attribute, please see the documentation at "
        "https://huggingface.co/docs/transformers/main/en/chat_templating");
  if (with_tools && templates.count("tool_use") != 0) return templates.at("tool_use");
  if (templates.count("default") != 0) return templates.at("default");
  std::string names;
  for (const auto& [name, text] : templates) names += (names.empty() ? "'" : ", '") + name + "'";
  input_error(
      "This model has multiple chat templates with no default specified! Please either pass a chat "
      "template or the name of the template you wish to use to the `chat_template` argument. Available "
      "template names are [" +
      names + "].");
}

chat_template_source load_chat_template(const std::filesystem::path& model_dir) {
  chat_template_source source;
  std::filesystem::path config_file = model_dir / "tokenizer_config.json";
  boost::json::object config;
  if (std::filesystem::exists(config_file)) {
    std::string text = read_file(config_file, max_config_bytes);
    boost::system::error_code ec;
    boost::json::value parsed = parse_json_exact(text, ec);
    if (ec) input_error(config_file.string() + ": not valid JSON: " + ec.message());
    if (!parsed.is_object()) input_error(config_file.string() + ": must hold a JSON object");
    config = std::move(parsed.get_object());
  }
  source.templates = templates_from_files(model_dir);
  if (source.templates.empty()) source.templates = templates_from_config(config, config_file);
  if (source.templates.empty() && !std::filesystem::exists(config_file))
    input_error(model_dir.string() + ": no tokenizer_config.json or chat_template.jinja");
  for (std::string_view field : special_token_fields)
    if (std::optional<std::string> token = special_token(config, field, config_file))
      source.special_tokens[field] = *token;
  return source;
}

}  // namespace troupe

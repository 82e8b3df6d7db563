// `troupe chat-template`: renders a model's chat template over a conversation
// exactly as transformers' apply_chat_template(tokenize=False) would, and
// prints the prompt with no newline added.

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

#include "model/chat/chat_template.hpp"
#include "model/chat/exact_json.hpp"
#include "model/gguf.hpp"
#include "model/model_files.hpp"
#include "tools/cli/command_registry.hpp"

namespace troupe::cli {
namespace {

struct chat_template_options {
  std::string model_dir;
  std::string messages_file;
  std::string tools_file;
  std::string extra_file;
  bool add_generation_prompt = false;
};

/// Reads and parses a JSON file (floats correctly rounded, like Python's json); errors name the file and the option.
boost::json::value read_json_file(const std::string& path, const char* option) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(std::string(option) + ": cannot open " + path);
  std::ostringstream text;
  text << in.rdbuf();
  boost::system::error_code ec;
  boost::json::value value = parse_json_exact(text.str(), ec);
  if (ec) throw std::runtime_error(std::string(option) + ": " + path + " is not valid JSON: " + ec.message());
  return value;
}

boost::json::array read_array(const std::string& path, const char* option) {
  boost::json::value value = read_json_file(path, option);
  if (!value.is_array()) throw std::runtime_error(std::string(option) + ": " + path + " must hold a JSON array");
  return std::move(value.get_array());
}

void run(const chat_template_options& options) {
  chat_template_source source = is_gguf_path(options.model_dir) ? load_model_chat_template(options.model_dir)
                                                                : load_chat_template(options.model_dir);
  chat_template_inputs inputs;
  inputs.messages = read_array(options.messages_file, "--messages");
  if (!options.tools_file.empty()) inputs.tools = read_array(options.tools_file, "--tools");
  if (!options.extra_file.empty()) {
    boost::json::value extra = read_json_file(options.extra_file, "--extra");
    if (!extra.is_object()) throw std::runtime_error("--extra: " + options.extra_file + " must hold a JSON object");
    inputs.extra = std::move(extra.get_object());
  }
  inputs.add_generation_prompt = options.add_generation_prompt;
  inputs.special_tokens = source.special_tokens;
  chat_template tpl = chat_template::compile(source.select(inputs.tools.has_value()));
  std::cout << tpl.render(make_chat_context(inputs)) << std::flush;
}

void setup(CLI::App& root) {
  auto options = std::make_shared<chat_template_options>();
  CLI::App* command = root.add_subcommand(
      "chat-template", "Render a model's chat template over a conversation; prints the prompt exactly");
  command
      ->add_option("--model", options->model_dir,
                   "Model directory with tokenizer_config.json and/or chat_template.jinja")
      ->required();
  command->add_option("--messages", options->messages_file, "JSON file: array of {\"role\", \"content\", ...} messages")
      ->required();
  command->add_option("--tools", options->tools_file, "JSON file: array of tool schemas");
  command->add_option("--extra", options->extra_file,
                      "JSON file: object of extra template variables (e.g. enable_thinking)");
  command->add_flag("--add-generation-prompt", options->add_generation_prompt, "End with the assistant turn's header");
  command->callback([options] { run(*options); });
}

const bool registered = register_command("chat-template", setup);

}  // namespace
}  // namespace troupe::cli

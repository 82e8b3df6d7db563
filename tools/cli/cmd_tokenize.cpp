// `troupe tokenize`: text -> token ids, as a JSON array (or one array per
// JSON-string line with --jsonl). Needs only tokenizer.json (+ config).

#include <CLI/CLI.hpp>
#include <boost/json.hpp>
#include <iostream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>

#include "model/model_files.hpp"
#include "model/text/tokenizer.hpp"
#include "tools/cli/command_registry.hpp"

namespace troupe::cli {
namespace {

struct tokenize_options {
  std::string model_dir;
  std::string text;
  bool add_special_tokens = false;
  bool jsonl = false;
  CLI::Option* text_option = nullptr;
};

void print_ids(const std::vector<text::token_id>& ids) {
  std::string line = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) line.append(i ? "," : "").append(std::to_string(ids[i]));
  line.append("]\n");
  std::cout << line;
}

void tokenize_lines(const text::tokenizer& tok, bool add_special_tokens) {
  std::string line;
  for (std::size_t number = 1; std::getline(std::cin, line); ++number) {
    boost::system::error_code error;
    const boost::json::value value = boost::json::parse(line, error);
    if (error || !value.is_string()) {
      throw std::runtime_error("stdin line " + std::to_string(number) + ": expected one JSON string per line");
    }
    const auto& text = value.get_string();
    try {
      print_ids(tok.encode(std::string_view(text.data(), text.size()), add_special_tokens));
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error("stdin line " + std::to_string(number) + ": " + e.what());
    }
  }
}

void run(const tokenize_options& options) {
  const auto tok = load_model_tokenizer(options.model_dir);
  std::ios::sync_with_stdio(false);
  if (options.jsonl) {
    if (options.text_option->count() > 0) throw std::runtime_error("--jsonl reads stdin; do not pass --text");
    tokenize_lines(*tok, options.add_special_tokens);
    return;
  }
  std::string input = options.text;
  if (options.text_option->count() == 0) {
    input.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  try {
    print_ids(tok->encode(input, options.add_special_tokens));
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
}

void setup(CLI::App& root) {
  auto options = std::make_shared<tokenize_options>();
  CLI::App* command = root.add_subcommand("tokenize", "Encode text to token ids; prints a JSON array");
  command->add_option("--model", options->model_dir, "Model directory containing tokenizer.json, or a GGUF file")
      ->required();
  command->add_flag("--add-special-tokens", options->add_special_tokens,
                    "Apply the post-processor (BOS/EOS) like HF add_special_tokens=True");
  options->text_option =
      command->add_option("--text", options->text, "Text to encode (default: all of stdin, byte for byte)");
  command->add_flag("--jsonl", options->jsonl, "Read one JSON string per stdin line; print one array per line");
  command->callback([options] { run(*options); });
}

const bool registered = register_command("tokenize", setup);

}  // namespace
}  // namespace troupe::cli

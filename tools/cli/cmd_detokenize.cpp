// `troupe detokenize`: token ids -> text, printed exactly (no newline added).

#include <CLI/CLI.hpp>
#include <charconv>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>

#include "model/model_files.hpp"
#include "model/text/tokenizer.hpp"
#include "tools/cli/command_registry.hpp"

namespace troupe::cli {
namespace {

struct detokenize_options {
  std::string model_dir;
  std::string ids;
  bool skip_special_tokens = false;
};

/// Parses "1,2, 3" into ids; throws naming the bad item.
std::vector<text::token_id> parse_ids(std::string_view list) {
  std::vector<text::token_id> ids;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t comma = std::min(list.find(',', start), list.size());
    std::string_view item = list.substr(start, comma - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    text::token_id id = 0;
    const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || error != std::errc() || end != item.data() + item.size()) {
      throw std::runtime_error("--ids: \"" + std::string(item) + "\" is not a 32-bit integer");
    }
    ids.push_back(id);
    start = comma + 1;
  }
  return ids;
}

void run(const detokenize_options& options) {
  const auto tok = load_model_tokenizer(options.model_dir);
  const std::vector<text::token_id> ids = options.ids.empty() ? std::vector<text::token_id>{} : parse_ids(options.ids);
  std::cout << tok->decode(ids, options.skip_special_tokens) << std::flush;
}

void setup(CLI::App& root) {
  auto options = std::make_shared<detokenize_options>();
  CLI::App* command = root.add_subcommand("detokenize", "Decode token ids to text; prints the text exactly");
  command->add_option("--model", options->model_dir, "Model directory containing tokenizer.json, or a GGUF file")
      ->required();
  command->add_option("--ids", options->ids, "Comma-separated token ids, e.g. 1,2,3")->required();
  command->add_flag("--skip-special-tokens", options->skip_special_tokens, "Leave out special tokens");
  command->callback([options] { run(*options); });
}

const bool registered = register_command("detokenize", setup);

}  // namespace
}  // namespace troupe::cli

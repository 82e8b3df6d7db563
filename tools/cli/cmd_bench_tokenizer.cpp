// `troupe bench-tokenizer`: single-threaded encode throughput on a text file,
// the C++ side of tools/bench/tokenizer_hf.py (same document split).

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/model_files.hpp"
#include "model/text/tokenizer.hpp"
#include "tools/cli/command_registry.hpp"

namespace troupe::cli {
namespace {

struct bench_options {
  std::string model_dir;
  std::string text_file;
  int repeat = 5;
  bool add_special_tokens = false;
};

/// Documents end after each blank line ("\n\n"), as in tokenizer_hf.py.
std::vector<std::string_view> split_documents(std::string_view text) {
  std::vector<std::string_view> documents;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t blank = text.find("\n\n", start);
    const std::size_t end = blank == std::string_view::npos ? text.size() : blank + 2;
    documents.push_back(text.substr(start, end - start));
    start = end;
  }
  return documents;
}

std::size_t encode_all(const text::tokenizer& tok, const std::vector<std::string_view>& documents, bool special) {
  std::size_t tokens = 0;
  for (const std::string_view document : documents) tokens += tok.encode(document, special).size();
  return tokens;
}

void run(const bench_options& options) {
  if (options.repeat < 1) throw std::runtime_error("--repeat must be at least 1");
  std::ifstream file(options.text_file, std::ios::binary);
  if (!file) throw std::runtime_error(options.text_file + ": cannot open file");
  std::ostringstream contents;
  contents << file.rdbuf();
  const std::string text = std::move(contents).str();
  const auto tok = load_model_tokenizer(options.model_dir);
  const std::vector<std::string_view> documents = split_documents(text);
  const std::size_t tokens = encode_all(*tok, documents, options.add_special_tokens);  // warm-up (fills the cache)
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < options.repeat; ++i) encode_all(*tok, documents, options.add_special_tokens);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double megabytes = static_cast<double>(text.size()) * options.repeat / 1e6;
  std::printf(
      "{\"impl\": \"troupe\", \"bytes\": %zu, \"documents\": %zu, \"tokens\": %zu, \"repeat\": %d, "
      "\"seconds\": %.4f, \"mb_per_s\": %.3f}\n",
      text.size(), documents.size(), tokens, options.repeat, seconds, megabytes / seconds);
}

void setup(CLI::App& root) {
  auto options = std::make_shared<bench_options>();
  CLI::App* command =
      root.add_subcommand("bench-tokenizer", "Single-threaded encode throughput (MB/s, 1 MB = 1e6 bytes); prints JSON");
  command->add_option("--model", options->model_dir, "Model directory containing tokenizer.json, or a GGUF file")
      ->required();
  command->add_option("--text", options->text_file, "UTF-8 text; documents end at blank lines")->required();
  command->add_option("--repeat", options->repeat, "Timed passes over the text after one warm-up pass");
  command->add_flag("--add-special-tokens", options->add_special_tokens, "Encode with add_special_tokens=True");
  command->callback([options] { run(*options); });
}

const bool registered = register_command("bench-tokenizer", setup);

}  // namespace
}  // namespace troupe::cli

// `troupe score`: the full logits of a prompt as a NumPy file, and its perplexity.

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>

#include "model/batch_runner.hpp"
#include "model/npy.hpp"
#include "model/perplexity.hpp"
#include "tools/cli/cli_model.hpp"
#include "tools/cli/command_registry.hpp"

namespace troupe::cli {
namespace {

struct score_flags {
  model_flags model;
  std::string prompt;
  std::string prompt_ids;
  std::string prompt_file;
  std::string logits_npy;
  int chunk = 512;
  int window = 0;
};

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("--prompt-file: cannot read " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void run(const score_flags& flags) {
  loaded_model loaded = load_model(flags.model);
  std::vector<std::int32_t> ids;
  if (!flags.prompt_ids.empty()) {
    ids = parse_id_list(flags.prompt_ids, "--prompt-ids");
  } else if (!flags.prompt.empty() || !flags.prompt_file.empty()) {
    if (!loaded.tokenizer) throw std::runtime_error(loaded.dir.string() + ": no tokenizer.json; use --prompt-ids");
    ids = loaded.tokenizer->encode(flags.prompt_file.empty() ? flags.prompt : read_text_file(flags.prompt_file), true);
  } else {
    throw std::runtime_error("give --prompt, --prompt-file or --prompt-ids");
  }
  const auto vocab = static_cast<std::size_t>(loaded.model->vocab_size());
  for (auto id : ids) {
    if (static_cast<std::size_t>(id) >= vocab)
      throw std::runtime_error("--prompt-ids: token id " + std::to_string(id) + " is outside the vocabulary");
  }
  batch_runner runner(*loaded.model, runner_options{});
  perplexity_result score;
  if (flags.logits_npy.empty()) {
    // Text longer than the window is scored in non-overlapping windows, each starting without context.
    score = windowed_perplexity(runner, ids, vocab, static_cast<std::size_t>(flags.window), flags.chunk);
  } else {
    if (flags.window > 0 && static_cast<std::size_t>(flags.window) < ids.size())
      throw std::runtime_error("--logits-npy needs the whole prompt in one window");
    const std::vector<float> logits = runner.prompt_logits({ids}, flags.chunk)[0];
    write_npy(flags.logits_npy, {static_cast<std::int64_t>(ids.size()), static_cast<std::int64_t>(vocab)},
              logits.data());
    score = perplexity_from(next_token_nll_sum(logits, ids, vocab), static_cast<std::int64_t>(ids.size()) - 1);
  }
  std::cout << "tokens " << ids.size() << "  mean_nll " << score.mean_nll << "  perplexity " << score.perplexity
            << "\n";
}

void setup(CLI::App& root) {
  auto flags = std::make_shared<score_flags>();
  CLI::App* cmd = root.add_subcommand("score", "full logits of a prompt (and its perplexity)");
  add_model_flags(*cmd, flags->model);
  cmd->add_option("--prompt", flags->prompt, "prompt text (tokenized with special tokens)");
  cmd->add_option("--prompt-ids", flags->prompt_ids, "prompt as comma-separated token ids");
  cmd->add_option("--prompt-file", flags->prompt_file, "prompt text read from this file");
  cmd->add_option("--window", flags->window, "score in non-overlapping windows of this many tokens (0: one window)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--logits-npy", flags->logits_npy, "write float32 logits [n_tokens, vocab] to this .npy file");
  cmd->add_option("--chunk", flags->chunk, "prompt tokens per step")->check(CLI::PositiveNumber);
  cmd->callback([flags] { run(*flags); });
}

const bool registered = register_command("score", setup);

}  // namespace
}  // namespace troupe::cli
